"""CEC's operator and recovery as a specification: whatever the batch cuts, the crash point in
the log, a torn last record and the checkpoint knobs, the results in the log after recovery
are exactly those of a failure-free run (no result lost, none written twice)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recovery_lib.cec.exceptions import LogTooShort
from recovery_lib.cec.operator import AggregateShard
from recovery_lib.cec.policy import CheckpointPolicy, CheckpointSlices
from recovery_lib.cec.records import LogRecord, RecordKind
from recovery_lib.cec.recovery import eventual_checkpoint
from recovery_lib.cec.windows import CountWindows, TimeWindows

Tuple = tuple[int, int, str, float, int]  # partition, offset, key, value, event ms


class Log:
    """An output partition: records in order, offsets from 0."""

    def __init__(self) -> None:
        self.records: list[LogRecord] = []

    def append(self, record: LogRecord) -> None:
        self.records.append(replace(record, offset=len(self.records)))

    def newest_first(self):  # noqa: ANN201
        return reversed(self.records)

    def results(self) -> Counter:
        return Counter(
            (r.window, r.value) for r in self.records if r.kind is RecordKind.RESULT and r.intact
        )


def _stream(draw, kind) -> dict[int, list[Tuple]]:  # noqa: ANN001
    parts = draw(st.integers(1, 3))
    keys = draw(st.integers(1, 5))
    out: dict[int, list[Tuple]] = {}
    for p in range(parts):
        n = draw(st.integers(0, 40))
        t = draw(st.integers(0, 5))
        rows = []
        for o in range(n):
            t += draw(st.integers(0, 3))
            # Count windows need a key's tuples in one partition (their order decides windows).
            k = draw(st.integers(0, keys - 1))
            key = f"k{k * parts + p}" if isinstance(kind, CountWindows) else f"k{k}"
            rows.append((p, o, key, float(draw(st.integers(1, 9))), t))
        out[p] = rows
    return out


def _batches(stream: dict[int, list[Tuple]], cuts: list[int]) -> list[list[Tuple]]:
    """Micro-batches: batch i holds, per partition, offsets [cuts[i-1], cuts[i]); rows in
    partition order, offsets ascending (the order the driver applies them in)."""
    batches, lo = [], 0
    for hi in [*cuts, 10**9]:
        batches.append([row for p in sorted(stream) for row in stream[p] if lo <= row[1] < hi])
        lo = hi
    return batches


def _shard(kind, log: Log, parts: int, policy: CheckpointPolicy) -> AggregateShard:  # noqa: ANN001
    clock = iter(range(0, 10**9, 1000))  # every call a new period: slices always open
    return AggregateShard(
        kind=kind,
        aggregate="avg",
        emit=log.append,
        input_partitions=tuple(range(parts)),
        policy=policy,
        slices=CheckpointSlices(policy, clock=lambda: float(next(clock))),
    )


def _run(shard: AggregateShard, rows: list[Tuple]) -> None:
    shard.process_batch([(*row, 0) for row in rows])


kinds = st.one_of(
    st.builds(CountWindows, st.integers(1, 4)),
    st.builds(
        lambda size, slide, late: TimeWindows(size, min(slide, size), late),
        st.integers(1, 8),
        st.integers(1, 8),
        st.integers(0, 2),
    ),
)
policies = st.builds(
    CheckpointPolicy,
    extent_target=st.sampled_from([math.inf, 1, 3, 10]),
    replay_target=st.sampled_from([math.inf, 2, 20]),
    check_every=st.sampled_from([1, 3]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kind=kinds, policy=policies)
def test_results_after_crashes_are_those_of_a_failure_free_run(data, kind, policy) -> None:  # noqa: ANN001
    stream = _stream(data.draw, kind)
    parts = max(len(stream), 1)
    cuts = sorted(data.draw(st.lists(st.integers(1, 40), max_size=4)))

    reference = Log()
    ref_shard = _shard(kind, reference, parts, policy)
    for batch in _batches(stream, cuts):
        _run(ref_shard, batch)

    log = Log()
    shard = _shard(kind, log, parts, policy)
    batches = _batches(stream, cuts)
    crashes = data.draw(st.integers(0, 3))
    b, replay = 0, []
    while b < len(batches):
        written = len(log.records)
        _run(shard, replay + batches[b])
        replay = []
        if crashes and data.draw(st.booleans()):
            crashes -= 1
            # The driver dies in batch b: the log keeps a prefix of what it wrote (all of it
            # when it died after the commit), maybe followed by a torn record.
            keep = data.draw(st.integers(written, len(log.records)))
            committed = keep == len(log.records) and data.draw(st.booleans())
            del log.records[keep:]
            if log.records and data.draw(st.booleans()):
                torn = replace(log.records[-1], value=log.records[-1].value[:-1] + b"?")
                log.append(torn)
            # Spark re-runs the uncommitted batch; CEC replays the input from T before it.
            b = b + 1 if committed else b
            checkpoint = eventual_checkpoint(log.newest_first(), len(log.records))
            shard = _shard(kind, log, parts, policy)
            shard.load(checkpoint)
            start = checkpoint.replay_from if not checkpoint.empty else {}
            resume_at = [0, *cuts, 10**9][b]
            replay = [
                row
                for p in sorted(stream)
                for row in stream[p]
                if start.get(p, 0) <= row[1] < resume_at
            ]
            continue
        b += 1
    _run(shard, replay)  # died after the last batch's commit: the restart only replays
    assert log.results() == reference.results()
    assert all(c == 1 for c in log.results().values())


def test_a_torn_last_footprint_falls_back_to_the_older_one() -> None:
    log = Log()
    policy = CheckpointPolicy(extent_target=1, check_every=1)
    shard = _shard(CountWindows(3), log, 1, policy)
    _run(shard, [(0, 0, "a", 1.0, 0), (0, 1, "b", 2.0, 0)])
    kinds = [(r.kind, r.window) for r in log.records]
    assert kinds[-1] == (RecordKind.CHECK, "b@0:1")  # q = 2 > Q = 1 after b's G_open
    last = log.records[-1]
    log.records[-1] = replace(last, value=last.value + b" ")  # torn: fingerprint mismatch
    checkpoint = eventual_checkpoint(log.newest_first(), len(log.records))
    assert checkpoint.torn == 1
    footprints = {fp.window: fp.kind for fp in checkpoint.footprints}
    assert footprints == {"a@0:0": RecordKind.CHECK, "b@0:1": RecordKind.OPEN}
    assert checkpoint.replay_from == {0: 1}  # b's G_open, written before b's tuple


def test_a_log_truncated_below_the_eventual_checkpoint_is_refused() -> None:
    log = Log()
    shard = _shard(CountWindows(5), log, 1, CheckpointPolicy())
    _run(shard, [(0, 0, "a", 1.0, 0), (0, 1, "b", 1.0, 0)])
    del log.records[0]  # a's G_open gone
    with pytest.raises(LogTooShort, match="truncated below the eventual checkpoint"):
        eventual_checkpoint(log.newest_first(), 2)


def test_records_survive_kafka_encoding_and_detect_damage() -> None:
    log = Log()
    shard = _shard(TimeWindows(10, 5), log, 2, CheckpointPolicy())
    _run(shard, [(0, 0, "a", 3.0, 12), (1, 0, "a", 4.0, 30)])
    for record in log.records:
        back = LogRecord.decode(record.key.encode(), record.value, record.headers(), 7)
        assert back == replace(record, offset=7)
        assert back.intact
        damaged = LogRecord.decode(record.key.encode(), record.value + b"x", record.headers())
        assert damaged is not None and not damaged.intact
    assert LogRecord.decode(b"k", b"v", [("rl.id", b"1-0-0")]) is None


def test_the_extent_target_bounds_what_recovery_reads() -> None:
    """Fifty slow windows open first, then a fast key closes a window every 10 tuples: without
    G_check the slow windows' G_opens drift back in the log; Q keeps them near the end."""
    rows = [(0, o, f"slow{o}", 1.0, 0) for o in range(50)]
    rows += [(0, o, "fast", 1.0, 0) for o in range(50, 5_050)]
    extents, sizes = {}, {}
    for q in (math.inf, 100):
        log = Log()
        policy = CheckpointPolicy(extent_target=q, check_every=1)
        _run(_shard(CountWindows(10), log, 1, policy), rows)
        checkpoint = eventual_checkpoint(log.newest_first(), len(log.records))
        extents[q], sizes[q] = checkpoint.extent, len(log.records)
        assert len(checkpoint.footprints) == 50
    assert extents[100] <= 101
    assert extents[math.inf] == sizes[math.inf] == 1_050  # the whole log


def test_a_count_window_key_on_two_input_partitions_is_refused() -> None:
    from recovery_lib.cec.exceptions import KeySpansPartitions

    shard = _shard(CountWindows(3), Log(), 2, CheckpointPolicy())
    with pytest.raises(KeySpansPartitions, match="more than one input partition"):
        _run(shard, [(0, 0, "a", 1.0, 0), (1, 0, "a", 1.0, 0)])


def test_the_lazy_scan_of_kafka_messages_finds_the_same_eventual_checkpoint() -> None:
    from recovery_lib.cec.records import LazyRecord

    log = Log()
    policy = CheckpointPolicy(extent_target=5, check_every=1)
    rows = [(p, o, f"k{(o * 7 + p) % 9}", float(o), 10 * o) for p in (0, 1) for o in range(60)]
    _run(_shard(TimeWindows(30, 10), log, 2, policy), rows)
    torn = replace(log.records[-1], value=log.records[-1].value + b"!")
    log.append(torn)
    messages = [LazyRecord(r.key.encode(), r.value, r.headers(), r.offset) for r in log.records]
    eager = eventual_checkpoint(log.newest_first(), len(log.records))
    lazy = eventual_checkpoint(reversed(messages), len(log.records))
    assert lazy == eager and lazy.torn == 1 and lazy.footprints


def test_the_replay_starts_at_the_oldest_footprint_of_all_shards_or_from_zero() -> None:
    from recovery_lib.cec.aggregate import replay_start

    def checkpoint_after(rows):  # noqa: ANN001, ANN202
        log = Log()
        _run(_shard(CountWindows(2), log, 2, CheckpointPolicy()), rows)
        return eventual_checkpoint(log.newest_first(), len(log.records))

    # Shard one: its open window opened at offset 4 of partition 0 (after a closed window).
    one = checkpoint_after([(0, 2, "a", 1.0, 0), (0, 3, "a", 1.0, 0), (0, 4, "a", 1.0, 0)])
    # Shard two: its open window opened at offset 1 of partition 1, before which it had read
    # nothing of partition 1 (absent: from offset 0).
    two = checkpoint_after([(0, 5, "b", 1.0, 0), (0, 6, "b", 1.0, 0), (1, 1, "c", 1.0, 0)])
    assert one.replay_from == {0: 4} and two.replay_from == {0: 7}
    assert replay_start([one, two], (0, 1)) == {0: 4}
    empty = eventual_checkpoint(iter(()), 0)  # a shard that never wrote: from the start
    assert replay_start([one, empty], (0, 1)) == {0: 0, 1: 0}
    assert replay_start([empty], ()) == {}
