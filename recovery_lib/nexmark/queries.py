"""The NexMark queries as Spark streaming DataFrames (Beam's definitions, Spark's operators).

Each function takes the SparkSession and JobOptions and returns the output DataFrame
(key, value JSON, ingest_ms). Deviations from Beam, chosen so that the output is a
deterministic function of the input (the reference in reference.py computes the same):
  Q5  one hot auction per sliding window: the highest count, ties to the highest auction id
  Q7  one highest bid per window: the highest price, ties to the highest (auction, bidder, time)
  Q8  one row per (new person, auction) pair in the same tumbling window
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib.errors import ConfigurationError
from recovery_lib.job.frames import output
from recovery_lib.job.options import JobOptions
from recovery_lib.nexmark.streams import read_events, with_event_watermark

Q3_STATES = ("OR", "ID", "CA")
Q3_CATEGORY = 10
Q2_AUCTION_SKIP = 123


def q1(spark: SparkSession, opts: JobOptions) -> DataFrame:
    """Currency conversion: bid prices from dollars to euros."""
    bids = read_events(spark, "bids", opts)
    return bids.select(
        *output(
            F.col("auction"),
            [
                F.col("auction"),
                F.col("bidder"),
                ((F.col("price") * 89) / 100).cast("long").alias("price"),
                F.col("dateTime"),
            ],
            F.col("ingest_ms"),
        )
    )


def q2(spark: SparkSession, opts: JobOptions) -> DataFrame:
    """Selection: bids on every 123rd auction."""
    bids = read_events(spark, "bids", opts).where(F.col("auction") % Q2_AUCTION_SKIP == 0)
    return bids.select(
        *output(F.col("auction"), [F.col("auction"), F.col("price")], F.col("ingest_ms"))
    )


def q3(spark: SparkSession, opts: JobOptions) -> DataFrame:
    """Local item suggestion: incremental join of sellers in OR/ID/CA with category-10 auctions."""
    persons = (
        read_events(spark, "persons", opts)
        .where(F.col("state").isin(*Q3_STATES))
        .select(
            F.col("id").alias("p_id"), "name", "city", "state", F.col("ingest_ms").alias("p_ingest")
        )
    )
    auctions = (
        read_events(spark, "auctions", opts)
        .where(F.col("category") == Q3_CATEGORY)
        .select(F.col("id").alias("a_id"), "seller", F.col("ingest_ms").alias("a_ingest"))
    )
    joined = persons.join(auctions, F.col("p_id") == F.col("seller"))
    return joined.select(
        *output(
            F.col("a_id"),
            [F.col("name"), F.col("city"), F.col("state"), F.col("a_id").alias("id")],
            F.greatest("p_ingest", "a_ingest"),
        )
    )


def q5(spark: SparkSession, opts: JobOptions) -> DataFrame:
    """Hot items: the auction with the most bids in each sliding window."""
    bids = with_event_watermark(read_events(spark, "bids", opts), opts)
    counts = bids.groupBy(
        F.window("event_time", f"{opts.window_s} seconds", f"{opts.slide_s} seconds"), "auction"
    ).agg(F.count("*").alias("num"), F.max("ingest_ms").alias("ingest_ms"))
    hot = counts.groupBy("window").agg(
        F.max(F.struct("num", "auction")).alias("top"), F.max("ingest_ms").alias("ingest_ms")
    )
    return hot.select(
        *output(
            F.col("top.auction"),
            [
                F.col("top.auction").alias("auction"),
                F.col("top.num").alias("num"),
                F.unix_millis("window.start").alias("window_start"),
                F.unix_millis("window.end").alias("window_end"),
            ],
            F.col("ingest_ms"),
        )
    )


def q7(spark: SparkSession, opts: JobOptions) -> DataFrame:
    """Highest bid in each tumbling window."""
    bids = with_event_watermark(read_events(spark, "bids", opts), opts)
    top = bids.groupBy(F.window("event_time", f"{opts.window_s} seconds")).agg(
        F.max(F.struct("price", "auction", "bidder", "dateTime")).alias("top"),
        F.max("ingest_ms").alias("ingest_ms"),
    )
    return top.select(
        *output(
            F.col("top.auction"),
            [
                F.col("top.auction").alias("auction"),
                F.col("top.bidder").alias("bidder"),
                F.col("top.price").alias("price"),
                F.col("top.dateTime").alias("dateTime"),
                F.unix_millis("window.start").alias("window_start"),
            ],
            F.col("ingest_ms"),
        )
    )


def q8(spark: SparkSession, opts: JobOptions) -> DataFrame:
    """New users: persons who opened an auction in the tumbling window they registered in."""
    size = f"{opts.window_s} seconds"
    persons = with_event_watermark(read_events(spark, "persons", opts), opts).select(
        F.col("id").alias("p_id"),
        "name",
        F.window("event_time", size).alias("p_window"),
        F.col("ingest_ms").alias("p_ingest"),
    )
    auctions = with_event_watermark(read_events(spark, "auctions", opts), opts).select(
        F.col("id").alias("a_id"),
        "seller",
        F.window("event_time", size).alias("a_window"),
        F.col("ingest_ms").alias("a_ingest"),
    )
    joined = persons.join(
        auctions, (F.col("p_id") == F.col("seller")) & (F.col("p_window") == F.col("a_window"))
    )
    return joined.select(
        *output(
            F.col("p_id"),
            [
                F.col("p_id").alias("id"),
                F.col("name"),
                F.col("a_id").alias("auction"),
                F.unix_millis("p_window.start").alias("window_start"),
            ],
            F.greatest("p_ingest", "a_ingest"),
        )
    )


def q12(spark: SparkSession, opts: JobOptions) -> DataFrame:
    """Bids per bidder in processing-time tumbling windows (nondeterministic by design).

    Native: Spark's ``current_timestamp()``, the micro-batch's timestamp (which Spark keeps in
    its offset log). Causal mode: the wall clock when rows leave the source's Python stage, read
    through the causal clock and replayed on re-execution."""
    if opts.causal is None:
        bids = read_events(spark, "bids", opts).withColumn("proc_time", F.current_timestamp())
    else:  # stamped where the rows already pass through Python (no extra operator)
        bids = read_events(spark, "bids", opts, clock_column=("proc_time", "q12-proctime"))
    counts = (
        bids.withWatermark("proc_time", "0 seconds")
        .groupBy("bidder", F.window("proc_time", f"{opts.q12_window_s} seconds"))
        .agg(F.count("*").alias("num"), F.max("ingest_ms").alias("ingest_ms"))
    )
    return counts.select(
        *output(
            F.col("bidder"),
            [F.col("bidder"), F.col("num"), F.unix_millis("window.start").alias("window_start")],
            F.col("ingest_ms"),
        )
    )


QUERIES: dict[str, Callable[[SparkSession, JobOptions], DataFrame]] = {
    "q1": q1,
    "q2": q2,
    "q3": q3,
    "q5": q5,
    "q7": q7,
    "q8": q8,
    "q12": q12,
}


def get_query(name: str) -> Callable[[SparkSession, JobOptions], DataFrame]:
    try:
        return QUERIES[name.lower()]
    except KeyError:
        raise ConfigurationError(
            f"unknown NexMark query {name!r}; choose one of {', '.join(QUERIES)}"
        ) from None
