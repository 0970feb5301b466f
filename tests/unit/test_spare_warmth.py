"""job/spare_warmth.py: a waiting spare warms its workers at every call, rehearses at most once
per period and never two at once, and a rehearsal still running gives way at the go."""

from __future__ import annotations

import threading

from recovery_lib.job.spare_warmth import SpareWarmth


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_workers_warm_every_call_and_rehearsals_at_most_once_per_period():
    clock, warmed, rehearsed = Clock(), [], []
    warmth = SpareWarmth(
        lambda: warmed.append(clock.now),
        lambda: rehearsed.append(clock.now) or {"input_rows": 1},
        lambda: None,
        every_s=40.0,
        clock=clock,
    )
    for t in (0.0, 20.0, 39.0, 41.0, 60.0, 85.0):
        clock.now = t
        warmth()
        warmth.stop()  # nothing runs: returns at once
        if warmth._thread is not None:
            warmth._thread.join(5)
    assert warmed == [0.0, 20.0, 39.0, 41.0, 60.0, 85.0]
    assert rehearsed == [0.0, 41.0, 85.0]
    assert warmth.rehearsals == [{"input_rows": 1}] * 3


def test_no_second_rehearsal_while_one_runs_and_the_go_stops_it():
    clock, started, release = Clock(), [], threading.Event()
    stopped: list[bool] = []

    def slow_rehearsal() -> dict:
        started.append(clock.now)
        release.wait(10)
        return {"finished": not stopped}

    warmth = SpareWarmth(
        lambda: None, slow_rehearsal, lambda: (stopped.append(True), release.set()), 1.0, clock
    )
    warmth()
    clock.now = 100.0
    warmth()  # the first still runs
    assert len(started) == 1 and warmth.rehearsing()
    warmth.stop()
    assert stopped == [True] and not warmth.rehearsing()
    assert warmth.rehearsals == [{"finished": False}]


def test_a_failed_rehearsal_is_recorded_and_the_spare_goes_on():
    def failing() -> dict:
        raise RuntimeError("broker gone")

    warmth = SpareWarmth(lambda: None, failing, lambda: None, 1.0)
    warmth()
    warmth._thread.join(5)
    assert warmth.rehearsals == [{"failed": "broker gone"}]


def test_without_a_rehearsal_only_the_workers_are_warmed():
    warmed = []
    warmth = SpareWarmth(lambda: warmed.append(1), None, lambda: None, 40.0)
    warmth()
    assert warmed == [1] and not warmth.rehearsing() and warmth.rehearsals == []
