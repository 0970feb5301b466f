"""A hot standby's pieces without Spark: its query follows only what the primary committed
until the takeover marker, its sink writes nothing before it and then writes under the epoch
of its epoch file, and which jobs may have one."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from recovery_lib.ha.fencing import EpochStore, epoch_guard
from recovery_lib.ha.standby.follow import FollowLog
from recovery_lib.ha.standby.process import hot_problem
from recovery_lib.io.client_cache import evict
from recovery_lib.io.exceptions import InvalidSinkOption, WriterFenced
from recovery_lib.io.hooks import writer_epoch
from recovery_lib.io.sinks import kafka_sink
from recovery_lib.io.sinks.kafka_sink import KafkaStreamWriter, SinkOptions, read_batch_shift


def _entry(batch: int, end: int) -> str:
    return "\n".join(["v1", json.dumps({"batchTimestampMs": batch}), json.dumps({"t": {"0": end}})])


@pytest.fixture
def logs(tmp_path: Path) -> SimpleNamespace:
    primary = tmp_path / "primary"
    (primary / "offsets").mkdir(parents=True)
    (primary / "commits").mkdir()
    live = tmp_path / "live"
    (live / "offsets").mkdir(parents=True)
    (live / "offsets" / "0").write_text("restored copy at batch 0")
    marker = tmp_path / "taken_over"
    policy = FollowLog(
        {
            "followLog": str(primary / "offsets"),
            "followCheckpoint": str(live),
            "followHoldUntil": str(marker),
        }
    )
    return SimpleNamespace(primary=primary, live=live, marker=marker, policy=policy)


def _plan(logs: SimpleNamespace, start: dict, end: dict) -> None:
    """What Spark does after ``latestOffset`` when there is new data: write its own offset-log
    entry for the next batch, then ask the source to plan it."""
    own = sorted(int(p.name) for p in (logs.live / "offsets").iterdir())
    (logs.live / "offsets" / str(own[-1] + 1)).write_text("planned")
    logs.policy.planned(start, end)


def _primary(logs: SimpleNamespace, batch: int, end: int, committed: bool = True) -> None:
    (logs.primary / "offsets" / str(batch)).write_text(_entry(batch, end))
    if committed:
        (logs.primary / "commits" / str(batch)).write_text("v1\n{}")


def test_before_the_takeover_only_committed_batches_are_followed_merged(
    logs: SimpleNamespace,
) -> None:
    available = {"t": {"0": 500}}
    _primary(logs, 1, 20)
    _primary(logs, 2, 30)
    _primary(logs, 3, 45, committed=False)
    # One batch of its own to the end of the primary's newest committed one (1 and 2).
    end = logs.policy.cut({"t": {"0": 10}}, available, None)
    assert end == {"t": {"0": 30}}
    _plan(logs, {"t": {"0": 10}}, end)
    assert logs.policy.reached == 2
    # Batch 3 is only planned by the primary: nothing to plan, however much input is there.
    assert logs.policy.cut({"t": {"0": 30}}, available, None) == {"t": {"0": 30}}
    (logs.primary / "commits" / "3").write_text("v1\n{}")
    assert logs.policy.cut({"t": {"0": 30}}, available, None) == {"t": {"0": 45}}
    assert not logs.policy.done and not (logs.live / "batch_shift").exists()


def test_at_the_takeover_the_ids_shift_to_the_primarys_and_its_last_batch_is_replayed(
    logs: SimpleNamespace,
) -> None:
    available = {"t": {"0": 500}}
    for batch, end in ((1, 20), (2, 30)):
        _primary(logs, batch, end)
    _primary(logs, 3, 42, committed=False)  # the primary died in batch 3
    end = logs.policy.cut({"t": {"0": 10}}, available, None)
    _plan(logs, {"t": {"0": 10}}, end)  # own batch 1 = the primary's 1 and 2
    shift_file = logs.live / "batch_shift"
    shift_file.write_text('{"shift": 5, "from_batch": 1}')  # from an earlier takeover
    logs.marker.write_text("2")
    # A second source of the same query has a policy of its own, at the same point.
    other = FollowLog(dict(logs.policy.options))
    other.reached = logs.policy.reached
    end = logs.policy.cut({"t": {"0": 30}}, available, None)
    assert end == {"t": {"0": 42}}  # the primary's batch 3, its boundaries
    assert other.cut({"t": {"0": 30}}, available, None) == end
    # Own batch 2 is the primary's 3: output ids = Spark's id + 1 (+ the inherited 5), once.
    assert read_batch_shift(shift_file) == 6
    _plan(logs, {"t": {"0": 30}}, end)
    assert logs.policy.cut({"t": {"0": 42}}, available, None) == {"t": {"0": 500}}  # free
    assert logs.policy.done and logs.policy.followed == [2, 3]
    assert read_batch_shift(shift_file) == 6  # recorded once


def test_the_sink_adds_the_batch_shift_to_sparks_batch_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shift = tmp_path / "batch_shift"
    options = SinkOptions.parse(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "out",
         "holdUntil": str(tmp_path / "marker"), "batchShiftFile": str(shift)}
    )  # fmt: skip
    monkeypatch.setattr(
        kafka_sink, "task_info", lambda: {"batch_id": 4, "partition": 0, "attempt": 0}
    )
    rows = pa.RecordBatch.from_pydict({"key": ["a"], "value": ["1"]})
    assert KafkaStreamWriter(options, SCHEMA).write(iter([rows])).batch_id == 4
    shift.write_text('{"shift": 3, "from_batch": 2}')
    assert KafkaStreamWriter(options, SCHEMA).write(iter([rows])).batch_id == 7


SCHEMA = StructType([StructField("key", StringType()), StructField("value", StringType())])


def test_a_held_sink_computes_its_batch_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "taken_over"
    options = SinkOptions.parse(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "out", "mode": "release",
         "holdUntil": str(marker)}
    )  # fmt: skip
    monkeypatch.setattr(
        kafka_sink, "task_info", lambda: {"batch_id": 4, "partition": 1, "attempt": 0}
    )
    opened = []

    class Unsent:  # a producer that fails the test if anything is produced or flushed
        def __init__(self, config: dict) -> None:
            opened.append(config["bootstrap.servers"])

        def produce(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("a held sink produced a record")

        def flush(self, timeout: float = 0) -> int:
            return 0  # nothing queued

    monkeypatch.setattr(kafka_sink, "_new_producer", Unsent)
    writer = KafkaStreamWriter(options, SCHEMA)
    evict("producer:sink", writer._producer_config())  # another test's cached producer
    rows = pa.RecordBatch.from_pydict({"key": ["a", "b", "c"], "value": ["1", "2", "3"]})
    commit = writer.write(iter([rows]))
    evict("producer:sink", writer._producer_config())
    assert (commit.batch_id, commit.partition, commit.rows, commit.dropped) == (4, 1, 0, 3)
    # The producer it will write with once released is open (connected ahead of a takeover).
    assert opened == ["127.0.0.1:1"]
    marker.write_text("2")
    assert not options.held()  # from the takeover on it writes (needs a broker: not here)


def test_a_held_batch_cannot_be_a_two_phase_commit() -> None:
    with pytest.raises(InvalidSinkOption, match="hot standby"):
        SinkOptions.parse({"topic": "out", "mode": "two_phase", "holdUntil": "/x"})


def test_the_epoch_file_decides_the_epoch_once_it_exists(tmp_path: Path) -> None:
    path = tmp_path / "epoch"
    options = {"epoch": "1", "epochFile": str(path)}
    assert writer_epoch(options) == 1
    path.write_text("3\n")
    assert writer_epoch(options) == 3
    store = EpochStore(tmp_path / "epochs")
    for _ in range(3):
        store.advance("someone")
    guard = epoch_guard({**options, "epochStore": str(store.directory)})
    assert guard is not None
    guard.check("write")  # epoch 3 is current: the hot standby that took it writes
    path.write_text("2")
    with pytest.raises(WriterFenced):
        epoch_guard({**options, "epochStore": str(store.directory)}).check("write")


def test_which_jobs_a_standby_can_follow_hot() -> None:
    plain = SimpleNamespace(causal=None, table_sink=None, sink_mode="dedup")
    assert hot_problem(plain) is None
    assert "causal" in hot_problem(SimpleNamespace(**{**vars(plain), "causal": object()}))
    assert "table" in hot_problem(SimpleNamespace(**{**vars(plain), "table_sink": "delta:x"}))
    assert "two_phase" in hot_problem(SimpleNamespace(**{**vars(plain), "sink_mode": "two_phase"}))
    assert "2 inputs" in hot_problem(plain, inputs=2)


def test_a_hot_querys_lag_is_matched_by_where_its_batches_end(tmp_path: Path) -> None:
    from recovery_lib.ha.standby.process import follower_behind

    primary, follower = tmp_path / "p", tmp_path / "f"
    for root in (primary, follower):
        (root / "offsets").mkdir(parents=True)
        (root / "commits").mkdir()
    for batch in range(6):
        (primary / "offsets" / str(batch)).write_text(_entry(batch, 10 * batch))
        (primary / "commits" / str(batch)).write_text("v1\n{}")
    assert follower_behind(primary, follower) is None  # nothing committed of its own yet
    # Its batches 0, 1 and 2 end where the primary's 0, 2 and 4 do.
    for mine, theirs in ((0, 0), (1, 2), (2, 4)):
        (follower / "offsets" / str(mine)).write_text(_entry(mine, 10 * theirs))
        (follower / "commits" / str(mine)).write_text("v1\n{}")
    assert follower_behind(primary, follower) == 1
    (follower / "offsets" / "3").write_text(_entry(3, 50))
    (follower / "commits" / "3").write_text("v1\n{}")
    assert follower_behind(primary, follower) == 0


def test_a_hot_query_one_batch_behind_a_long_one_is_not_ready(tmp_path: Path) -> None:
    """A warm-up's backlog can be one batch that took the primary minutes: one batch behind it
    is not ready for a failure, however few batches that is."""
    import os

    from recovery_lib.ha.standby.process import HOT_READY_LAG_WORK_S, follower_lag

    primary, follower = tmp_path / "p", tmp_path / "f"
    for root in (primary, follower):
        (root / "offsets").mkdir(parents=True)
        (root / "commits").mkdir()
    now = 1_800_000_000.0
    # The primary's batches: 0 and 1 took 2 s each, 2 (the backlog) 200 s, 3 and 4 2 s each.
    planned, took = now - 300, {0: 2.0, 1: 2.0, 2: 200.0, 3: 2.0, 4: 2.0}
    for batch, seconds in took.items():
        meta = {"batchTimestampMs": int(planned * 1000)}
        lines = ["v1", json.dumps(meta), json.dumps({"t": {"0": 10 * batch}})]
        (primary / "offsets" / str(batch)).write_text("\n".join(lines))
        commit = primary / "commits" / str(batch)
        commit.write_text("v1\n{}")
        os.utime(commit, (planned + seconds, planned + seconds))
        planned += seconds + 1
    (follower / "offsets" / "0").write_text(_entry(0, 10))  # it reached the primary's 1
    (follower / "commits" / "0").write_text("v1\n{}")
    lag = follower_lag(primary, follower)
    assert lag is not None and lag.batches == 3
    assert lag.work_s == pytest.approx(204.0, abs=0.01)
    assert not lag.ready and lag.work_s > HOT_READY_LAG_WORK_S
    (follower / "offsets" / "1").write_text(_entry(1, 20))  # past the long one
    (follower / "commits" / "1").write_text("v1\n{}")
    lag = follower_lag(primary, follower)
    assert lag is not None and (lag.batches, lag.ready) == (2, True)
    assert lag.work_s == pytest.approx(4.0, abs=0.01)


def test_a_hot_standbys_readiness_counts_only_if_checked_after_the_primarys_last_batch() -> None:
    """Its readiness is computed apart from the primary: a "ready" checked before the primary
    committed a long batch must not let a failure in."""
    from recovery_lib.ha.standby.pair import StandbyPair
    from recovery_lib.runtime.heartbeat import Heartbeat

    def node(pid: int, beat: Heartbeat) -> SimpleNamespace:
        return SimpleNamespace(proc=SimpleNamespace(pid=pid), heartbeat=lambda: beat)

    pair = StandbyPair(SimpleNamespace(name="q"), "/nonexistent")
    info = {"ready": True, "shipped_batch": 3, "hot": True, "follower_lag_of": 6}
    standby = Heartbeat(2, 0, True, 1, 2, 0, role="standby", info=info)
    pair.standby = node(2, standby)
    pair.primary = node(1, Heartbeat(1, 0, True, 6, 7, 0))
    assert pair.standby_ready()
    pair.primary = node(1, Heartbeat(1, 0, True, 7, 8, 0))  # committed a batch since
    assert not pair.standby_ready()
    info["follower_lag_of"] = None
    pair.primary = node(1, Heartbeat(1, 0, True, 6, 7, 0))
    assert not pair.standby_ready()
    info.pop("hot")  # a warm standby: its ready flag alone
    assert pair.standby_ready()


def test_the_daemon_says_why_a_hot_standby_is_not_ready() -> None:
    from recovery_lib.ops.daemon import _standby_not_ready

    hot = {"hot": True, "follower_lag_batches": 1, "follower_lag_s": 217.4}
    assert _standby_not_ready(hot) == (
        "hot standby catching up: 1 batch, 217.4 s of the primary's work behind"
    )
    assert _standby_not_ready({"warm": False}) == "no warm standby yet"
