"""IcebergTableSink: a re-run micro-batch never lands twice, a zombie never lands at all
(a SQLite catalog and a warehouse in tmp_path, Arrow batches built by hand: no Spark)."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from recovery_lib.ha.fencing import EpochStore
from recovery_lib.io.exceptions import WriterFenced
from recovery_lib.io.sinks.iceberg_sink import IcebergTableSink, sqlite_catalog
from recovery_lib.io.sinks.lakehouse import CommitMark, TableWriterFenced, zombie_commits
from recovery_lib.io.sinks.table_sink import BATCH_COL, PARTITION_COL, SEQ_COL

ROWS = 3


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


def rows_per_batch(sink: IcebergTableSink) -> dict[int, int]:
    counts = pc.value_counts(sink.read()[BATCH_COL]).to_pylist()
    return {c["values"]: c["counts"] for c in counts}


def test_rerun_batches_are_skipped_and_their_rows_not_duplicated(tmp_path):
    sink = IcebergTableSink(tmp_path, "job", "q")
    for b in (0, 1, 2):
        sink.write_batch(batch(b), b)
    sink.write_batch(batch(1), 1)  # a re-run after a driver kill
    sink.write_batch(batch(2), 2)

    assert (sink.written, sink.skipped) == (3, 2)
    assert rows_per_batch(sink) == {0: ROWS, 1: ROWS, 2: ROWS}
    assert sink.batch_ids() == [0, 1, 2]
    snapshots = sink.versions()
    assert [c.version for c in snapshots] == [1, 2, 3]
    assert [c.mark for c in snapshots] == [CommitMark("job:q", b, 0) for b in (0, 1, 2)]
    assert sink.read().schema.names == ["value", BATCH_COL, PARTITION_COL, SEQ_COL]


def test_a_restarted_writer_skips_what_the_table_holds_and_goes_on(tmp_path):
    IcebergTableSink(tmp_path, "job", "q").write_batch(batch(0), 0)
    restarted = IcebergTableSink(tmp_path, "job", "q")
    restarted.write_batch(batch(0), 0)
    restarted.write_batch(batch(1), 1)
    assert (restarted.written, restarted.skipped) == (1, 1)
    assert restarted.batch_ids() == [0, 1]
    assert rows_per_batch(restarted) == {0: ROWS, 1: ROWS}


def test_an_empty_batch_is_committed_and_skipped_on_rerun(tmp_path):
    sink = IcebergTableSink(tmp_path, "job", "q")
    sink.write_batch(batch(0, rows=0), 0)
    sink.write_batch(batch(0, rows=0), 0)
    assert sink.batch_ids() == [0]
    assert sink.skipped == 1


def test_a_zombie_with_an_older_epoch_is_refused_and_writes_nothing(tmp_path):
    store = EpochStore(tmp_path / "epochs")
    first = store.advance("primary")
    primary = IcebergTableSink(tmp_path, "job", "q", first, store.current)
    primary.write_batch(batch(0), 0)
    primary.write_batch(batch(1), 1)

    second = store.advance("standby")  # the standby takes over
    standby = IcebergTableSink(tmp_path, "job", "q", second, store.current)
    standby.write_batch(batch(1), 1)  # re-runs the primary's last batch: already there
    standby.write_batch(batch(2), 2)
    before = primary.versions()

    with pytest.raises(TableWriterFenced) as refused:
        primary.write_batch(batch(3), 3)  # the old primary wakes up
    assert isinstance(refused.value, WriterFenced)
    assert "holds epoch 1 but epoch 2 is newer" in str(refused.value)
    assert primary.versions() == before
    assert rows_per_batch(primary) == {0: ROWS, 1: ROWS, 2: ROWS}
    assert [c.mark.epoch for c in before if c.mark] == [1, 1, 2]
    assert zombie_commits(before) == []

    standby.write_batch(batch(3), 3)  # the new writer goes on
    assert standby.batch_ids() == [0, 1, 2, 3]
    assert (standby.written, standby.skipped) == (2, 1)


def test_the_table_fences_a_zombie_that_cannot_see_the_epoch_store(tmp_path):
    IcebergTableSink(tmp_path, "job", "q", epoch=2).write_batch(batch(0), 0)
    zombie = IcebergTableSink(tmp_path, "job", "q", epoch=1, newest_epoch=None)
    with pytest.raises(TableWriterFenced, match="table already holds a commit"):
        zombie.write_batch(batch(1), 1)
    assert zombie.batch_ids() == [0]
    assert zombie.written == 0


def test_two_apps_on_one_table_are_independent(tmp_path):
    a = IcebergTableSink(tmp_path, "job", "a", epoch=3)
    b = IcebergTableSink(tmp_path, "job", "b", epoch=1)
    a.write_batch(batch(0), 0)
    a.write_batch(batch(1), 1)
    b.write_batch(batch(0), 0)  # same batch id, other app: written
    a.write_batch(batch(1), 1)
    b.write_batch(batch(1), 1)  # an older epoch than a's: no matter, another app

    assert a.batch_ids() == [0, 1]
    assert a.batch_ids("job:b") == [0, 1]
    assert (a.skipped, b.skipped) == (1, 0)
    assert rows_per_batch(a) == {0: 2 * ROWS, 1: 2 * ROWS}


def test_a_commit_of_the_same_batch_between_check_and_commit_is_not_duplicated(tmp_path):
    other = IcebergTableSink(tmp_path, "job", "q")
    other.write_batch(batch(0), 0)

    class Raced(IcebergTableSink):
        raced = False

        def _open(self, schema):  # noqa: ANN001, ANN202
            opened = super()._open(schema)
            if not self.raced:  # a replica commits batch 1 right after this writer read
                self.raced = True
                other.write_batch(batch(1), 1)
            return opened

    raced = Raced(tmp_path, "job", "q")
    raced.write_batch(batch(1), 1)
    assert raced.raced
    assert (raced.written, raced.skipped) == (0, 1)
    assert raced.batch_ids() == [0, 1]
    assert rows_per_batch(raced) == {0: ROWS, 1: ROWS}


def test_a_table_created_elsewhere_gets_no_catalog_retry_before_the_first_append(tmp_path):
    sink = IcebergTableSink(tmp_path, "job", "q", identifier="ext.out")
    sink.catalog.create_namespace("ext")
    sink.catalog.create_table("ext.out", schema=batch(0).schema)  # pyiceberg retries 4 times
    sink.write_batch(batch(0), 0)
    assert sink.catalog.load_table("ext.out").properties["commit.retry.num-retries"] == "0"
    assert sink.batch_ids() == [0]


def test_the_sink_pickles_without_its_catalog_and_writes_after(tmp_path):
    sink = IcebergTableSink(tmp_path, "job", "q", catalog=sqlite_catalog(tmp_path / "cat"))
    sink.write_batch(batch(0), 0)
    copy = pickle.loads(pickle.dumps(sink))  # foreachBatch may ship the function
    copy.write_batch(batch(0), 0)
    copy.write_batch(batch(1), 1)
    assert (copy.written, copy.skipped) == (2, 1)  # counters travel with the sink
    assert sink.batch_ids() == [0, 1]
