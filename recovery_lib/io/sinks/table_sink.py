"""Idempotent table sinks for ``foreachBatch``: DuckDB and Parquet, keyed by (batch id, partition).

Each row gets ``_batch_id``, ``_partition`` (Spark partition) and ``_seq`` (its position in
that partition). Writing batch b first removes whatever an earlier attempt of b wrote, in the
same transaction (DuckDB) or by an atomic file replace (Parquet), so a re-executed batch
replaces its rows and never appends them twice.
"""

from __future__ import annotations

import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from recovery_lib.io.exceptions import InvalidSinkOption
from recovery_lib.io.hooks import WriteFault

BATCH_COL, PARTITION_COL, SEQ_COL = "_batch_id", "_partition", "_seq"


def with_lineage(df, batch_id: int):  # noqa: ANN001, ANN201 - pyspark DataFrame
    """Add (_batch_id, _partition, _seq); monotonically_increasing_id encodes partition + index."""
    from pyspark.sql import functions as F

    mono = F.monotonically_increasing_id()
    return df.select(
        "*",
        F.lit(batch_id).cast("long").alias(BATCH_COL),
        F.spark_partition_id().alias(PARTITION_COL),
        (mono - F.shiftleft(F.spark_partition_id().cast("long"), 33)).alias(SEQ_COL),
    )


class TableSink(ABC):
    """Callable for ``writeStream.foreachBatch``. ``fault``: a hook (io.hooks.WriteFault
    factory) asked after the rows are written and before Spark commits the batch."""

    fault: Callable[[], WriteFault | None] | None = None

    def __call__(self, df, batch_id: int) -> None:  # noqa: ANN001
        table = with_lineage(df, batch_id).toArrow()
        self.write_batch(table, batch_id)
        fault = self.fault() if self.fault is not None else None
        if fault is not None and fault.should_fire(batch_id, table.num_rows):
            fault.fire()

    @abstractmethod
    def write_batch(self, table: pa.Table, batch_id: int) -> None: ...


class DuckDBTableSink(TableSink):
    def __init__(self, path: str | os.PathLike[str], table: str) -> None:
        if not table.replace("_", "").isalnum():
            raise InvalidSinkOption(
                f"table name {table!r} must be letters, digits and underscores; rename it"
            )
        self.path = str(path)
        self.table = table
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)

    def write_batch(self, table: pa.Table, batch_id: int) -> None:
        import duckdb

        con = duckdb.connect(self.path)
        try:
            con.register("incoming", table)
            con.execute("BEGIN")
            con.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} AS SELECT * FROM incoming LIMIT 0"
            )
            con.execute(f"DELETE FROM {self.table} WHERE {BATCH_COL} = ?", [batch_id])
            con.execute(f"INSERT INTO {self.table} BY NAME SELECT * FROM incoming")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            con.close()


class ParquetTableSink(TableSink):
    """One file per batch: ``batch-<id>.parquet``, replaced atomically on re-execution."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def path_for(self, batch_id: int) -> Path:
        return self.directory / f"batch-{batch_id:012d}.parquet"

    def write_batch(self, table: pa.Table, batch_id: int) -> None:
        import pyarrow.parquet as pq

        tmp = self.directory / f".tmp-{uuid.uuid4().hex}.parquet"
        pq.write_table(table, tmp)
        os.replace(tmp, self.path_for(batch_id))
