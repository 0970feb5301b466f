"""The soak's chaos target counts a connection reset as fired only once its request came."""

from __future__ import annotations

from pathlib import Path

from recovery_lib.experiment.failures import FailureStatus, InjectedFailure
from recovery_lib.ops.chaos import ChaosTarget


class ResetOnlyNetwork:
    """Network faults that only arm resets (stands in for the fault proxy)."""

    def __init__(self) -> None:
        self.fired_ms: int | None = None

    def over(self) -> bool:
        return True

    def inject(self, kind: str, failure: InjectedFailure) -> None:
        failure.status, failure.fired_ms = FailureStatus.ARMED, None
        failure.probe = lambda: self.fired_ms
        failure.detail = {"api": "produce"}


def test_an_armed_reset_counts_as_fired_only_after_its_request(tmp_path: Path):
    network = ResetOnlyNetwork()
    target = ChaosTarget(network, lambda: tmp_path, lambda: None)  # type: ignore[arg-type]
    event = target.inject("net-reset")
    assert not event.fired and "skipped" not in event.detail
    target.settle()
    assert not event.fired  # no produce came: it never hurt the job
    network.fired_ms = 1234
    target.settle()
    assert event.fired and event.detail["fired_ms"] == 1234
    target.settle()  # settled once: not counted again
    assert [e.fired for e in target.events] == [True]
