"""An injected failure, typed: its kind, when it was injected, and whether it fired. A signal
fires when it is sent; an armed hook (mid-write, task-retry ...) fires later, when a task
reaches it, or never: ``settle`` reads the hook's marker. A failure that did not fire makes
the verdict inconclusive (the oracle's rule)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from recovery_lib.runtime.faults import MIDPAUSE_PGID, MIDPAUSE_WHERE


class FailureStatus(StrEnum):
    FIRED = "fired"  # the signal was sent, or the armed hook fired
    ARMED = "armed"  # a hook is armed and has not fired yet
    NOT_FIRED = "not_fired"  # nothing was there to hit, or the armed hook never fired


@dataclass(frozen=True)
class ArmedHook:
    """Where a hook was armed: its arm file and the marker it writes when it fires."""

    directory: Path
    arm_file: str
    marker: str


@dataclass
class InjectedFailure:
    kind: str
    at_s: float  # seconds into the timed phase (for a hook: when it fired, once it did)
    status: FailureStatus
    fired_ms: int | None = None
    hook: ArmedHook | None = None
    pause_s: float | None = None
    pids: list[int] | None = None
    # An armed fault that is not a hook (a network reset waiting for its request): when it
    # fired (ms), or None while it has not.
    probe: Callable[[], int | None] | None = None
    detail: dict[str, Any] | None = None  # what the fault did (e.g. frames a blackhole dropped)

    @property
    def fired(self) -> bool | None:
        """True, False, or None while an armed hook has not fired yet (the reports' field)."""
        if self.status is FailureStatus.ARMED:
            return None
        return self.status is FailureStatus.FIRED

    def probe_fired_ms(self) -> int | None:
        """When an armed probe fault (a reset waiting for its request) fired, or None while it
        has not: a check to repeat, unlike ``settle``, which decides once."""
        return self.probe() if self.probe is not None else None

    def settle(self, t0_ms: int, rearm: bool) -> None:
        """An armed hook's outcome: fired (when, from its marker) or not. With ``rearm`` (a
        next failure follows) the fired hook is disarmed, so it fires again only when armed
        again."""
        if self.status is not FailureStatus.ARMED:
            return  # a signal, or already settled
        if self.probe is not None:
            fired_ms = self.probe_fired_ms()
            if fired_ms is None:
                self.status = FailureStatus.NOT_FIRED
            else:
                self.status, self.fired_ms = FailureStatus.FIRED, fired_ms
                self.at_s = round((fired_ms - t0_ms) / 1000, 2)
            return
        if self.hook is None:
            return
        marker = self.hook.directory / self.hook.marker
        if not marker.exists():
            self.status, self.fired_ms = FailureStatus.NOT_FIRED, None
            return
        self.status = FailureStatus.FIRED
        self.fired_ms = int(marker.stat().st_mtime * 1000)
        self.at_s = round((self.fired_ms - t0_ms) / 1000, 2)
        if rearm:
            marker.unlink()
            for name in (MIDPAUSE_PGID, MIDPAUSE_WHERE, self.hook.arm_file):
                (self.hook.directory / name).unlink(missing_ok=True)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "at_s": self.at_s,
            "fired": self.fired,
            "status": self.status.value,
        }
        if self.fired_ms is not None:
            out["fired_ms"] = self.fired_ms
        if self.pause_s is not None:
            out["pause_s"] = self.pause_s
        if self.pids is not None:
            out["pids"] = self.pids
        if self.detail:
            out.update(self.detail)
        return out
