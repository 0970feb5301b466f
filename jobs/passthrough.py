"""Copy Kafka records to a Kafka topic (sink modes) or to an idempotent DuckDB table.

The smallest job on the source -> sink path; the replay and sink tests kill it.

    python -m jobs.passthrough --topics in --sink kafka --out out --mode dedup --checkpoint ck
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib.io.sinks.table_sink import DuckDBTableSink
from recovery_lib.io.source import SOURCE_NAME
from recovery_lib.kafka.clients import client_config
from recovery_lib.runtime.faults import SINK_FAULT_HOOK, sink_write_fault


def kafka_options() -> dict[str, str]:
    return {f"kafka.{k}": v for k, v in client_config().items()}


def read(spark: SparkSession, topics: str, max_records: int | None, audit: str | None) -> DataFrame:
    reader = (
        spark.readStream.format(SOURCE_NAME).options(**kafka_options()).option("subscribe", topics)
    )
    if max_records:
        reader = reader.option("maxOffsetsPerTrigger", str(max_records))
    if audit:
        reader = reader.option("auditPath", audit)
    return reader.load()


def build_query(spark: SparkSession, args: argparse.Namespace):  # noqa: ANN201
    df = read(spark, args.topics, args.max_records, args.audit)
    if args.sink == "kafka":
        out = df.select(
            "key",
            "value",
            F.array(
                F.struct(
                    F.lit("src").alias("key"),
                    F.format_string("%s/%d@%d", "topic", "partition", "offset")
                    .cast("binary")
                    .alias("value"),
                )
            ).alias("headers"),
        )
        writer = (
            out.writeStream.format(SOURCE_NAME)
            .options(**kafka_options())
            .option("topic", args.out)
            .option("mode", args.mode)
            .option("writeFault", SINK_FAULT_HOOK)  # the tests' mid-write kill
        )
    else:
        table = DuckDBTableSink(args.out, "records")
        table.fault = sink_write_fault
        writer = df.select("key", "value", "topic", "partition", "offset").writeStream.foreachBatch(
            table
        )
    writer = writer.option("checkpointLocation", args.checkpoint).queryName("passthrough")
    writer = (
        writer.trigger(availableNow=True)
        if args.available_now
        else writer.trigger(processingTime="200 milliseconds")
    )
    return writer.start()


def main(argv: list[str] | None = None) -> None:
    from recovery_lib.runtime.faults import mark_driver_process_group
    from recovery_lib.spark.session import build_session

    parser = argparse.ArgumentParser(description="Kafka -> Kafka/DuckDB passthrough")
    parser.add_argument("--topics", required=True)
    parser.add_argument("--sink", choices=["kafka", "table"], default="kafka")
    parser.add_argument("--out", required=True, help="topic (kafka) or DuckDB file (table)")
    parser.add_argument("--mode", default="dedup")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-records", type=int, default=None)
    parser.add_argument("--audit", default=None)
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args(argv)
    mark_driver_process_group()
    spark = build_session("passthrough")
    query = build_query(spark, args)
    query.awaitTermination()


if __name__ == "__main__":
    main()
