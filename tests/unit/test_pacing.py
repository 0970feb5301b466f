"""The one pacing loop of the generators (runtime/pacing.py), on a fake clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from recovery_lib.runtime.pacing import Pacer


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_pacer_spaces_records_at_its_rate_from_its_start():
    clock = FakeClock()
    pacer = Pacer(200.0, clock=clock, sleep=clock.sleep)
    for sent in range(1, 401):
        clock.now += 0.001  # each send takes 1 ms of the 5 ms spacing
        pacer.wait(sent)
    assert abs(pacer.elapsed_s() - 2.0) < 1e-9  # 400 records at 200/s: 2 s, sends included


def test_a_late_sender_catches_up_without_sleeping():
    clock = FakeClock()
    pacer = Pacer(10.0, clock=clock, sleep=clock.sleep)
    clock.now += 5.0  # a 5 s stall: 50 records are due
    for sent in range(1, 51):
        pacer.wait(sent)
    assert clock.slept == []
    pacer.wait(51)
    assert len(clock.slept) == 1 and abs(clock.slept[0] - 0.1) < 1e-9


def test_no_rate_never_waits():
    clock = FakeClock()
    pacer = Pacer(None, clock=clock, sleep=clock.sleep)
    pacer.wait(10**9)
    assert clock.slept == [] and pacer.ahead_s(10**9) == 0.0


@given(st.floats(1.0, 1e5), st.integers(1, 10**6), st.floats(0.0, 100.0))
def test_after_wait_the_record_is_due(rate: float, sent: int, busy: float):
    clock = FakeClock()
    pacer = Pacer(rate, clock=clock, sleep=clock.sleep)
    clock.now += busy
    pacer.wait(sent)
    assert pacer.ahead_s(sent) <= 1e-9
    assert clock.now - pacer.started >= min(busy, sent / rate) - 1e-9
