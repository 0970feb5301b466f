"""Main job on embedded defaults: Kafka events -> (a) validated events to a Kafka topic through the
dedup sink, (b) running count and sum per user into an idempotent DuckDB table.

Events are JSON ``{"user": "u7", "amount": 12.5, "ts": 1700000000000}``. A record that does not
parse goes to the dead-letter topic with the reason and its source position.

    spark-submit jobs/event_counts.py --events demo.events --out demo.valid --table out.duckdb
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib.io.sinks.table_sink import DuckDBTableSink
from recovery_lib.io.source import DEFAULT_DEAD_LETTER_TOPIC, SOURCE_NAME
from recovery_lib.job import JobOptions, JobSpec, output, read_json_input
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.headers import REASON_HEADER, SOURCE_POSITION_HEADER

EVENT_SCHEMA = "user string, amount double, ts long"


@dataclass
class EventCountsOptions:
    events_topic: str = "demo.events"
    valid_topic: str = "demo.valid"
    dead_letter_topic: str = DEFAULT_DEAD_LETTER_TOPIC
    table_path: str = ".recovery/demo/counts.duckdb"
    table: str = "user_totals"
    checkpoint_dir: str = ".recovery/demo/checkpoints"
    max_records_per_batch: int | None = None
    sink_mode: str = "dedup"
    available_now: bool = True
    audit_path: str | None = None


def kafka_options() -> dict[str, str]:
    return {f"kafka.{k}": v for k, v in client_config().items()}


def read_events(spark: SparkSession, opts: EventCountsOptions) -> DataFrame:
    reader = spark.readStream.format(SOURCE_NAME).options(**kafka_options())
    reader = reader.option("subscribe", opts.events_topic)
    if opts.max_records_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(opts.max_records_per_batch))
    if opts.audit_path:
        reader = reader.option("auditPath", opts.audit_path)
    raw = reader.load()
    parsed = raw.select(
        "*", F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("event")
    )
    return parsed


def build_queries(spark: SparkSession, opts: EventCountsOptions) -> list:
    parsed = read_events(spark, opts)
    good = F.col("event.user").isNotNull() & F.col("event.amount").isNotNull()

    def trigger(writer):  # noqa: ANN001, ANN202
        return writer.trigger(availableNow=True) if opts.available_now else writer

    valid = parsed.where(good).select(F.col("key"), F.to_json(F.col("event")).alias("value"))
    q_valid = trigger(
        valid.writeStream.format(SOURCE_NAME)
        .options(**kafka_options())
        .option("topic", opts.valid_topic)
        .option("mode", opts.sink_mode)
        .option("checkpointLocation", f"{opts.checkpoint_dir}/valid")
        .queryName("event_counts_valid")
    ).start()

    dead = parsed.where(~good | F.col("event").isNull()).select(
        F.col("key"),
        F.col("value"),
        F.array(
            F.struct(
                F.lit(REASON_HEADER).alias("key"),
                F.lit(b"value is not an event JSON {user, amount, ts}").alias("value"),
            ),
            F.struct(
                F.lit(SOURCE_POSITION_HEADER).alias("key"),
                F.format_string("%s/%d@%d", "topic", "partition", "offset")
                .cast("binary")
                .alias("value"),
            ),
        ).alias("headers"),
    )
    q_dead = trigger(
        dead.writeStream.format(SOURCE_NAME)
        .options(**kafka_options())
        .option("topic", opts.dead_letter_topic)
        .option("mode", "dedup")
        .option("sinkId", "event_counts_dead")
        .option("checkpointLocation", f"{opts.checkpoint_dir}/dead")
        .queryName("event_counts_dead")
    ).start()

    totals = (
        parsed.where(good)
        .groupBy(F.col("event.user").alias("user"))
        .agg(F.count("*").alias("events"), F.sum("event.amount").alias("amount"))
    )
    q_totals = trigger(
        totals.writeStream.outputMode("update")
        .foreachBatch(DuckDBTableSink(opts.table_path, opts.table))
        .option("checkpointLocation", f"{opts.checkpoint_dir}/totals")
        .queryName("event_counts_totals")
    ).start()
    return [q_valid, q_dead, q_totals]


def build(spark: SparkSession, opts: JobOptions) -> DataFrame:
    """The job's Kafka output as a job of the public API (experiments, daemon, DAGs): valid
    events, keyed by user (bad records go to the dead-letter topic). The demo's ``main`` also
    keeps running totals in DuckDB (``build_queries``)."""
    events = read_json_input(spark, opts, "events", EVENT_SCHEMA, ["user", "amount"])
    return events.select(
        *output(F.col("user"), [F.col("user"), F.col("amount"), F.col("ts")], F.col("ingest_ms"))
    )


JOB = JobSpec(
    name="event_counts",
    build=build,
    inputs=("events",),
    default_prefix="demo",  # reads demo.events, as the demo produces them
    description="Validated user events (the demo's main job)",
)


def main(argv: list[str] | None = None) -> None:
    from recovery_lib.runtime.faults import mark_driver_process_group
    from recovery_lib.spark.session import build_session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default=EventCountsOptions.events_topic)
    parser.add_argument("--out", default=EventCountsOptions.valid_topic)
    parser.add_argument("--table", default=EventCountsOptions.table_path)
    parser.add_argument("--checkpoints", default=EventCountsOptions.checkpoint_dir)
    parser.add_argument("--max-records", type=int, default=None)
    parser.add_argument("--continuous", action="store_true", help="run until killed")
    args = parser.parse_args(argv)
    mark_driver_process_group()
    spark = build_session("event_counts")
    opts = EventCountsOptions(
        events_topic=args.events,
        valid_topic=args.out,
        table_path=args.table,
        checkpoint_dir=args.checkpoints,
        max_records_per_batch=args.max_records,
        available_now=not args.continuous,
    )
    for query in build_queries(spark, opts):
        query.awaitTermination()


if __name__ == "__main__":
    main()
