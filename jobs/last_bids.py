"""A non-commutative stateful operator: for each auction, the last five bidders in bid order.

Every micro-batch emits, per auction that got bids, the running list of its last five bidders.
The result depends on the order in which a key's rows arrive: after a shuffle that order is
the block fetch order, which differs between executions on a cluster (remote fetches are
randomised), so a re-executed batch can emit another list under the same output id. With
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
OUTPUT_SCHEMA = "auction long, last_bidders string, bids long, ingest_ms long"
STATE_SCHEMA = "last_bidders string, bids long"


def last_bidders(key: tuple, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    (auction,) = key
    last, count = ("", 0) if not state.exists else state.get
    bidders = [b for b in last.split(",") if b]
    ingest = 0
    for frame in frames:
        bidders.extend(str(b) for b in frame["bidder"].tolist())
        count += len(frame)
        ingest = max(ingest, int(frame["ingest_ms"].max()))
    bidders = bidders[-KEEP:]
    state.update((",".join(bidders), count))
    yield pd.DataFrame(
        {
            "auction": [auction],
            "last_bidders": [",".join(bidders)],
            "bids": [count],
            "ingest_ms": [ingest],
        }
    )


def build(spark: SparkSession, opts: QueryOptions) -> DataFrame:
    bids = read_events(spark, "bids", opts).select(
        "auction", "bidder", "topic", "partition", "offset", "ingest_ms"
    )
    fn = last_bidders if opts.causal is None else ordered(last_bidders)
    result = bids.groupBy("auction").applyInPandasWithState(
        fn, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )
    return result.select(
        *output(
            F.col("auction"),
            [F.col("auction"), F.col("last_bidders"), F.col("bids")],
            F.col("ingest_ms"),
        )
    )


def main(argv: list[str] | None = None) -> None:
    from recovery_lib.nexmark.job import run_with

    run_with("lastbids", build, argv)


if __name__ == "__main__":
    main()
