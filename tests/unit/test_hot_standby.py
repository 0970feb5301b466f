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
from recovery_lib.io.exceptions import InvalidSinkOption, WriterFenced
from recovery_lib.io.hooks import writer_epoch
from recovery_lib.io.sinks import kafka_sink
from recovery_lib.io.sinks.kafka_sink import KafkaStreamWriter, SinkOptions


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


def test_before_the_takeover_only_committed_batches_are_followed(logs: SimpleNamespace) -> None:
    available = {"t": {"0": 500}}
    (logs.primary / "offsets" / "1").write_text(_entry(1, 20))
    assert logs.policy.cut({"t": {"0": 10}}, available, None) == {"t": {"0": 10}}  # planned only
    (logs.primary / "commits" / "1").write_text("v1\n{}")
    assert logs.policy.cut({"t": {"0": 10}}, available, None) == {"t": {"0": 20}}
    (logs.live / "offsets" / "1").write_text("followed")
    # Nothing more committed: the hot query plans nothing, however much input is there.
    assert logs.policy.cut({"t": {"0": 20}}, available, None) == {"t": {"0": 20}}
    assert not logs.policy.done and logs.policy.followed == [1]


def test_after_the_takeover_the_planned_batch_is_followed_then_cuts_are_free(
    logs: SimpleNamespace,
) -> None:
    available = {"t": {"0": 500}}
    (logs.primary / "offsets" / "1").write_text(_entry(1, 35))  # the primary died in batch 1
    logs.marker.write_text("2")
    assert logs.policy.cut({"t": {"0": 10}}, available, None) == {"t": {"0": 35}}
    (logs.live / "offsets" / "1").write_text("followed")
    assert logs.policy.cut({"t": {"0": 35}}, available, None) == {"t": {"0": 500}}
    assert logs.policy.done and logs.policy.followed == [1]


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
    rows = pa.RecordBatch.from_pydict({"key": ["a", "b", "c"], "value": ["1", "2", "3"]})
    commit = KafkaStreamWriter(options, SCHEMA).write(iter([rows]))
    assert (commit.batch_id, commit.partition, commit.rows, commit.dropped) == (4, 1, 0, 3)
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
