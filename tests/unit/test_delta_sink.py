"""DeltaTableSink: a re-run micro-batch never lands twice, a zombie never lands at all (Delta
tables in tmp_path, Arrow batches built by hand: no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from recovery_lib.ha.fencing import EpochStore
from recovery_lib.io.exceptions import WriterFenced
from recovery_lib.io.sinks.delta_sink import DeltaTableSink
from recovery_lib.io.sinks.lakehouse import (
    CommitMark,
    TableCommit,
    TableWriterFenced,
    zombie_commits,
)
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


def rows_per_batch(sink: DeltaTableSink) -> dict[int, int]:
    counts = pc.value_counts(sink.read()[BATCH_COL]).to_pylist()
    return {c["values"]: c["counts"] for c in counts}


def test_rerun_batches_are_skipped_and_their_rows_not_duplicated(tmp_path):
    sink = DeltaTableSink(tmp_path / "t", "job", "q")
    for b in (0, 1, 2):
        sink.write_batch(batch(b), b)
    sink.write_batch(batch(1), 1)  # a re-run after a driver kill
    sink.write_batch(batch(2), 2)

    assert (sink.written, sink.skipped) == (3, 2)
    assert rows_per_batch(sink) == {0: ROWS, 1: ROWS, 2: ROWS}
    assert sink.batch_ids() == [0, 1, 2]
    marked = [c for c in sink.versions() if c.mark is not None]
    assert [c.version for c in marked] == [1, 2, 3]  # version 0 creates the empty table
    assert [c.mark for c in marked] == [CommitMark("job:q", b, 0) for b in (0, 1, 2)]


def test_a_restarted_writer_skips_what_the_table_holds_and_goes_on(tmp_path):
    DeltaTableSink(tmp_path / "t", "job", "q").write_batch(batch(0), 0)
    restarted = DeltaTableSink(tmp_path / "t", "job", "q")
    restarted.write_batch(batch(0), 0)
    restarted.write_batch(batch(1), 1)
    assert (restarted.written, restarted.skipped) == (1, 1)
    assert restarted.batch_ids() == [0, 1]
    assert rows_per_batch(restarted) == {0: ROWS, 1: ROWS}


def test_an_empty_batch_is_committed_and_skipped_on_rerun(tmp_path):
    sink = DeltaTableSink(tmp_path / "t", "job", "q")
    sink.write_batch(batch(0, rows=0), 0)
    sink.write_batch(batch(0, rows=0), 0)
    assert sink.batch_ids() == [0]
    assert sink.skipped == 1


def test_a_zombie_with_an_older_epoch_is_refused_and_writes_nothing(tmp_path):
    store = EpochStore(tmp_path / "epochs")
    first = store.advance("primary")
    primary = DeltaTableSink(tmp_path / "t", "job", "q", first, store.current)
    primary.write_batch(batch(0), 0)
    primary.write_batch(batch(1), 1)

    second = store.advance("standby")  # the standby takes over
    standby = DeltaTableSink(tmp_path / "t", "job", "q", second, store.current)
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
    DeltaTableSink(tmp_path / "t", "job", "q", epoch=2).write_batch(batch(0), 0)
    zombie = DeltaTableSink(tmp_path / "t", "job", "q", epoch=1, newest_epoch=None)
    with pytest.raises(TableWriterFenced, match="table already holds a commit"):
        zombie.write_batch(batch(1), 1)
    assert zombie.batch_ids() == [0]
    assert zombie.written == 0


def test_two_apps_on_one_table_are_independent(tmp_path):
    a = DeltaTableSink(tmp_path / "t", "job", "a", epoch=3)
    b = DeltaTableSink(tmp_path / "t", "job", "b", epoch=1)
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
    other = DeltaTableSink(tmp_path / "t", "job", "q")
    other.write_batch(batch(0), 0)

    class Raced(DeltaTableSink):
        raced = False

        def _open(self, schema):  # noqa: ANN001, ANN202
            opened = super()._open(schema)
            if not self.raced:  # a replica commits batch 1 right after this writer read
                self.raced = True
                other.write_batch(batch(1), 1)
            return opened

    raced = Raced(tmp_path / "t", "job", "q")
    raced.write_batch(batch(1), 1)
    assert raced.raced
    assert (raced.written, raced.skipped) == (0, 1)
    assert raced.batch_ids() == [0, 1]
    assert rows_per_batch(raced) == {0: ROWS, 1: ROWS}


def test_zombie_commits_are_those_below_an_earlier_epoch_of_the_same_app():
    def commit(version: int, app: str, batch_id: int, epoch: int) -> TableCommit:
        return TableCommit(version, CommitMark(app, batch_id, epoch))

    commits = [
        TableCommit(0, None),
        commit(1, "j:a", 0, 1),
        commit(2, "j:a", 1, 2),
        commit(3, "j:b", 0, 1),  # another app: its own epochs
        commit(4, "j:a", 2, 1),  # a zombie of j:a got through
    ]
    assert zombie_commits(reversed(commits)) == [commits[4]]
