"""Failures still due when a run's input ends: recorded as not injected, or, with
``inject_grace_s``, given more input (continuing the same event sequence) until they are in."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from recovery_lib.experiment import runner
from recovery_lib.experiment.runner import Experiment, ExperimentConfig


class Clock:
    """The runner's clock, in its ticks: only the runner's sleep moves it, and the fake input
    keeps in step (it produces at each tick and ends, its thread gone, before the runner looks
    again), so the run's seconds are exact whatever the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0
        self.changed = threading.Condition()
        self.seen: dict[threading.Thread, float] = {}  # feeder -> the time it last worked at

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self._settle()  # a feeder started in this tick starts at this tick's time
        with self.changed:
            self.now += seconds
            self.changed.notify_all()
        self._settle()

    def _settle(self) -> None:
        """Until every input feeder has worked at the current time or ended."""
        deadline = time.monotonic() + 30
        while True:
            with self.changed:
                feeders = [t for t in threading.enumerate() if t.name == "input feeder"]
                if all(self.seen.get(t) == self.now or not t.is_alive() for t in feeders):
                    return
                assert time.monotonic() < deadline, "the input feeder fell out of step"
                self.changed.wait(0.01)


class FakeInput:
    """Produces ``rate`` events per second (no broker) on the clock's ticks, recording where
    each call started."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.calls: list[tuple[int, float]] = []

    def produce(self, first, rate, duration_s, on_progress, stop) -> None:  # noqa: ANN001
        self.calls.append((first, duration_s))
        clock, me = self.clock, threading.current_thread()
        with clock.changed:
            started = clock.now
            while True:
                on_progress(int((clock.now - started) * rate))
                if clock.now - started >= duration_s or stop():
                    break
                clock.seen[me] = clock.now
                clock.changed.notify_all()
                if not clock.changed.wait_for(lambda: clock.now > clock.seen[me], timeout=30):
                    break  # the runner is gone (a failed test)
            clock.seen.pop(me, None)


def feed_and_inject(
    monkeypatch: pytest.MonkeyPatch, grace_s: float, back_after_s: float
) -> tuple[Any, FakeInput, list[str]]:
    """A run of 1.5 s of input with two failures due at 0.2 s and 0.4 s; the job is back from
    the first failure only ``back_after_s`` after it. The runner looks every 0.5 s."""
    clock = Clock()
    monkeypatch.setattr(runner, "time", clock)
    cfg = ExperimentConfig(
        fail="net-reset",
        fail_at_s=0.2,
        repeat=2,
        every_s=0.2,
        duration_s=1.5,
        rate=100.0,
        inject_grace_s=grace_s,
    )
    exp = object.__new__(Experiment)
    exp.cfg, exp.input, exp._stop = cfg, FakeInput(clock), threading.Event()
    exp.progress = lambda _m: None
    injected: list[str] = []
    last = [0.0]

    def recovered(kind, sup, arm_dir) -> bool:  # noqa: ANN001
        return not injected or clock.monotonic() - last[0] >= back_after_s

    def inject(kind, sup, arm_dir, elapsed, run_id) -> Any:  # noqa: ANN001
        injected.append(kind)
        last[0] = clock.monotonic()
        return SimpleNamespace(settle=lambda *a, **k: None)

    exp._recovered, exp._inject = recovered, inject
    run = SimpleNamespace(
        sup=SimpleNamespace(tick=lambda: None, restarts=[]),
        t0=clock.monotonic(),
        t0_ms=0,
        failures=[],
        collector=SimpleNamespace(samples=[]),
        arm_dir=None,
        run_id="r",
        extended_s=0.0,
        not_injected=[],
        name="faulty",
    )
    exp._feed_and_inject(run, warmup=7, inject="net-reset")
    return run, exp.input, injected


def test_without_grace_a_failure_still_due_is_not_injected(monkeypatch):
    run, inputs, injected = feed_and_inject(monkeypatch, grace_s=0.0, back_after_s=2.0)
    assert injected == ["net-reset"]
    assert [f["kind"] for f in run.not_injected] == ["net-reset"]
    assert run.extended_s == 0.0
    assert len(inputs.calls) == 1


def test_grace_extends_the_input_until_the_failure_is_in(monkeypatch):
    run, inputs, injected = feed_and_inject(monkeypatch, grace_s=5.0, back_after_s=2.0)
    assert injected == ["net-reset", "net-reset"]
    assert run.not_injected == []
    # The input went on from where the timed input stopped (the warm-up and 1.5 s at 100
    # events/s), and stopped once the failure was in, well before the 5 s of grace: the
    # first failure at the 0.5 s look, the timed input over at 1.5 s, the job back at 2.5 s,
    # the extra input over by the next look.
    assert len(inputs.calls) == 2
    first, _ = inputs.calls[1]
    assert first == 7 + 150
    assert run.extended_s == 3.0 - 1.5


def test_grace_that_runs_out_leaves_the_failure_not_injected(monkeypatch):
    run, inputs, injected = feed_and_inject(monkeypatch, grace_s=0.5, back_after_s=10.0)
    assert injected == ["net-reset"]
    assert [f["kind"] for f in run.not_injected] == ["net-reset"]
    assert run.extended_s == 0.5  # one look after the grace began: it ran out


def test_a_drain_that_gives_up_says_how_much_input_is_left(monkeypatch):
    """The job too slow to process its input before catch_up_timeout_s: the run's report says
    how many input records it had not committed (its output lacks what they give)."""
    exp = object.__new__(Experiment)
    exp.cfg = ExperimentConfig(catch_up_timeout_s=0.3)
    exp.progress = lambda _m: None
    exp.job = SimpleNamespace(name="q3")
    commits = {"t": {"0": 40, "1": 50}}
    monkeypatch.setattr("recovery_lib.experiment.runner.committed_offsets", lambda _c: commits)
    exp._probe = SimpleNamespace(ends=lambda tps: {tp: 100 for tp in tps})
    sup = SimpleNamespace(tick=lambda: None, is_ready=lambda: True, live_checkpoints=Path("x"))
    collector = SimpleNamespace(samples=[])
    assert exp._drain(sup, collector, "faulty") == 60 + 50
    commits["t"] = {"0": 100, "1": 100}  # all committed: the drain ends once output is quiet
    exp.cfg.quiet_s, exp.cfg.catch_up_timeout_s = 0.0, 30.0
    assert exp._drain(sup, collector, "faulty") == 0
