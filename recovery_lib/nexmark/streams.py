"""NexMark's three event streams as job inputs: typed reading (persons, auctions, bids) with
``event_time``, on top of the generic job pieces (recovery_lib.job.frames)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib.job.frames import read_json_input
from recovery_lib.job.options import JobOptions

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
NEXMARK_PREFIX = "nexmark"


def read_events(
    spark: SparkSession,
    kind: str,
    opts: JobOptions,
    clock_column: tuple[str, str] | None = None,
) -> DataFrame:
    """Parsed events of one kind with ``event_time`` and ``ingest_ms`` (see
    ``read_json_input`` for the dead-letter path and ``clock_column``)."""
    schema, required = KINDS[kind]
    events = read_json_input(spark, opts, kind, schema, required, clock_column)
    return events.withColumn("event_time", F.timestamp_millis(F.col("dateTime")))


def with_event_watermark(df: DataFrame, opts: JobOptions) -> DataFrame:
    return df.withWatermark("event_time", opts.watermark_delay)
