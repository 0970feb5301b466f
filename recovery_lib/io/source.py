"""Kafka streaming source for Spark Structured Streaming (a PySpark Python Data Source).

Offsets are ``{topic: {partition: next_offset}}``. The driver-side reader (Spark's Python
streaming-source runner) asks its cut policy where each batch ends; Spark writes that end to
its offset log before the batch runs, so a re-executed batch reads exactly the same ranges.
``read()`` runs in executor Python workers and yields Arrow record batches.

Options (as in Spark's own Kafka connector where one exists):
  subscribe              comma-separated topics (required)
  startingOffsets        earliest (default) | latest | JSON {"t": {"0": 42}}
                         (-2 earliest, -1 latest)
  maxOffsetsPerTrigger   admission limit: records per micro-batch over all partitions
  cutPolicy              where a batch ends: free (default), or a mechanism's CutPolicy as
                         module:attr (the standby's follow policy: followLog, followCheckpoint)
  valueFormat            binary (default) | string (UTF-8)
  onBadRecord            deadletter (default) | fail: what to do with a value not in valueFormat
  deadLetterTopic        where bad records go (default recovery.deadletter)
  auditPath              directory: one JSON line per read range
                         (batch, topic, partition, start, end)
  readPath               executors (default): a Python read task per partition | driver: the
                         source's driver process reads each batch while planning it, no read
                         task (low-rate, latency-bound queries; io/driver_read.py)
  kafka.<property>       passed to librdkafka (kafka.bootstrap.servers, SASL/TLS settings)
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, SimpleDataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from recovery_lib.io.cut_policies import make_cut_policy
from recovery_lib.io.exceptions import checkpoint_of_other_topics, input_behind_checkpoint
from recovery_lib.io.offsets import (
    EARLIEST,
    LATEST,
    Offsets,
)
from recovery_lib.io.source_options import (
    DEFAULT_DEAD_LETTER_TOPIC,
    HEADERS_TYPE,
    VALUE_FORMATS,
    KafkaRange,
    SourceOptions,
    source_schema,
)
from recovery_lib.io.task import task_info
from recovery_lib.io.worker_timing import record_first_call
from recovery_lib.kafka.outage import ride_out

log = logging.getLogger(__name__)

SOURCE_NAME = "rlkafka"

__all__ = [
    "DEFAULT_DEAD_LETTER_TOPIC",
    "HEADERS_TYPE",
    "SOURCE_NAME",
    "KafkaDataSource",
    "KafkaRange",
    "KafkaStreamReader",
    "SourceOptions",
    "source_schema",
]


class KafkaDataSource(DataSource):
    """``spark.readStream.format("rlkafka")`` and ``writeStream.format("rlkafka")``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        fmt = str(self.options.get("valueFormat", "binary")).lower()
        return source_schema(fmt if fmt in VALUE_FORMATS else "binary")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = SourceOptions.parse(self.options)
        if options.read_path == "driver":
            # PySpark then asks simpleStreamReader (pyspark.sql.datasource_internal).
            raise PySparkNotImplementedError(
                errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "readPath=driver"}
            )
        return KafkaStreamReader(options, schema)

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        from recovery_lib.io.driver_read import KafkaDriverStreamReader

        return KafkaDriverStreamReader(KafkaStreamReader(SourceOptions.parse(self.options), schema))

    # The sink and the executor's range reader are imported where they are used: Spark starts
    # a Python process per planning step (the source's runner, the read planner, the write
    # planner), and each imports this module; the ones that only plan reads skip the rest.
    def streamWriter(self, schema: StructType, overwrite: bool):  # noqa: ANN201
        from recovery_lib.io.sinks.kafka_sink import KafkaStreamWriter, SinkOptions

        return KafkaStreamWriter(SinkOptions.parse(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool):  # noqa: ANN201
        from recovery_lib.io.sinks.kafka_sink import KafkaBatchWriter, SinkOptions

        return KafkaBatchWriter(SinkOptions.parse(self.options), schema)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.cut_policy = make_cut_policy(options.cut_policy, options.raw)
        self._target: Offsets | None = None  # availableNow: never read past this
        self._latest: Offsets | None = None  # what the last latestOffset saw (for progress)
        self._probe: Any = None
        self._admin: Any = None
        # The broker answered this reader once: from then on an outage is ridden out; before,
        # a broker that never answers is a configuration to fix, said at once.
        self._answered = False

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_probe"] = None
        state["_admin"] = None
        state["_answered"] = False
        state["_latest"] = None
        return state

    # -- driver side (Spark's Python streaming-source runner) ---------------------------------

    def _clients(self) -> tuple[Any, Any]:
        if self._probe is None:
            from recovery_lib.kafka.admin import TopicAdmin
            from recovery_lib.kafka.tail_probe import TailProbe

            self._admin = TopicAdmin(self.options.kafka)
            self._probe = TailProbe.from_settings(self.options.kafka)
        return self._admin, self._probe

    def _ends(self, exact: bool = True) -> Offsets:
        """Each partition's end in the broker's log."""
        admin, probe = self._clients()
        parts = admin.wait_for(self.options.topics)
        ends = probe.ends([(t, p) for t, ps in parts.items() for p in ps], exact=exact)
        return {t: {str(p): ends[(t, p)] for p in ps} for t, ps in parts.items()}

    def _available(self, exact: bool = True) -> Offsets:
        """What the query may read: the log's ends, no further than ``endingOffsets``."""
        bound = self.options.ending or {}
        return {
            t: {p: min(end, bound.get(t, {}).get(p, end)) for p, end in parts.items()}
            for t, parts in self._ends(exact).items()
        }

    def _refuse_a_log_behind(self, start: Offsets, available: Offsets) -> None:
        """The query's checkpoint read further than the broker's log now reaches: the broker
        lost records it had (the embedded broker keeps them in memory only; a restart empties
        it). Going on would skip everything up to the old position once new records arrive."""
        if not any(
            available[t][p] < start[t][p] and available[t][p] < self._bound(t, p)
            for t, parts in available.items()
            for p in parts
        ):
            return
        ends = self._ends(exact=True)  # a live probe may lag: ask for the exact ends
        behind = {
            f"{t}/{p}": (start[t][p], end)
            for t, parts in ends.items()
            for p, end in parts.items()
            if end < start.get(t, {}).get(p, 0)
        }
        if behind:
            raise input_behind_checkpoint(behind)

    def _refuse_other_topics(self, *read: dict) -> None:
        """Offsets of the checkpoint (a batch's start, or a planned batch's range) that name
        none of the topics this input reads: the query was restarted on another input's
        checkpoint (a job's topics renamed, a new run under an old job name)."""
        seen = sorted({t for offsets in read for t in offsets})
        mine = sorted(self.options.topics)
        if seen and not set(seen) & set(mine):
            raise checkpoint_of_other_topics(seen, mine)

    def _bound(self, topic: str, part: str) -> int:
        bound = (self.options.ending or {}).get(topic, {}).get(part)
        return bound if bound is not None else 2**63 - 1

    def _offsets(self, what: str, exact: bool = True) -> Offsets:
        """``_available`` through an outage once the broker has answered this reader."""
        if not self._answered:
            result = self._available(exact)
            self._answered = True
            return result
        return ride_out(lambda: self._available(exact), f"{SOURCE_NAME}: {what}")

    def initialOffset(self) -> dict:
        available = self._offsets("the first offsets")
        starting = self.options.starting
        admin, probe = self._clients()
        result: Offsets = {}
        for topic, parts in available.items():
            result[topic] = {}
            for part, end in parts.items():
                if starting == "latest":
                    wanted = LATEST
                elif starting == "earliest":
                    wanted = EARLIEST
                else:
                    wanted = starting.get(topic, {}).get(part, EARLIEST)  # type: ignore[union-attr]
                if wanted == LATEST:
                    result[topic][part] = end
                elif wanted == EARLIEST:
                    result[topic][part] = probe.first_offset(topic, int(part))
                else:
                    result[topic][part] = min(wanted, end)
        return result

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records:
            return ReadMaxRows(self.options.max_records)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._offsets("the available-now target")

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # A live batch takes what the probe sees in time; the available-now target is exact.
        # A broker that stalls (a leader election, a long GC, a network fault) is waited for
        # up to the outage budget instead of failing the query (kafka/outage.py).
        available = (
            self._target if self._target is not None else self._offsets("latest offsets", False)
        )
        self._refuse_other_topics(start)
        # Partitions that appeared since the last batch start at their beginning.
        start_full: Offsets = {
            t: {p: start.get(t, {}).get(p, 0) for p in parts} for t, parts in available.items()
        }
        self._refuse_a_log_behind(start_full, available)
        self._latest = available
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = self.cut_policy.cut(start_full, available, max_rows)
        # Never move backwards (a broker that lost data would otherwise rewind the query).
        return {
            t: {p: max(off, start_full[t][p]) for p, off in parts.items()}
            for t, parts in end.items()
        }

    def reportLatestOffset(self) -> dict | None:
        """For the query's progress report only; None is "unknown there". What the batch's
        planning saw (as Spark's Kafka source reports): a second probe per batch cost a
        metadata request and a watermark round trip per partition on the batch's path."""
        if self._latest is not None:
            return self._latest
        try:
            return self._available()
        except Exception as exc:  # noqa: BLE001 - a status probe must not fail the query
            # (an exception here ends Spark's source runner); latestOffset raises a real outage.
            log.warning("%s: latest offset unknown: %s", SOURCE_NAME, exc)
            return None

    def partitions(self, start: dict, end: dict) -> list[KafkaRange]:
        self._refuse_other_topics(start, end)  # a planned batch replayed after a restart
        self.cut_policy.planned(start, end)
        ranges = []
        for topic in sorted(end):
            for part in sorted(end[topic], key=int):
                begin = start.get(topic, {}).get(part, 0)
                stop = end[topic][part]
                if stop > begin:
                    ranges.append(KafkaRange(topic, int(part), begin, stop))
        return ranges

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's commit log is the source of truth for consumed offsets."""

    def stop(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    # -- executor side -------------------------------------------------------------------------

    def read(self, partition: KafkaRange) -> Iterator[Any]:
        from recovery_lib.io.range_reader import read_range  # executors only (streamWriter)

        task = task_info()
        record_first_call("read", task)
        rows = 0
        for batch in read_range(self.options, self.schema, partition):
            rows += batch.num_rows
            yield batch
        if self.options.audit_path:
            _audit(self.options.audit_path, task, partition, rows)


def _audit(path: str, task: dict[str, Any], partition: KafkaRange, rows: int) -> None:
    """One JSON line per finished read; O_APPEND keeps concurrent small writes whole."""
    os.makedirs(path, exist_ok=True)
    line = json.dumps(
        {
            "batch": task["batch_id"],
            "attempt": task["attempt"],
            "query": task["query_id"],
            "topic": partition.topic,
            "partition": partition.partition,
            "start": partition.start,
            "end": partition.end,
            "rows": rows,
            "pid": os.getpid(),
            "at": time.time(),
        }
    )
    fd = os.open(os.path.join(path, "reads.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
