"""NexMark split into stages with a shuffle by key between them, as CheckMate's topologies
are: a routing stage re-keys a stream (Kafka partitions by key: the shuffle) and the next
stage runs the query's operator on the routed topic, which keeps the stream's JSON schema, so
the query itself is the ordinary NexMark job reading its input from the routing stage.

    ROUTE_BIDS_BY_AUCTION   bids keyed by auction      -> q1 (stateless)
    ROUTE_BIDS_BY_BIDDER    bids keyed by bidder       -> q12 (per-bidder windows)
    ROUTE_PERSONS / ROUTE_AUCTIONS_BY_SELLER           -> q3, q8 (joins on the person id)
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib.job import JobOptions, JobSpec, output
from recovery_lib.nexmark.streams import KINDS, NEXMARK_PREFIX, read_events
from recovery_lib.verify.contract import ConsistencyContract


def _fields(kind: str) -> list[str]:
    schema, _ = KINDS[kind]
    return [part.strip().split(" ")[0] for part in schema.split(",")]


def route(kind: str, key: str, name: str) -> JobSpec:
    """A stage that re-keys stream ``kind`` by ``key``, passing every field on unchanged."""

    def build(spark: SparkSession, opts: JobOptions) -> DataFrame:
        events = read_events(spark, kind, opts)
        return events.select(
            *output(F.col(key), [F.col(f) for f in _fields(kind)], F.col("ingest_ms"))
        )

    return JobSpec(
        name=name,
        build=build,
        inputs=(kind,),
        contract=ConsistencyContract(),
        default_prefix=NEXMARK_PREFIX,
        description=f"NexMark {kind} re-keyed by {key} (a pipeline's shuffle stage)",
    )


ROUTE_BIDS_BY_AUCTION = route("bids", "auction", "route_bids_auction")
ROUTE_BIDS_BY_BIDDER = route("bids", "bidder", "route_bids_bidder")
ROUTE_PERSONS = route("persons", "id", "route_persons")
ROUTE_AUCTIONS_BY_SELLER = route("auctions", "seller", "route_auctions_seller")
