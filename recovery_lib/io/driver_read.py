"""``readPath=driver``: the source's driver process reads each batch while it plans it.

With the default path (``executors``) each batch runs one Spark task per topic partition, and
each task asks a Python worker to read its range: a task start, a worker hand-off and an Arrow
stream from Python into the JVM before the query's first operator sees a record. For a query
at a low rate that cost is most of a batch (``recovery bench io``: q1's batch at 1,000 ev/s).

Here the reader is PySpark's *simple* stream reader: when Spark asks for the latest offset, the
source's runner (one Python process beside the driver, already up) cuts the batch with the
same offsets logic as the executor path, reads its records and hands them to Spark with the
plan; Spark keeps them in its block manager and the batch's single task reads them from there,
with no Python read task. A batch replayed after a restart (planned, not cached) is read by a
task through ``readBetweenOffsets``, in an executor, as before.

What it trades: every record of a batch passes through one process, so it suits
latency-bound queries at rates one consumer reads easily, not bulk reads. The cut is the free
policy (the standby's follow policies plan through ``partitions``, which this path does not
call), and ``auditPath`` needs a task to name the batch: both are refused with what to use.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, SimpleDataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from recovery_lib.io.exceptions import InvalidSourceOption
from recovery_lib.io.source_options import SourceOptions

__all__ = ["KafkaDriverStreamReader"]


class KafkaDriverStreamReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """The source's reader for ``readPath=driver`` (a PySpark ``SimpleDataSourceStreamReader``)."""

    def __init__(self, planner: DataSourceStreamReader) -> None:
        """``planner``: the executor path's reader (io/source.py ``KafkaStreamReader``) over the
        same options. Its offsets logic (initial offsets, the cut, the refusals, outages) plans
        each batch here too: only where the records are read differs."""
        options: SourceOptions = planner.options  # type: ignore[attr-defined]
        if options.cut_policy != "free":
            raise InvalidSourceOption(
                f"readPath=driver cuts batches with the free policy only, and this query's "
                f"cutPolicy is {options.cut_policy!r} (a mechanism's: a standby follows its "
                "primary's log, replicas cut at heartbeats): drop readPath=driver for it"
            )
        if options.audit_path:
            raise InvalidSourceOption(
                "readPath=driver has no task per range to audit: drop auditPath, or use "
                "readPath=executors (the default)"
            )
        self.planner: Any = planner
        self.options = options
        self.schema: StructType = planner.schema  # type: ignore[attr-defined]

    def initialOffset(self) -> dict:
        return self.planner.initialOffset()

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepareForTriggerAvailableNow()

    def read(self, start: dict) -> tuple[Iterator[Any], dict]:
        most = self.options.max_records
        limit = ReadMaxRows(most) if most else ReadAllAvailable()
        end = self.planner.latestOffset(start, limit)
        # A list: PySpark copies the iterator it caches (a generator cannot be copied).
        return iter(list(self.readBetweenOffsets(start, end))), end

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[Any]:
        from recovery_lib.io.range_reader import read_range

        for rng in self.planner.partitions(start, end):
            yield from read_range(self.options, self.schema, rng)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's commit log is the source of truth for consumed offsets."""
