"""An injected failure's record: a signal fires when sent, an armed hook when its marker
appears (or never), and the report says which."""

from __future__ import annotations

import os
from pathlib import Path

from recovery_lib.experiment.failures import ArmedHook, FailureStatus, InjectedFailure


def test_an_armed_hook_is_unknown_until_settled_then_fired_or_not(tmp_path: Path) -> None:
    hook = ArmedHook(tmp_path, "midwrite.arm", "midwrite.fired")
    (tmp_path / "midwrite.arm").write_text("rows=20")
    armed = InjectedFailure("mid-write", 3.0, FailureStatus.ARMED, hook=hook)
    assert armed.fired is None and armed.to_dict()["status"] == "armed"
    (tmp_path / "midwrite.fired").write_text("")
    os.utime(tmp_path / "midwrite.fired", (1_000_012.5, 1_000_012.5))
    armed.settle(t0_ms=1_000_000_000, rearm=True)
    assert armed.fired is True and armed.fired_ms == 1_000_012_500 and armed.at_s == 12.5
    assert not (tmp_path / "midwrite.fired").exists()  # disarmed for the next failure
    assert not (tmp_path / "midwrite.arm").exists()
    armed.settle(t0_ms=0, rearm=False)  # settled once: a second settle changes nothing
    assert armed.at_s == 12.5

    never = InjectedFailure("task-retry", 5.0, FailureStatus.ARMED, hook=hook)
    never.settle(t0_ms=0, rearm=False)
    assert never.status is FailureStatus.NOT_FIRED and never.fired is False
    assert "fired_ms" not in never.to_dict()


def test_a_signal_fired_when_it_was_sent() -> None:
    kill = InjectedFailure("driver-kill", 20.0, FailureStatus.FIRED, fired_ms=42)
    kill.settle(t0_ms=0, rearm=True)  # nothing to settle
    assert kill.to_dict() == {
        "kind": "driver-kill", "at_s": 20.0, "fired": True, "status": "fired", "fired_ms": 42
    }  # fmt: skip


def test_an_armed_network_reset_fires_when_its_probe_says_so() -> None:
    fired_at: list[int] = []
    reset = InjectedFailure(
        "net-reset", 4.0, FailureStatus.ARMED, probe=lambda: fired_at[0] if fired_at else None
    )
    reset.detail = {"api": "produce"}
    assert reset.fired is None
    fired_at.append(1_000_007_250)
    reset.settle(t0_ms=1_000_000_000, rearm=True)
    assert reset.fired is True and reset.at_s == 7.25
    assert reset.to_dict()["api"] == "produce" and reset.to_dict()["fired_ms"] == 1_000_007_250
    never = InjectedFailure("net-reset", 4.0, FailureStatus.ARMED, probe=lambda: None)
    never.settle(t0_ms=0, rearm=False)
    assert never.status is FailureStatus.NOT_FIRED
