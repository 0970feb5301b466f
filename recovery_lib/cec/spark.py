"""CEC on Spark: what a job's ``build`` returns for a CEC aggregate, and the driver-side batch
writer that runs it.

Where the open windows live: in the driver, between micro-batches (docs/cec.md). Spark's
executors have no stable partition ownership (a task for input partition p may run in any
Python worker of any executor), so executor-held windows would need a hand-off every batch,
the very snapshot CEC avoids; a state store snapshots every batch by design. The driver is
the one process of a Spark application whose death Spark already treats as the job's
restart, so the driver kill is the only failure that loses windows, and CEC rebuilds them
from the output log. An executor kill only makes Spark re-run a read task. The input is
read, parsed and dead-lettered in executors; the driver receives the aggregate's columns.

Per micro-batch (``CECBatchWriter.__call__``):
  Step 1. First batch of this process: recover every shard from the output log (backward
          scan to the eventual checkpoint) and read the input from T up to this batch's start.
  Step 2. Apply the batch's rows (and the replay) in input order; footprints and results go
          to the output partitions in order.
  Step 3. Flush: every record of the batch is in the log before Spark commits the batch.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recovery_lib.cec.aggregate import AggregateSpec, CECAggregate
from recovery_lib.cec.exceptions import InputTruncated
from recovery_lib.cec.log import OutputLog
from recovery_lib.cec.native import native_frame
from recovery_lib.cec.operator import InputTuple, result_schema
from recovery_lib.cec.policy import CheckpointPolicy
from recovery_lib.cec.windows import TimeWindows
from recovery_lib.io.range_reader import read_range
from recovery_lib.io.source import KafkaRange, SourceOptions, source_schema
from recovery_lib.job.frames import read_json_input, write_output
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.runtime.checkpoint import source_offsets
from recovery_lib.settings import Settings, get_settings
from recovery_lib.verify.contract import ConsistencyContract, EventTimes, UniqueOutputs, Windows

log = logging.getLogger(__name__)
# How a CEC recovery's detail appears in the job's log (one line per process start).
RECOVERY_LOG_MARK = "cec_recovery "


def recoveries_logged(text: str) -> list[dict[str, Any]]:
    """The CEC recoveries a job's log reports, in order (each process start says one)."""
    out = []
    for line in text.splitlines():
        at = line.find(RECOVERY_LOG_MARK)
        if at >= 0:
            out.append(json.loads(line[at + len(RECOVERY_LOG_MARK) :]))
    return out


if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from recovery_lib.job.options import JobOptions
    from recovery_lib.verify.inputs import InputView

ROW_COLUMNS = ("partition", "offset", "key", "value", "event_ms", "ingest_ms")


@dataclass(frozen=True)
class CECPlan:
    """What a job's ``build`` returns for a CEC aggregate: the input rows (columns
    ``partition``, ``offset``, ``key``, ``value``, ``event_ms``, ``ingest_ms`` of input
    ``input``) and the
    aggregate. ``parse`` turns a raw input record's value into ``(key, value, event_ms)`` (or
    None for a record the streaming side dead-letters): the replay reads Kafka directly."""

    rows: DataFrame
    input: str
    spec: AggregateSpec
    parse: Callable[[bytes], tuple[str, float, int] | None]

    def start_own_query(
        self,
        opts: JobOptions,
        own_log: bool,
        events: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> Any:
        """The job runtime's ``StartsItsQuery``: with ``own_log`` (mode cec) the windows are
        checkpointed into the output log; otherwise Spark's state store computes the same
        aggregate (cec/native.py) and the runtime's sink writes it."""
        if own_log:
            return start_query(self, opts, events)

        return write_output(native_frame(self.rows, self.spec, opts), opts)


def json_fields(spec: AggregateSpec) -> Callable[[bytes], tuple[str, float, int] | None]:
    """``parse`` for JSON input records with the spec's fields (numbers must be numbers, as
    Spark's from_json requires)."""

    def parse(raw: bytes) -> tuple[str, float, int] | None:
        try:
            record = json.loads(raw)
            key, value = record[spec.key], record[spec.value]
            event = record[spec.event_time] if spec.event_time else 0
        except (ValueError, KeyError, TypeError):
            return None
        numbers = (value, event)
        if key is None or any(
            isinstance(n, bool) or not isinstance(n, int | float) for n in numbers
        ):
            return None
        return str(key), float(value), int(event)

    return parse


def policy_from_settings(settings: Settings | None = None) -> CheckpointPolicy:
    s = settings or get_settings()
    return CheckpointPolicy(
        extent_target=s.cec_extent_target,
        replay_target=s.cec_replay_target,
        interval_ms=s.cec_interval_ms,
        period_ms=s.cec_period_ms,
        footprints=s.cec_footprints,
    )


@dataclass
class CECBatchWriter:
    """``foreachBatch`` function of a CEC job (see the module docstring for its steps)."""

    plan: CECPlan
    opts: JobOptions
    policy: CheckpointPolicy = field(default_factory=policy_from_settings)
    # Where the writer reports (the metrics store's events: cec_recovery once per process,
    # cec_state at most every ``state_every_s``): kind, detail.
    events: Callable[[str, dict[str, Any]], None] | None = None
    state_every_s: float = 5.0
    faults: bool = True  # honour the experiments' armed faults (mid-write, torn-write)
    aggregate: CECAggregate | None = None
    _state_reported: float = 0.0
    replayed_bytes: int = 0  # input bytes read by the last recovery's replay

    def _open(self) -> CECAggregate:
        admin = TopicAdmin(self.opts.kafka)
        return CECAggregate(
            self.plan.spec,
            OutputLog(self.opts.out_topic, self.opts.kafka),
            len(admin.partitions(self.opts.out_topic)),
            tuple(admin.partitions(self.plan_topic)),
            self.policy,
        )

    @property
    def plan_topic(self) -> str:
        return self.opts.topic_for(self.plan.input)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        replay: list[InputTuple] = []
        if self.aggregate is None:  # Step 1.
            self.aggregate = self._open()
            report = self.aggregate.recover()
            t0 = time.monotonic()
            replay = self._replay(report.replay_from, self._batch_start(batch_id))
            detail = {
                "batch": batch_id,
                "open_windows": report.open_windows,
                "extent": report.extent,
                "torn": report.torn,
                "ec_load_s": round(report.ec_load_s, 3),
                "scanned_bytes": report.scanned_bytes,
                "replayed": len(replay),
                "replayed_bytes": self.replayed_bytes,
                "replay_s": round(time.monotonic() - t0, 3),
            }
            log.info("%s%s", RECOVERY_LOG_MARK, json.dumps(detail))
            if self.events is not None:
                self.events("cec_recovery", detail)
        table = df.select(*ROW_COLUMNS).toArrow()  # Step 2.
        rows = sorted(
            zip(
                *(table.column(c).to_pylist() for c in ROW_COLUMNS),
                strict=True,
            )
        )
        if self.faults:
            from recovery_lib.runtime.faults import armed_torn_write, sink_write_fault

            self.aggregate.log.begin_batch(sink_write_fault(), armed_torn_write())
        self.aggregate.process_batch(replay + rows)  # Step 3: flushed inside
        if (
            self.events is not None
            and time.monotonic() - self._state_reported >= self.state_every_s
        ):
            self._state_reported = time.monotonic()
            self.events("cec_state", {"batch": batch_id, **self.aggregate.stats()})

    def _batch_start(self, batch_id: int) -> dict[int, int]:
        """Where this batch starts per input partition: the previous batch's end in the
        offset log (nothing before batch 0)."""

        if batch_id == 0:
            return {}
        ends = source_offsets(self.opts.checkpoint_path, batch_id - 1).get(self.plan_topic, {})
        return {int(p): o for p, o in ends.items()}

    def _replay(self, start: dict[int, int], end: dict[int, int]) -> list[InputTuple]:
        """The input from T up to the batch's start, read with the source's range reader and
        parsed like the streaming side."""
        from pyspark.sql.types import StructType

        options = SourceOptions.parse({**self.opts.kafka_options(), "subscribe": self.plan_topic})
        schema = StructType.fromDDL(source_schema())
        lows = OutputLog(self.plan_topic, self.opts.kafka).bounds(sorted(end))
        rows: list[InputTuple] = []
        for p in sorted(end):
            lo, hi = start.get(p, 0), end[p]
            low = lows[p][0]
            if 0 < lo < low:
                raise InputTruncated(
                    f"CEC recovery must replay {self.plan_topic}/{p} from offset {lo}, but the "
                    f"topic starts at {low}: the input was truncated below the eventual "
                    "checkpoint's T. Let `recovery gc` truncate CEC inputs (it keeps T)."
                )
            lo = max(lo, low)  # 0: from the start, wherever the topic starts now
            if hi <= lo:
                continue
            for batch in read_range(options, schema, KafkaRange(self.plan_topic, p, lo, hi)):
                offsets = batch.column("offset").to_pylist()
                values = batch.column("value").to_pylist()
                stamps = batch.column("timestamp").cast("int64").to_pylist()
                for offset, raw, stamp in zip(offsets, values, stamps, strict=True):
                    self.replayed_bytes += len(raw or b"")
                    parsed = self.plan.parse(raw or b"")
                    if parsed is not None:  # (the timestamp is in microseconds)
                        rows.append((p, offset, *parsed, (stamp or 0) // 1000))
        return rows


def start_query(
    plan: CECPlan,
    opts: JobOptions,
    events: Callable[[str, dict[str, Any]], None] | None = None,
) -> Any:
    """Start the CEC job's streaming query (the runtime's ``write_output`` for a CEC plan)."""
    writer = CECBatchWriter(plan, opts, events=events)
    stream = (
        plan.rows.select(*ROW_COLUMNS)
        .writeStream.foreachBatch(writer)
        .option("checkpointLocation", opts.checkpoint_path)
        .queryName(opts.query_name)
    )
    if opts.available_now:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=opts.trigger_interval)
    return stream.start()


def cec_aggregate(
    spark: SparkSession, opts: JobOptions, input: str, schema: str, spec: AggregateSpec
) -> CECPlan:
    """A CEC aggregate over JSON input ``input`` of ``schema`` (read through the source with
    its dead-letter path, like every job's input): what a job's ``build`` returns."""
    from pyspark.sql import functions as F

    required = [spec.key, spec.value, *([spec.event_time] if spec.event_time else [])]
    events = read_json_input(spark, opts, input, schema, required)
    event_ms = F.col(spec.event_time) if spec.event_time else F.lit(0)
    rows = events.select(
        "partition",
        "offset",
        F.col(spec.key).cast("string").alias("key"),
        F.col(spec.value).cast("double").alias("value"),
        event_ms.cast("long").alias("event_ms"),
        "ingest_ms",
    )
    return CECPlan(rows, input, spec, json_fields(spec))


@dataclass(frozen=True)
class _ClosedBy:
    """The latest window end every run has closed once the input is consumed: CEC's watermark
    (oldest partition's newest event time) and Spark's (newest event time minus the delay),
    whichever is earlier, less one slide (Spark evicts a window at the first batch past it)."""

    input: str
    event_field: str
    kind: TimeWindows
    spark_delay_ms: int

    def __call__(self, inputs: InputView) -> int | None:
        newest: dict[int, int] = {}
        for record, value in inputs.decoded(self.input):
            if isinstance(value, dict) and isinstance(value.get(self.event_field), int):
                t = value[self.event_field]
                newest[record.partition] = max(newest.get(record.partition, t), t)
        if not newest:
            return None
        cec = min(newest.values()) - self.kind.lateness_ms
        spark = max(newest.values()) - self.spark_delay_ms
        return min(cec, spark) - self.kind.slide


def windowed_contract(
    input: str, event_field: str, kind: TimeWindows, spark_delay_ms: int, aggregate: str
) -> ConsistencyContract:
    """A deterministic time-windowed CEC job's contract: results compared exactly, up to the
    windows every run must have closed (``ConsistencyContract.closed_by``), each of the type
    ``result_value`` writes."""
    return ConsistencyContract(
        output_schema=result_schema(aggregate, timed=True),
        # One result per window, also for windows past what every run closed (not compared).
        invariants=(UniqueOutputs(("window",)),),
        window_end=lambda value: int(value["end"]),
        closed_by=_ClosedBy(input, event_field, kind, spark_delay_ms),
        window="window",
        windows=Windows("start", end="end", event_times=EventTimes((input,), event_field)),
    )
