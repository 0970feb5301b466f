"""Library pieces the NexMark jobs are built from: typed reading of the event topics with a
dead-letter path, and writing a query's output through the Kafka sink with its ingest time.

A query's output DataFrame has columns ``key`` (string), ``value`` (JSON string) and
``ingest_ms`` (ingest time of the newest input the output depends on). ``write_output`` puts
``ingest_ms`` into the ``rl.ingest_ms`` header, where the latency collector finds it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib.causal.log import CausalConfig
from recovery_lib.io.sinks.ids import DET_COLUMN
from recovery_lib.io.source import SOURCE_NAME
from recovery_lib.kafka.clients import client_config
from recovery_lib.metrics.listener import DEAD_LETTER_METRIC
from recovery_lib.nexmark.config import GeneratorConfig

PERSON_SCHEMA = (
    "id long, name string, emailAddress string, creditCard string, city string, state string, "
    "dateTime long"
)
AUCTION_SCHEMA = (
    "id long, itemName string, description string, initialBid long, reserve long, dateTime long, "
    "expires long, seller long, category long"
)
BID_SCHEMA = "auction long, bidder long, price long, channel string, url string, dateTime long"

KINDS = {
    "persons": (PERSON_SCHEMA, ["id", "name", "state", "dateTime"]),
    "auctions": (AUCTION_SCHEMA, ["id", "seller", "category", "dateTime"]),
    "bids": (BID_SCHEMA, ["auction", "bidder", "price", "dateTime"]),
}
INGEST_HEADER = "rl.ingest_ms"


@dataclass
class QueryOptions:
    """Everything a NexMark job needs; defaults run on the embedded broker."""

    query: str = "q1"
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    checkpoint_dir: str = ".recovery/nexmark/checkpoints"
    output_topic: str | None = None
    dead_letter_topic: str | None = None
    sink_mode: str = "dedup"
    available_now: bool = False
    trigger_interval: str = "0 seconds"
    max_records_per_batch: int | None = None
    ending_offsets: str | None = None  # JSON {topic: {partition: offset}}: a bounded run
    watermark_delay: str = "5 seconds"
    window_s: int = 10
    slide_s: int = 2
    q12_window_s: int = 10
    kafka: dict[str, str] = field(default_factory=dict)
    causal: CausalConfig | None = None  # set in mode "causal": nondeterminism is logged
    # Standby jobs (recovery_lib/standby): the fencing epoch the sink writes with and the epoch
    # store it checks; a standby replays its primary's batches from this shipped offset-log tail.
    epoch: int = 0
    epoch_store: str | None = None
    follow_log: str | None = None

    def __post_init__(self) -> None:
        if not self.kafka:
            self.kafka = client_config()

    @property
    def checkpoint_path(self) -> str:
        return f"{self.checkpoint_dir}/{self.query}"

    def enable_causal(self, on_missing: str = "fail", storage: str = "kafka") -> CausalConfig:
        """Causal logging for this job: determinants in ``<output topic>.determinants`` (or
        piggybacked on the output records), the causal state next to the Spark checkpoint."""
        self.causal = CausalConfig(
            job=self.out_topic,
            state_dir=f"{self.checkpoint_path}.causal",
            kafka=dict(self.kafka),
            on_missing=on_missing,
            storage=storage,
            output_topic=self.out_topic,
        )
        return self.causal

    @property
    def out_topic(self) -> str:
        return self.output_topic or f"{self.generator.topic_prefix}.out.{self.query}"

    @property
    def dlq_topic(self) -> str:
        return self.dead_letter_topic or f"{self.generator.topic_prefix}.deadletter"

    def topic_for(self, kind: str) -> str:
        return {
            "persons": self.generator.persons_topic,
            "auctions": self.generator.auctions_topic,
            "bids": self.generator.bids_topic,
        }[kind]

    def kafka_options(self) -> dict[str, str]:
        return {f"kafka.{k}": v for k, v in self.kafka.items()}


def read_events(
    spark: SparkSession,
    kind: str,
    opts: QueryOptions,
    clock_column: tuple[str, str] | None = None,
) -> DataFrame:
    """Parsed events of one kind with ``event_time`` and ``ingest_ms``; bad records go to the
    dead-letter topic (reason + source position) and are counted in the progress metrics.

    ``clock_column=(name, scope)`` (causal mode) adds ``name``: the processing time at which
    rows passed the dead-letter router, read through the causal clock of ``scope``. The rows
    pass through Python there anyway, so the clock costs no extra Python operator (Q12)."""
    schema, required = KINDS[kind]
    reader = spark.readStream.format(SOURCE_NAME).options(**opts.kafka_options())
    reader = reader.option("subscribe", opts.topic_for(kind))
    if opts.max_records_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(opts.max_records_per_batch))
    if opts.ending_offsets:
        reader = reader.option("endingOffsets", opts.ending_offsets)
    if opts.follow_log:
        reader = (
            reader.option("cutPolicy", "follow")
            .option("followLog", opts.follow_log)
            .option("followCheckpoint", opts.checkpoint_path)
        )
    raw = reader.load()
    parsed = raw.select(
        F.col("key").cast("string").alias("key"),
        F.col("value"),
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.unix_millis("timestamp").alias("ingest_ms"),
        F.from_json(F.col("value").cast("string"), schema).alias("e"),
    )
    missing = [F.when(F.col(f"e.{name}").isNull(), F.lit(name)) for name in required]
    # from_json yields a struct of nulls for text that is not JSON at all.
    all_null = F.lit(True)
    for name in required:
        all_null = all_null & F.col(f"e.{name}").isNull()
    reason: Column = F.when(
        F.col("e").isNull() | all_null, F.lit(f"value is not a JSON {kind[:-1]} ({schema})")
    ).otherwise(
        F.when(
            F.concat_ws(",", *missing) != "",
            F.concat(F.lit("missing required fields: "), F.concat_ws(",", *missing)),
        )
    )
    flagged = parsed.select("*", reason.alias("_reason")).observe(
        f"{DEAD_LETTER_METRIC}_{kind}", F.sum(F.when(F.col("_reason").isNotNull(), 1).otherwise(0))
    )
    routed = route_dead_letters(flagged, opts, clock_column)
    return routed.select(
        "key",
        "topic",
        "partition",
        "offset",
        "ingest_ms",
        "e.*",
        F.timestamp_millis(F.col("e.dateTime")).alias("event_time"),
        *([clock_column[0]] if clock_column else []),
    )


def route_dead_letters(
    df: DataFrame, opts: QueryOptions, clock_column: tuple[str, str] | None = None
) -> DataFrame:
    """Rows with a ``_reason`` are produced to the dead-letter topic (flushed before the task
    ends, id = source position, so a re-run dedups); the others continue without ``value``
    (and with the causal processing-time column, see ``read_events``)."""
    kafka = dict(opts.kafka)
    topic = opts.dlq_topic
    out_fields = [f for f in df.schema.fields if f.name not in ("value", "_reason")]
    from pyspark.sql.types import StructField, StructType, TimestampType

    keep = [f.name for f in out_fields]
    causal = opts.causal
    if clock_column is not None:
        if causal is None:
            raise ValueError("clock_column needs causal mode (opts.causal)")
        out_fields.append(StructField(clock_column[0], TimestampType(), True))
    out_schema = StructType(out_fields)

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if clock_column is None:
            yield from _route(batches)
            return
        from recovery_lib.causal.operators import flushing, open_context, stamped

        ctx = open_context(clock_column[1], causal)
        rows = (stamped(batch, clock_column[0], ctx) for batch in _route(batches))
        yield from flushing(ctx, rows)  # determinants durable before rows leave

    def _route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        from recovery_lib.io.client_cache import cached
        from recovery_lib.io.sinks.ids import ID_HEADER
        from recovery_lib.io.task import task_info
        from recovery_lib.runtime.faults import maybe_fail_task

        maybe_fail_task(task_info()["attempt"])
        producer: Any = None
        for batch in batches:
            bad = pc.is_valid(batch.column("_reason"))
            if pc.any(bad).as_py():
                if producer is None:
                    from confluent_kafka import Producer

                    producer = cached("producer:deadletter", kafka, lambda c: Producer(c))
                rows = batch.filter(bad).to_pylist()
                for row in rows:
                    position = f"{row['topic']}/{row['partition']}@{row['offset']}"
                    producer.produce(
                        topic,
                        row["value"],
                        row["key"],
                        headers=[
                            (ID_HEADER, f"dlq:{position}".encode()),
                            ("rl.reason", row["_reason"].encode()),
                            ("rl.source", position.encode()),
                        ],
                    )
                batch = batch.filter(pc.invert(bad))
            yield batch.select(keep)
        if producer is not None and producer.flush(60):
            raise RuntimeError(f"dead letters were not acknowledged by the broker ({topic})")

    return df.mapInArrow(route, out_schema)


def with_event_watermark(df: DataFrame, opts: QueryOptions) -> DataFrame:
    return df.withWatermark("event_time", opts.watermark_delay)


def output(key: Column, value_fields: list[Column], ingest_ms: Column) -> list[Column]:
    return [
        key.cast("string").alias("key"),
        F.to_json(F.struct(*value_fields)).alias("value"),
        ingest_ms.alias("ingest_ms"),
    ]


def write_output(df: DataFrame, opts: QueryOptions):  # noqa: ANN201 - StreamingQuery
    out = df.select(
        "key",
        "value",
        F.array(
            F.struct(
                F.lit(INGEST_HEADER).alias("key"),
                F.col("ingest_ms").cast("string").cast("binary").alias("value"),
            )
        ).alias("headers"),
        *([F.col(DET_COLUMN)] if DET_COLUMN in df.columns else []),
    )
    writer = (
        out.writeStream.format(SOURCE_NAME)
        .options(**opts.kafka_options())
        .option("topic", opts.out_topic)
        .option("mode", opts.sink_mode)
        .option("checkpointLocation", opts.checkpoint_path)
        .option("epoch", str(opts.epoch))
        .queryName(f"nexmark_{opts.query}")
    )
    if opts.epoch_store:
        writer = writer.option("epochStore", opts.epoch_store)
    if opts.causal is not None and opts.causal.storage == "output":
        writer = writer.option("causalCarrier", "required")
    if opts.causal is not None:
        # Causal mode covers Spark's own nondeterminism too: a stateful operator emits its rows
        # in state-store order, which changes when a re-executed batch reloads the store. (The
        # sink keeps the order of rows that carry determinants.)
        writer = writer.option("stableOrder", "true")
    if opts.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=opts.trigger_interval)
    return writer.start()
