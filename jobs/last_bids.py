"""A non-commutative stateful operator: for each bidder, the last five auctions they bid on,
in bid order.

Every micro-batch emits, per bidder who bid, the running list of their last five auctions.
The result depends on the order in which a key's rows arrive. Bids are partitioned by auction
in Kafka, so one bidder's bids come from every source partition and meet only after the
shuffle, in block fetch order: that order depends on which executor ran which map task and on
when remote fetches complete, so a re-executed batch on a cluster can emit another list under
the same output id. With
``--mode causal`` each key's rows are put in lineage order (topic, partition, offset) first
(recovery_lib.causal.order), and the re-execution emits what the first run did.

    python -m jobs.last_bids --prefix nx --output-topic nx.out.lastbids [--mode causal]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from recovery_lib.causal.order import ordered
from recovery_lib.nexmark.streams import QueryOptions, output, read_events

KEEP = 5
OUTPUT_SCHEMA = "bidder long, last_auctions string, bids long, ingest_ms long"
STATE_SCHEMA = "last_auctions string, bids long"


def last_auctions(key: tuple, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    (bidder,) = key
    last, count = ("", 0) if not state.exists else state.get
    auctions = [a for a in last.split(",") if a]
    ingest = 0
    for frame in frames:
        auctions.extend(str(a) for a in frame["auction"].tolist())
        count += len(frame)
        ingest = max(ingest, int(frame["ingest_ms"].max()))
    auctions = auctions[-KEEP:]
    state.update((",".join(auctions), count))
    yield pd.DataFrame(
        {
            "bidder": [bidder],
            "last_auctions": [",".join(auctions)],
            "bids": [count],
            "ingest_ms": [ingest],
        }
    )


def build(spark: SparkSession, opts: QueryOptions) -> DataFrame:
    bids = read_events(spark, "bids", opts).select(
        "auction", "bidder", "topic", "partition", "offset", "ingest_ms"
    )
    fn = last_auctions if opts.causal is None else ordered(last_auctions)
    result = bids.groupBy("bidder").applyInPandasWithState(
        fn, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )
    return result.select(
        *output(
            F.col("bidder"),
            [F.col("bidder"), F.col("last_auctions"), F.col("bids")],
            F.col("ingest_ms"),
        )
    )


def main(argv: list[str] | None = None) -> None:
    from recovery_lib.nexmark.job import run_with

    run_with("lastbids", build, argv)


if __name__ == "__main__":
    main()
