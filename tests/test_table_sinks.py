"""Idempotent table sinks: writing a batch again replaces it."""

from __future__ import annotations

import duckdb
import pyarrow.parquet as pq
import pytest

from recovery_lib.io.sinks.table_sink import DuckDBTableSink, ParquetTableSink

pytestmark = pytest.mark.spark


@pytest.fixture()
def frame(spark):
    return spark.range(0, 1000, numPartitions=3).selectExpr("id", "id % 7 AS k")


def test_duckdb_sink_rerun_of_a_batch_replaces_its_rows(spark, frame, tmp_path):
    sink = DuckDBTableSink(tmp_path / "t.duckdb", "out")
    sink(frame, 0)
    sink(frame.where("id < 500"), 1)
    sink(frame.where("id < 500"), 1)  # re-execution of batch 1 after a crash
    sink(frame.where("id < 100"), 1)  # ... even when it now yields other rows
    with duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True) as con:
        rows = dict(con.execute("SELECT _batch_id, count(*) FROM out GROUP BY 1").fetchall())
        parts = con.execute(
            "SELECT count(DISTINCT _partition) FROM out WHERE _batch_id = 0"
        ).fetchone()
        keys = con.execute(
            "SELECT count(DISTINCT (_batch_id, _partition, _seq)) FROM out"
        ).fetchone()
    assert rows == {0: 1000, 1: 100}
    assert parts == (3,)
    assert keys == (1100,)


def test_parquet_sink_rerun_of_a_batch_replaces_its_file(spark, frame, tmp_path):
    sink = ParquetTableSink(tmp_path / "pq")
    sink(frame, 0)
    sink(frame, 1)
    sink(frame.where("id < 10"), 1)
    files = sorted(p.name for p in (tmp_path / "pq").iterdir())
    assert files == ["batch-000000000000.parquet", "batch-000000000001.parquet"]
    assert pq.read_table(sink.path_for(0)).num_rows == 1000
    table = pq.read_table(sink.path_for(1))
    assert table.num_rows == 10 and set(table.column("_batch_id").to_pylist()) == {1}
