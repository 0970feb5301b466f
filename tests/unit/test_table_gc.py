"""vacuum_table: checkpoint GC of a lakehouse output table removes versions only below the job's
recovery point and never the newest mark of an app (Delta and Iceberg tables in tmp_path
written by the table sinks: no Spark)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from recovery_lib.io.sinks.delta_sink import GC_CONFIGURATION, DeltaTableSink
from recovery_lib.io.sinks.iceberg_sink import IcebergTableSink, load_iceberg_table, main_branch
from recovery_lib.io.sinks.lakehouse import CommitMark, TableCommit, vacuum_cut
from recovery_lib.io.sinks.table_reader import read_table_outputs
from recovery_lib.io.sinks.table_sink import BATCH_COL, PARTITION_COL, SEQ_COL
from recovery_lib.runtime.table_gc import vacuum_table

ROWS = 3
APP = "job:q"


def batch(batch_id: int, rows: int = ROWS) -> pa.Table:
    """What ``with_lineage(df, batch_id).toArrow()`` gives for ``rows`` rows in partition 0."""
    return pa.table(
        {
            "value": pa.array([f"b{batch_id}-{i}" for i in range(rows)], pa.string()),
            BATCH_COL: pa.array([batch_id] * rows, pa.int64()),
            PARTITION_COL: pa.array([0] * rows, pa.int32()),
            SEQ_COL: pa.array(range(rows), pa.int64()),
        }
    )


def rows_per_batch(table: pa.Table) -> dict[int, int]:
    return {c["values"]: c["counts"] for c in pc.value_counts(table[BATCH_COL]).to_pylist()}


def files_under(root) -> dict[str, int]:
    return {
        os.path.join(d, f): os.path.getsize(os.path.join(d, f))
        for d, _, names in os.walk(root)
        for f in names
    }


def write(sink, batches) -> None:
    for b in batches:
        sink.write_batch(batch(b), b)


def mark(version: int, app: str, batch_id: int) -> TableCommit:
    return TableCommit(version, CommitMark(app, batch_id, 0))


# The cut itself.


def test_the_cut_is_the_first_commit_of_the_oldest_kept_batch():
    commits = [TableCommit(0, None), *(mark(v + 1, APP, v) for v in range(6))]
    assert vacuum_cut(commits, APP, 3) == 4
    assert vacuum_cut(commits, APP, 0) == 1
    assert vacuum_cut(commits, APP, 100) == 6  # past the newest batch: its commit stays


def test_the_cut_never_passes_the_newest_commit_of_another_app():
    commits = [mark(1, "other:q", 0), *(mark(v + 2, APP, v) for v in range(5))]
    assert vacuum_cut(commits, APP, 4) == 1


def test_an_app_without_a_commit_in_the_table_cuts_nothing():
    assert vacuum_cut([mark(1, "other:q", 0)], APP, 4) is None
    assert vacuum_cut([], APP, 0) is None


# Delta.


def test_delta_vacuum_removes_versions_below_the_oldest_kept_batch_only(tmp_path):
    path = tmp_path / "t"
    sink = DeltaTableSink(path, "job", "q")
    write(sink, range(6))  # version 0 creates the table; batch b is version b + 1

    done = vacuum_table("delta", path, APP, keep_from_batch=3, retention_hours=0)

    assert (done["cut_version"], done["versions_removed"], done["versions_left"]) == (
        4,
        [0, 1, 2, 3],
        [],
    )
    assert sink.batch_ids() == [3, 4, 5]
    assert rows_per_batch(DeltaTable(path, version=4).to_pyarrow_table()) == dict.fromkeys(
        range(4), ROWS
    )
    with pytest.raises(Exception, match="log segment|not found|No files"):
        DeltaTable(path, version=3)
    assert rows_per_batch(sink.read()) == dict.fromkeys(range(6), ROWS)  # rows never go
    restarted = DeltaTableSink(path, "job", "q")
    restarted.write_batch(batch(5), 5)  # the app transaction outlived the log cleanup
    restarted.write_batch(batch(6), 6)
    assert (restarted.skipped, restarted.written) == (1, 1)
    assert rows_per_batch(restarted.read()) == dict.fromkeys(range(7), ROWS)


def test_delta_vacuum_deletes_the_files_only_versions_below_the_cut_reference(tmp_path):
    path = tmp_path / "t"
    sink = DeltaTableSink(path, "job", "q")
    write(sink, range(3))
    DeltaTable(path).optimize.compact()  # batches 0-2 now also in one file (version 4)
    write(sink, range(3, 6))
    small = {f for f in os.listdir(path) if f.endswith(".parquet")}

    kept = vacuum_table("delta", path, APP, keep_from_batch=0, retention_hours=0)
    assert kept["files_removed"] == []  # versions 1-3 are kept and read the small files
    young = vacuum_table("delta", path, APP, keep_from_batch=3)  # retention: 1 hour
    assert young["files_removed"] == []  # a running write's files are as young as these
    done = vacuum_table("delta", path, APP, keep_from_batch=3, retention_hours=0)

    assert len(done["files_removed"]) == 3
    assert not any((path / f).exists() for f in done["files_removed"])
    assert len(small - {f for f in os.listdir(path) if f.endswith(".parquet")}) == 3
    assert rows_per_batch(DeltaTable(path).to_pyarrow_table()) == dict.fromkeys(range(6), ROWS)
    assert rows_per_batch(DeltaTable(path, version=5).to_pyarrow_table()) == dict.fromkeys(
        range(4), ROWS
    )


def test_delta_dry_run_removes_nothing(tmp_path):
    path = tmp_path / "t"
    sink = DeltaTableSink(path, "job", "q")
    write(sink, range(3))
    DeltaTable(path).optimize.compact()
    write(sink, range(3, 6))
    before = files_under(path)

    plan = vacuum_table("delta", path, APP, keep_from_batch=3, dry_run=True, retention_hours=0)

    assert plan["dry_run"] and plan["versions_removed"] == [0, 1, 2, 3, 4]
    assert len(plan["files_removed"]) == 3  # would be removed
    assert files_under(path) == before
    assert sink.batch_ids() == list(range(6))


def test_delta_vacuum_keeps_the_newest_commit_of_another_app(tmp_path):
    path = tmp_path / "t"
    other = DeltaTableSink(path, "other", "q")
    other.write_batch(batch(0), 0)  # version 1
    write(DeltaTableSink(path, "job", "q"), range(5))

    done = vacuum_table("delta", path, APP, keep_from_batch=4, retention_hours=0)

    assert (done["cut_version"], done["versions_removed"]) == (1, [0])
    assert other.batch_ids() == [0]


def test_the_sink_creates_tables_whose_log_only_the_vacuum_cleans(tmp_path):
    write(DeltaTableSink(tmp_path / "t", "job", "q"), range(2))
    assert DeltaTable(tmp_path / "t").metadata().configuration == GC_CONFIGURATION


def test_delta_vacuum_says_when_the_tables_log_retention_keeps_versions(tmp_path):
    path = tmp_path / "t"
    DeltaTable.create(path, schema=batch(0).schema)  # made elsewhere: 30 days of log
    sink = DeltaTableSink(path, "job", "q")
    write(sink, range(4))

    done = vacuum_table("delta", path, APP, keep_from_batch=2, retention_hours=0)

    assert (done["versions_removed"], done["versions_left"]) == ([], [0, 1, 2])
    assert "delta.logRetentionDuration" in done["notes"][0]
    assert sink.batch_ids() == [0, 1, 2, 3]


# Iceberg.


def snapshot_of(root, batch_id: int) -> int:
    iceberg = load_iceberg_table(root)
    (found,) = [s.snapshot_id for s, c in main_branch(iceberg) if c.mark.batch_id == batch_id]
    return found


def test_iceberg_expiry_removes_snapshots_below_the_oldest_kept_batch_only(tmp_path):
    sink = IcebergTableSink(tmp_path, "job", "q")
    write(sink, range(6))  # batch b is snapshot sequence number b + 1

    done = vacuum_table("iceberg", tmp_path, APP, keep_from_batch=3)

    assert (done["cut_version"], done["versions_removed"]) == (4, [1, 2, 3])
    assert done["files_removed"] == []
    assert sink.batch_ids() == [3, 4, 5]
    at_3 = load_iceberg_table(tmp_path).scan(snapshot_id=snapshot_of(tmp_path, 3)).to_arrow()
    assert rows_per_batch(at_3) == dict.fromkeys(range(4), ROWS)
    assert rows_per_batch(sink.read()) == dict.fromkeys(range(6), ROWS)  # rows never go
    restarted = IcebergTableSink(tmp_path, "job", "q")
    restarted.write_batch(batch(5), 5)
    restarted.write_batch(batch(6), 6)
    assert (restarted.skipped, restarted.written) == (1, 1)
    assert rows_per_batch(restarted.read()) == dict.fromkeys(range(7), ROWS)


def test_iceberg_expiry_keeps_the_newest_snapshot_of_every_app(tmp_path):
    other = IcebergTableSink(tmp_path, "other", "q")
    other.write_batch(batch(0), 0)
    write(IcebergTableSink(tmp_path, "job", "q"), range(5))

    done = vacuum_table("iceberg", tmp_path, APP, keep_from_batch=4)
    other.write_batch(batch(0), 0)  # a re-run: the walk back must still reach its mark

    assert done["versions_removed"] == []
    assert other.batch_ids() == [0] and other.skipped == 1
    assert rows_per_batch(other.read()) == {0: 2 * ROWS, **dict.fromkeys(range(1, 5), ROWS)}


def test_iceberg_expiry_past_the_newest_batch_keeps_the_newest_mark(tmp_path):
    sink = IcebergTableSink(tmp_path, "job", "q")
    write(sink, range(4))

    done = vacuum_table("iceberg", tmp_path, APP, keep_from_batch=100)
    sink.write_batch(batch(3), 3)

    assert done["versions_removed"] == [1, 2, 3]
    assert sink.batch_ids() == [3] and sink.skipped == 1
    epochs = {r.id: r.epoch for r in read_table_outputs("iceberg", tmp_path)}
    assert epochs["0-0-0"] is None and epochs["3-0-0"] == 0  # a mark goes with its snapshot


def test_iceberg_dry_run_expires_nothing(tmp_path):
    sink = IcebergTableSink(tmp_path, "job", "q")
    write(sink, range(6))
    before = files_under(tmp_path)

    plan = vacuum_table("iceberg", tmp_path, APP, keep_from_batch=3, dry_run=True)

    assert plan["dry_run"] and plan["versions_removed"] == [1, 2, 3]
    assert sink.batch_ids() == list(range(6))
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_vacuum_for_an_app_that_never_wrote_the_table_removes_nothing(tmp_path, kind):
    where = tmp_path / "t"
    sink = (DeltaTableSink if kind == "delta" else IcebergTableSink)(where, "job", "q")
    write(sink, range(3))

    done = vacuum_table(kind, where, "jbo:q", keep_from_batch=2, retention_hours=0)

    assert done["cut_version"] is None and done["versions_removed"] == []
    assert sink.batch_ids() == [0, 1, 2]
