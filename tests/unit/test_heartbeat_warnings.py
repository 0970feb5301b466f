"""A job's heartbeat that keeps failing (a full or read-only disk) says so once, not on every
beat; it says so again after it worked in between."""

from __future__ import annotations

import logging
import shutil
import time

from recovery_lib.runtime.heartbeat import HeartbeatWriter


def test_a_heartbeat_that_keeps_failing_is_warned_about_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="recovery_lib.runtime.heartbeat")
    writer = HeartbeatWriter(tmp_path / "hb" / "beat.json", interval_s=0.01).start()
    try:
        shutil.rmtree(tmp_path / "hb")  # every beat from now on fails (no directory)
        time.sleep(0.3)  # ~30 beats
        failing = [r for r in caplog.records if "heartbeat" in r.getMessage()]
        assert len(failing) == 1, [r.getMessage() for r in failing]
        (tmp_path / "hb").mkdir()  # beats work again ...
        time.sleep(0.1)
        shutil.rmtree(tmp_path / "hb")  # ... and fail again: a new warning
        time.sleep(0.1)
    finally:
        writer.stop()
    failing = [r for r in caplog.records if "heartbeat" in r.getMessage()]
    assert len(failing) == 2, [r.getMessage() for r in failing]
