"""A job's heartbeat that keeps failing (a full or read-only disk) says so once, not on every
beat; it says so again after it worked in between."""

from __future__ import annotations

import errno
import logging
import threading

from recovery_lib.runtime.heartbeat import HeartbeatWriter


def test_a_heartbeat_that_keeps_failing_is_warned_about_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="recovery_lib.runtime.heartbeat")
    writer = HeartbeatWriter(tmp_path / "hb" / "beat.json", interval_s=0.01)
    # The disk is made full by the beat itself, not by changing files under the running writer
    # (removing its directory raced with the temporary file it was writing there). Each step
    # waits for beats the writer has finished, so nothing here depends on timing.
    disk_full = threading.Event()
    finished = {"ok": 0, "failed": 0}
    changed = threading.Condition()
    beat = writer.beat

    def beat_on_a_disk_that_may_be_full() -> None:
        outcome = "failed"
        try:
            if disk_full.is_set():
                raise OSError(errno.ENOSPC, "No space left on device", str(writer.path))
            beat()
            outcome = "ok"
        finally:
            with changed:
                finished[outcome] += 1
                changed.notify_all()

    writer.beat = beat_on_a_disk_that_may_be_full  # type: ignore[method-assign]

    def wait_for(kind: str, more: int) -> None:
        with changed:
            target = finished[kind] + more
            assert changed.wait_for(lambda: finished[kind] >= target, timeout=60), finished

    def warnings() -> list[str]:  # this writer's (a writer of another test may still beat)
        return [
            r.getMessage()
            for r in caplog.records
            if "heartbeat" in r.getMessage() and str(tmp_path) in r.getMessage()
        ]

    writer.start()
    try:
        disk_full.set()  # every beat from now on fails
        wait_for("failed", 10)
        assert len(warnings()) == 1, warnings()
        disk_full.clear()  # beats work again ...
        wait_for("ok", 2)
        disk_full.set()  # ... and fail again: a new warning
        wait_for("failed", 3)
    finally:
        writer.stop()
    assert len(warnings()) == 2, warnings()
