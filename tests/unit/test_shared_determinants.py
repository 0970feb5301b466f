"""Shared determinant streams of two replicas (no broker: an in-memory log with the topic's one
total order). Both replicas must end up using the same values, whoever writes, through races
for the first claim, a writer's death mid-stream and a zombie writer that comes back."""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery_lib.causal.determinants import CALL, Determinant, DeterminantRun, StreamKey
from recovery_lib.causal.log import CausalConfig, DeterminantLog
from recovery_lib.causal.services import CausalContext
from recovery_lib.ha.fencing import FencedError
from recovery_lib.ha.replication import shared_determinants as shared
from recovery_lib.ha.replication.shared_determinants import ClaimedStream, StreamFold

KEY = StreamKey("out.replicas", 7, "convert", 0)


class MemoryLog(DeterminantLog):
    """Every flushed run in one list: the determinant topic's single partition."""

    def __init__(self, state_dir: str, records: list[DeterminantRun], lock: threading.Lock):
        super().__init__(CausalConfig(job="out.replicas", state_dir=state_dir))
        self.records, self.lock, self._pending = records, lock, []
        self.reads = 0

    def runs(self, key: StreamKey) -> list[DeterminantRun]:
        self.reads += 1
        return super().runs(key)

    def append(self, run: DeterminantRun) -> None:
        if run.determinants or run.claim:
            self._pending.append(run)

    def flush(self) -> None:
        with self.lock:
            self.records.extend(self._pending)
        self._pending = []

    def _index(self, mark):  # noqa: ANN001, ANN202
        index = defaultdict(list)
        with self.lock:
            for run in self.records:
                index[run.key].append(run)
        return index

    def truncate(self, committed_batch: int) -> int:
        return 0


def run_(seq, values, writer, term, claim=False):  # noqa: ANN001, ANN201
    dets = tuple(Determinant(CALL, v) for v in values)
    return DeterminantRun(KEY, seq, dets, epoch=term, writer=writer, claim=claim)


def test_the_first_claim_wins_and_a_second_claim_of_the_same_term_is_dropped():
    fold = StreamFold.of(
        [run_(0, [], "a/1", 1, True), run_(0, [], "b/2", 1, True), run_(0, [10, 11], "a/1", 1)]
    )
    assert fold.writer.writer == "a/1" and fold.length == 2 and fold.dropped == 1


def test_a_takeover_starts_at_the_prefix_end_and_the_zombies_later_runs_are_dropped():
    fold = StreamFold.of(
        [
            run_(0, [], "a/1", 1, True),
            run_(0, [10, 11], "a/1", 1),
            run_(2, [], "b/2", 2, True),  # b took over: a's lease expired
            run_(2, [99], "a/1", 1),  # a comes back (SIGCONT): a zombie
            run_(2, [12, 13], "b/2", 2),
        ]
    )
    assert [fold.values[i].value for i in range(fold.length)] == [10, 11, 12, 13]
    assert fold.writer.writer == "b/2" and fold.dropped == 1


def test_a_claim_that_lost_the_race_against_the_writers_next_run_is_dropped():
    # b saw two values and claimed from 2, but a's run with value 2 reached the log first.
    fold = StreamFold.of(
        [run_(0, [], "a/1", 1, True), run_(0, [10, 11], "a/1", 1), run_(2, [12], "a/1", 1),
         run_(2, [], "b/2", 2, True)]
    )  # fmt: skip
    assert fold.writer.writer == "a/1" and fold.length == 3 and fold.dropped == 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a/1", "b/2"]), st.booleans(), st.integers(0, 3)), max_size=30
    )
)
def test_the_accepted_prefix_is_contiguous_and_each_value_comes_from_its_terms_writer(steps):
    """Any log: claims and runs of two writers in any order, at any positions."""
    log: list[DeterminantRun] = []
    for writer, claim, seq in steps:
        term = 1 + (seq % 2)
        log.append(run_(seq, [] if claim else [f"{writer}@{seq}"], writer, term, claim))
    fold = StreamFold.of(log)
    assert sorted(fold.values) == list(range(fold.length))
    for seq, det in fold.values.items():
        owner = [t for t in fold.terms if t.from_seq <= seq][-1]
        assert det.value.startswith(owner.writer)
    assert all(b.from_seq >= a.from_seq for a, b in zip(fold.terms, fold.terms[1:], strict=False))


# -- two replicas' contexts over one log --------------------------------------------------------


@pytest.fixture()
def shared_log(tmp_path, monkeypatch):
    monkeypatch.setattr(shared, "POLL_S", 0.001)
    records: list[DeterminantRun] = []
    lock = threading.Lock()
    return lambda: MemoryLog(str(tmp_path / "state"), records, lock), records


def stream(log, me, expired=lambda holder: False, timeout=10.0):  # noqa: ANN001, ANN201
    source = ClaimedStream(KEY, log, me.split("/")[0], "/nowhere", 3.0, timeout)
    source.me = me
    source._expired = expired
    return source


def compute(ctx: CausalContext, n: int, tag: str, out: list, flush_every: int = 5) -> None:
    for i in range(n):
        out.append(ctx.call(lambda i=i: f"{tag}{i}"))
        if i % flush_every == flush_every - 1:
            ctx.flush()
    ctx.flush()


def test_two_replicas_racing_on_one_stream_use_the_same_values(shared_log):
    make_log, records = shared_log
    results: dict[str, list] = {"a": [], "b": []}
    contexts = {
        r: CausalContext(KEY, (log := make_log()), source=stream(log, f"{r}/{i}"))
        for i, r in enumerate("ab")
    }
    threads = [
        threading.Thread(target=compute, args=(contexts[r], 40, r, results[r])) for r in "ab"
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results["a"] == results["b"] and len(results["a"]) == 40
    writer = StreamFold.of(records).writer.writer[0]
    assert results["a"] == [f"{writer}{i}" for i in range(40)]  # one writer's, live
    follower = "b" if writer == "a" else "a"
    assert contexts[follower].logged == 0 and contexts[follower].replayed == 40


def test_a_follower_takes_over_a_dead_writers_stream_and_goes_on_live(shared_log):
    make_log, records = shared_log
    a_log, b_log = make_log(), make_log()
    a = CausalContext(KEY, a_log, source=stream(a_log, "a/1"))
    used_a: list = []
    compute(a, 12, "a", used_a, flush_every=4)  # a wrote 12, then died
    b = CausalContext(KEY, b_log, source=stream(b_log, "b/2", expired=lambda h: h == "a/1"))
    used_b: list = []
    compute(b, 30, "b", used_b)
    assert used_b == used_a + [f"b{i}" for i in range(12, 30)]
    # One read served the 12 logged values, one more found the end and claimed, and every
    # flush of b's 18 live values checked that b still writes (4 flushes).
    assert b_log.reads <= 2 + 1 + 4, b_log.reads
    fold = StreamFold.of(records)
    assert [(t.writer, t.from_seq) for t in fold.terms] == [("a/1", 0), ("b/2", 12)]
    # a comes back (it was paused, not dead): its next flush finds it lost the stream.
    for i in range(12, 15):
        a._record(CALL, f"a{i}")
    with pytest.raises(FencedError, match="took this stream over"):
        a.flush()
    assert [StreamFold.of(records).values[i].value for i in range(30)] == used_b


def test_a_follower_that_waits_too_long_for_a_live_writer_says_whom_it_waited_for(shared_log):
    make_log, _ = shared_log
    a_log, b_log = make_log(), make_log()
    a = CausalContext(KEY, a_log, source=stream(a_log, "a/1"))
    compute(a, 3, "a", [])
    b = CausalContext(KEY, b_log, source=stream(b_log, "b/2", timeout=0.05))
    for i in range(3):
        assert b.call(lambda: "mine") == f"a{i}"
    with pytest.raises(Exception, match="waited .* for determinant 3 of writer a/1"):
        b.call(lambda: "mine")
