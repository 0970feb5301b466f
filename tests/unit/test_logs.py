"""One logging setup per process, and progress lines a person reads: one per phase and at
most one per interval, not one per poll."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from recovery_lib.runtime.logs import ProgressThrottle, configure_logging


def test_progress_passes_phase_changes_and_one_line_per_interval() -> None:
    now = [0.0]
    out: list[str] = []
    progress = ProgressThrottle(out.append, every_s=10.0, clock=lambda: now[0])
    for i in range(60):  # a poll every 0.5 s for 30 s
        now[0] = i * 0.5
        progress(f"[faulty] catching up: {i * 100:,} outputs so far")
    progress("[faulty] draining: 3 outputs so far")  # a new phase: at once
    progress("[faulty] draining: 4 outputs so far")  # same phase, too soon: dropped
    assert out == [
        "[faulty] catching up: 0 outputs so far",
        "[faulty] catching up: 2,000 outputs so far",
        "[faulty] catching up: 4,000 outputs so far",
        "[faulty] draining: 3 outputs so far",
    ]


def test_logging_is_set_up_once_and_follows_a_swapped_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    swapped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", swapped)
    configure_logging()
    configure_logging()  # a second call adds no second handler
    ours = [h for h in root.handlers if getattr(h, "_recovery_lib_handler", False)]
    assert len(ours) == 1
    logging.getLogger("recovery_lib.test").info("progress %d", 7)
    assert "INFO recovery_lib.test: progress 7" in swapped.getvalue()
    later = io.StringIO()
    monkeypatch.setattr(sys, "stderr", later)  # a harness swapped stderr again
    logging.getLogger("recovery_lib.test").warning("still here")
    assert "still here" in later.getvalue() and "still here" not in swapped.getvalue()


def test_another_librarys_info_is_not_ours_to_print(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    shown = io.StringIO()
    monkeypatch.setattr(sys, "stderr", shown)
    configure_logging()
    py4j = logging.getLogger("py4j.clientserver")
    monkeypatch.setattr(py4j, "level", py4j.level)  # restored after the test
    py4j.setLevel(logging.INFO)  # the logger lets INFO through: only our filter can drop it
    py4j.info("Closing down clientserver connection")
    py4j.warning("a real problem")
    assert "Closing down" not in shown.getvalue() and "a real problem" in shown.getvalue()


def test_a_repeated_warning_is_logged_once_until_it_changes_or_clears(caplog) -> None:
    import logging

    from recovery_lib.runtime.logs import WarnOnChange

    logger = logging.getLogger("recovery_lib.test_warn_on_change")
    warn = WarnOnChange(logger)
    with caplog.at_level(logging.DEBUG, logger=logger.name):
        for message in ("broker down", "broker down", "broker down", "disk full"):
            warn(message)
        warn.clear()
        warn("disk full")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["broker down", "disk full", "disk full"]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 2
