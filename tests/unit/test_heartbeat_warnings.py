"""A job's heartbeat that keeps failing (a full or read-only disk) says so once, not on every
beat; it says so again after it worked in between."""

from __future__ import annotations

import logging
import shutil
import time

from recovery_lib.runtime.heartbeat import HeartbeatWriter


def test_a_heartbeat_that_keeps_failing_is_warned_about_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="recovery_lib.runtime.heartbeat")
    writer = HeartbeatWriter(tmp_path / "hb" / "beat.json", interval_s=0.01)
    beats = {"ok": 0, "failed": 0}
    beat = writer.beat

    def counted() -> None:
        try:
            beat()
        except Exception:
            beats["failed"] += 1
            raise
        beats["ok"] += 1

    writer.beat = counted  # type: ignore[method-assign]

    def wait_for(kind: str, more: int) -> None:
        target, deadline = beats[kind] + more, time.monotonic() + 30
        while beats[kind] < target:
            assert time.monotonic() < deadline, beats
            time.sleep(0.01)

    def warnings() -> list[str]:  # this writer's (a writer of another test may still beat)
        return [
            r.getMessage()
            for r in caplog.records
            if "heartbeat" in r.getMessage() and str(tmp_path) in r.getMessage()
        ]

    writer.start()
    try:
        shutil.rmtree(tmp_path / "hb")  # every beat from now on fails (no directory)
        wait_for("failed", 10)
        assert len(warnings()) == 1, warnings()
        (tmp_path / "hb").mkdir()  # beats work again ...
        wait_for("ok", 2)
        shutil.rmtree(tmp_path / "hb")  # ... and fail again: a new warning
        wait_for("failed", 3)
    finally:
        writer.stop()
    assert len(warnings()) == 2, warnings()
