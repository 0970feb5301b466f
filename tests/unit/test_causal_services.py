"""Causal services and determinant encoding, without Spark: an in-memory log isolates the
replay logic (the Kafka log is tested end to end in tests/test_causal_e2e.py)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recovery_lib.causal.determinants import (
    CorruptDeterminants,
    Determinant,
    DeterminantMismatch,
    DeterminantRun,
    StreamKey,
    assemble,
)
from recovery_lib.causal.log import DeterminantLog
from recovery_lib.causal.services import CausalClock, CausalContext

KEY = StreamKey("job", 3, "prices", 1)


class MemoryLog(DeterminantLog):
    def __init__(self) -> None:
        self.pending: list[DeterminantRun] = []
        self.durable: list[DeterminantRun] = []

    def append(self, run: DeterminantRun) -> None:
        self.pending.append(run)

    def flush(self) -> None:
        # Through the wire format, as the Kafka log does.
        self.durable += [DeterminantRun.decode(*run.encode()) for run in self.pending]
        self.pending.clear()

    def read(self, key: StreamKey) -> list[Determinant]:
        return assemble([r for r in self.durable if r.key == key])

    def truncate(self, committed_batch: int) -> int:
        self.durable = [r for r in self.durable if r.key.batch > committed_batch]
        return 0


class Changing:
    """A service whose answers change on every call, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, item: int) -> dict:
        self.calls += 1
        return {"item": item, "rate": self.calls * 1.5}


def ticking(step_ms: float):  # a fake wall clock advancing per reading
    counter = itertools.count()
    return lambda: 1_000_000 + next(counter) * step_ms / 1000


def workload(ctx: CausalContext, service: Changing, n: int = 20) -> list:
    out = []
    for i in range(n):
        out.append((ctx.clock.now_ms(), ctx.call(service, i % 3), float(ctx.random.random()), i))
    return out


def context(log: DeterminantLog, replay=None, step_ms: float = 0.4) -> CausalContext:
    ctx = CausalContext(KEY, log, replay)
    ctx.clock = CausalClock(ctx, source=ticking(step_ms))
    return ctx


def test_replay_returns_the_logged_values_without_running_the_services():
    log = MemoryLog()
    first = context(log)
    live = Changing()
    expected = workload(first, live)
    first.flush()
    assert live.calls == 20

    replayed_service = Changing()
    again = context(log, log.read(KEY), step_ms=7.0)  # another clock speed: must not matter
    assert workload(again, replayed_service) == expected
    assert replayed_service.calls == 0
    assert again.logged == 0


def test_clock_logs_one_determinant_per_changed_millisecond():
    log = MemoryLog()
    ctx = context(log, step_ms=0.25)  # four readings per millisecond
    readings = [ctx.clock.now_ms() for _ in range(40)]
    ctx.flush()
    clock_dets = [d for d in log.read(KEY) if d.kind == "clock"]
    assert len(set(readings)) == len(clock_dets) == 10


def test_random_logs_one_seed_per_stream():
    log = MemoryLog()
    ctx = context(log)
    values = ctx.random.random(1000)
    ctx.flush()
    assert [d.kind for d in log.read(KEY)] == ["seed"]
    again = context(log, log.read(KEY))
    assert (again.random.random(1000) == values).all()


def test_past_the_logged_prefix_services_run_live_and_log_where_the_prefix_ended():
    log = MemoryLog()
    first = context(log)
    service = Changing()
    head = workload(first, service, n=5)
    first.flush()  # the first attempt died after 5 rows

    second = context(log, log.read(KEY))
    second_service = Changing()
    rows = workload(second, second_service, n=12)
    second.flush()
    assert rows[:5] == head
    assert second_service.calls == 7  # only the rows beyond the prefix ran live

    third = context(log, log.read(KEY))
    assert workload(third, Changing(), n=12) == rows  # and those are now logged too


def test_a_different_call_order_on_replay_is_an_error_not_silent_divergence():
    log = MemoryLog()
    ctx = context(log)
    ctx.call(Changing(), 1)
    ctx.flush()
    again = context(log, log.read(KEY))
    with pytest.raises(DeterminantMismatch, match="same order"):
        _ = again.random


def test_unloggable_results_are_refused_with_advice():
    ctx = context(MemoryLog())
    with pytest.raises(TypeError, match="JSON-serialisable"):
        ctx.call(lambda: object())


def test_a_corrupt_record_is_detected():
    key, value = DeterminantRun(KEY, 0, (Determinant("call", {"rate": 1.0}),)).encode()
    damaged = value[:-3] + b"9}]"
    with pytest.raises(CorruptDeterminants, match="checksum"):
        DeterminantRun.decode(key, damaged)
    with pytest.raises(CorruptDeterminants, match="truncated"):
        DeterminantRun.decode(key, value[:2])


def test_assemble_keeps_the_first_attempt_and_stops_at_a_gap():
    a = DeterminantRun(KEY, 0, (Determinant("call", 1), Determinant("call", 2)), attempt=0)
    b = DeterminantRun(KEY, 1, (Determinant("call", 99), Determinant("call", 3)), attempt=1)
    gap = DeterminantRun(KEY, 5, (Determinant("call", 6),), attempt=1)
    assert [d.value for d in assemble([b, gap, a])] == [1, 2, 3]


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    st.lists(
        st.tuples(st.sampled_from(["clock", "seed", "call"]), values | st.binary()), max_size=8
    ),
    st.integers(0, 10**6),
)
def test_runs_survive_the_wire_format(items, first_seq):
    run = DeterminantRun(KEY, first_seq, tuple(Determinant(k, v) for k, v in items), attempt=2)
    assert DeterminantRun.decode(*run.encode()) == run
