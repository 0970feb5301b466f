"""read_table_outputs: the oracle judges a lakehouse table run like a topic (Delta and Iceberg
tables in tmp_path written by the table sinks, Arrow batches built by hand: no Spark, no Kafka).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from recovery_lib.io.exceptions import InvalidSinkOption
from recovery_lib.io.sinks.delta_sink import DeltaTableSink
from recovery_lib.io.sinks.iceberg_sink import IcebergTableSink, load_iceberg_table
from recovery_lib.io.sinks.ids import EPOCH_HEADER, ID_HEADER, output_id, parse_output_id
from recovery_lib.io.sinks.table_reader import TableNotLineaged, read_table_outputs, table_records
from recovery_lib.io.sinks.table_sink import BATCH_COL, PARTITION_COL, SEQ_COL
from recovery_lib.kafka.headers import INGEST_HEADER
from recovery_lib.verify.contract import ConsistencyContract
from recovery_lib.verify.oracle import Guarantee, Verdict, judge

PARTITIONS, ROWS = 2, 3
PER_BATCH = PARTITIONS * ROWS
CONTRACT = ConsistencyContract()  # deterministic: every output, key and whole value


def output(batch_id: int) -> pa.Table:
    """A job's output (job/frames.py: key, value as JSON, ingest_ms) as ``with_lineage`` gives
    it: ``ROWS`` rows in each of ``PARTITIONS`` Spark partitions."""
    cols: dict[str, list] = {
        k: [] for k in ("key", "value", "ingest_ms", BATCH_COL, PARTITION_COL, SEQ_COL)
    }
    for part in range(PARTITIONS):
        for seq in range(ROWS):
            n = batch_id * 100 + part * 10 + seq
            cols["key"].append(f"k{n % 4}")
            cols["value"].append(json.dumps({"n": n, "k": f"k{n % 4}"}))
            cols["ingest_ms"].append(1_000 + n)
            cols[BATCH_COL].append(batch_id)
            cols[PARTITION_COL].append(part)
            cols[SEQ_COL].append(seq)
    return pa.table(
        {
            "key": pa.array(cols["key"], pa.string()),
            "value": pa.array(cols["value"], pa.string()),
            "ingest_ms": pa.array(cols["ingest_ms"], pa.int64()),
            BATCH_COL: pa.array(cols[BATCH_COL], pa.int64()),
            PARTITION_COL: pa.array(cols[PARTITION_COL], pa.int32()),
            SEQ_COL: pa.array(cols[SEQ_COL], pa.int64()),
        }
    )


def delta_run(path, batches, epoch: int = 0) -> DeltaTableSink:
    sink = DeltaTableSink(path, "job", "q", epoch)
    for b in batches:
        sink.write_batch(output(b), b)
    return sink


def iceberg_run(root, batches, epoch: int = 0) -> IcebergTableSink:
    sink = IcebergTableSink(root, "job", "q", epoch)
    for b in batches:
        sink.write_batch(output(b), b)
    return sink


def run_of(kind: str, where, batches, epoch: int = 0):
    return (delta_run if kind == "delta" else iceberg_run)(where, batches, epoch)


def test_each_row_is_a_record_with_the_kafka_sinks_id_epoch_and_headers(tmp_path):
    delta_run(tmp_path / "t", (0, 1, 2), epoch=2)
    records = read_table_outputs("delta", tmp_path / "t")

    assert len(records) == 3 * PER_BATCH
    expected_ids = {
        output_id(b, p, s) for b in range(3) for p in range(PARTITIONS) for s in range(ROWS)
    }
    assert {r.id for r in records} == expected_ids
    first = records[0]
    assert parse_output_id(first.id) == ("", 0, 0, 0)
    assert first.key == b"k0" and json.loads(first.value) == {"n": 0, "k": "k0"}
    assert dict(first.headers) == {ID_HEADER: b"0-0-0", EPOCH_HEADER: b"2", INGEST_HEADER: b"1000"}
    assert {r.epoch for r in records} == {2}
    assert all(r.timestamp_ms > 0 for r in records)  # when the batch's commit landed
    assert {r.topic for r in records} == {str(tmp_path / "t")}
    for part in range(PARTITIONS):  # offsets: a running index per partition, lineage order
        mine = [r for r in records if r.partition == part]
        assert [r.offset for r in mine] == list(range(3 * ROWS))
        assert [parse_output_id(r.id)[1] for r in mine] == sorted(
            b for b in range(3) for _ in "abc"
        )


def test_the_id_prefix_is_the_kafka_sinks_sink_id(tmp_path):
    delta_run(tmp_path / "t", (4,))
    records = read_table_outputs("delta", tmp_path / "t", id_prefix="q3")
    assert records[0].id == "q3:4-0-0" and parse_output_id(records[0].id) == ("q3", 4, 0, 0)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_table_run_judged_against_itself_is_exactly_once(tmp_path, kind):
    run_of(kind, tmp_path / "run", (0, 1, 2))
    run = read_table_outputs(kind, tmp_path / "run")

    report = judge("job", CONTRACT, run, run, dedup=False)

    assert report.verdict is Verdict.CONSISTENT, report.to_dict()
    assert report.guarantee is Guarantee.EXACTLY_ONCE
    assert (report.outputs, report.reference_outputs) == (3 * PER_BATCH, 3 * PER_BATCH)
    assert (report.lost, report.duplicated, report.copies, report.extra) == (0, 0, 0, 0)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_rerun_batch_the_sink_skipped_leaves_the_run_exactly_once(tmp_path, kind):
    sink = run_of(kind, tmp_path / "run", (0, 1, 2))
    sink.write_batch(output(1), 1)  # a re-run after a driver kill
    run_of(kind, tmp_path / "ref", (0, 1, 2))

    report = judge(
        "job",
        CONTRACT,
        read_table_outputs(kind, tmp_path / "run"),
        read_table_outputs(kind, tmp_path / "ref"),
        dedup=False,
    )
    assert sink.skipped == 1
    assert report.verdict is Verdict.CONSISTENT, report.to_dict()


def append_behind_the_sinks_back(kind: str, where, table: pa.Table) -> None:
    """A writer without the skip check: the batch lands a second time."""
    if kind == "delta":
        write_deltalake(where, table, mode="append")
    else:
        load_iceberg_table(where).append(table)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_batch_the_table_holds_twice_is_named_as_duplicates(tmp_path, kind):
    run_of(kind, tmp_path / "run", (0, 1, 2))
    append_behind_the_sinks_back(kind, tmp_path / "run", output(1))
    run_of(kind, tmp_path / "ref", (0, 1, 2))
    run = read_table_outputs(kind, tmp_path / "run")

    report = judge("job", CONTRACT, run, read_table_outputs(kind, tmp_path / "ref"), dedup=False)

    assert len(run) == 4 * PER_BATCH  # read as the table holds it: both copies
    assert report.verdict is Verdict.INCONSISTENT
    assert report.guarantee is Guarantee.AT_LEAST_ONCE
    assert (report.copies, report.duplicated, report.lost) == (PER_BATCH, PER_BATCH, 0)
    named = report.examples["duplicated_ids"]
    assert named and all(parse_output_id(rid)[1] == 1 for rid in named)


def test_duplicates_are_named_without_a_reference_run_too(tmp_path):
    delta_run(tmp_path / "run", (0, 1))
    append_behind_the_sinks_back("delta", tmp_path / "run", output(0))
    report = judge("job", CONTRACT, read_table_outputs("delta", tmp_path / "run"), None, False)
    assert report.guarantee is Guarantee.AT_LEAST_ONCE and report.copies == PER_BATCH


def test_a_batch_missing_from_the_table_is_lost(tmp_path):
    delta_run(tmp_path / "run", (0, 2))
    delta_run(tmp_path / "ref", (0, 1, 2))
    report = judge(
        "job",
        CONTRACT,
        read_table_outputs("delta", tmp_path / "run"),
        read_table_outputs("delta", tmp_path / "ref"),
        dedup=False,
    )
    assert report.guarantee is Guarantee.AT_MOST_ONCE and report.lost == PER_BATCH


def test_delta_and_iceberg_runs_of_the_same_batches_agree(tmp_path):
    delta_run(tmp_path / "delta", (0, 1, 2))
    iceberg_run(tmp_path / "iceberg", (0, 1, 2))
    report = judge(
        "job",
        CONTRACT,
        read_table_outputs("iceberg", tmp_path / "iceberg"),
        read_table_outputs("delta", tmp_path / "delta"),
        dedup=False,
    )
    assert report.verdict is Verdict.CONSISTENT, report.to_dict()


def test_the_iceberg_epoch_and_topic_come_from_the_snapshots(tmp_path):
    iceberg_run(tmp_path, (0,), epoch=1)
    IcebergTableSink(tmp_path, "job", "q", epoch=3).write_batch(output(1), 1)
    records = read_table_outputs("iceberg", tmp_path)
    epochs = {parse_output_id(r.id)[1]: r.epoch for r in records}
    assert epochs == {0: 1, 1: 3}
    assert {r.topic for r in records} == {"recovery:rl.output"}


def test_a_table_without_a_value_column_reads_its_other_columns_as_json():
    rows = pa.table(
        {
            "b": ["x", "y"],
            "a": [1, 2],
            BATCH_COL: pa.array([0, 0], pa.int64()),
            PARTITION_COL: pa.array([0, 0], pa.int32()),
            SEQ_COL: pa.array([0, 1], pa.int64()),
        }
    )
    records = table_records(rows, [], "t")
    assert [r.value for r in records] == [b'{"a":1,"b":"x"}', b'{"a":2,"b":"y"}']
    assert [r.key for r in records] == [None, None]
    assert [r.epoch for r in records] == [None, None]  # no commit marks: epoch unknown


def test_a_table_without_lineage_columns_is_refused():
    with pytest.raises(TableNotLineaged, match="_seq"):
        table_records(pa.table({"value": ["x"], BATCH_COL: [0], PARTITION_COL: [0]}), [], "t")


def test_an_unknown_table_kind_is_refused(tmp_path):
    with pytest.raises(InvalidSinkOption, match="delta, iceberg"):
        read_table_outputs("hudi", tmp_path)
