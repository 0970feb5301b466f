"""A pipeline with two nondeterministic steps, the baseline the causal-logging issue must fix:
each NexMark bid's price is scaled by Spark's ``rand()`` and converted with a rate fetched from
an HTTP price service whose answers change over time. Output ids are deterministic
(batch, partition, seq); after a re-execution the same id carries a different price. With
``--mode causal`` the same two steps go through the causal services (``ctx.random`` and a
logged service call), and a re-execution repeats the first run's values.

    python -m jobs.prices --prefix nx --param price_url=http://127.0.0.1:8000 ...
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib import causal
from recovery_lib.causal import CausalContext
from recovery_lib.job import JobOptions, JobSpec, output
from recovery_lib.job.runner import run
from recovery_lib.nexmark.streams import NEXMARK_PREFIX, read_events
from recovery_lib.verify.contract import ConsistencyContract, Fields


def fetch_rate(price_url: str, auction: int) -> float:
    with urllib.request.urlopen(f"{price_url}/rate?item={auction}", timeout=10) as response:
        return float(json.loads(response.read())["rate"])


SCHEMA = (
    "auction long, bidder long, price long, dateTime long, ingest_ms long, noise double, "
    "euro double"
)


def build(spark: SparkSession, opts: JobOptions) -> DataFrame:
    price_url = opts.param("price_url")
    bids = read_events(spark, "bids", opts).select(
        "auction", "bidder", "price", "dateTime", "ingest_ms"
    )
    if opts.causal is None:  # native: Spark's rand() and live HTTP calls
        bids = bids.withColumn("noise", F.rand() * 0.01 + 1)

        def convert(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            cache: dict[int, float] = {}
            for frame in frames:
                rates = []
                for auction in frame["auction"].tolist():
                    if auction not in cache:  # one call per auction and task
                        cache[auction] = fetch_rate(price_url, auction)
                    rates.append(cache[auction])
                frame["euro"] = (frame["price"] * frame["noise"] * pd.Series(rates)).round(2)
                yield frame

        converted = bids.mapInPandas(convert, SCHEMA)
    else:  # causal: the same steps through the causal services, logged and replayed

        def causal_convert(
            ctx: CausalContext, frames: Iterator[pd.DataFrame]
        ) -> Iterator[pd.DataFrame]:
            rate = ctx.service(lambda auction: fetch_rate(price_url, auction))
            cache: dict[int, float] = {}
            for frame in frames:
                frame["noise"] = ctx.random.random(len(frame)) * 0.01 + 1
                rates = []
                for auction in frame["auction"].tolist():
                    if auction not in cache:
                        cache[auction] = rate(auction)
                    rates.append(cache[auction])
                frame["euro"] = (frame["price"] * frame["noise"] * pd.Series(rates)).round(2)
                yield frame

        converted = causal.map_in_pandas(bids, causal_convert, SCHEMA, "convert", opts.causal)
    return converted.select(
        *output(
            F.col("auction"),
            [F.col("auction"), F.col("bidder"), F.col("dateTime"), F.col("price"), F.col("euro")],
            F.col("ingest_ms"),
        ),
        *causal.carried(converted),  # piggybacked determinants (causal storage "output")
    )


@contextmanager
def price_service() -> Iterator[dict[str, str]]:
    """A local HTTP price service for the job's runs (its rates change over time)."""
    from recovery_lib.runtime.price_service import PriceService

    with PriceService() as service:
        yield {"price_url": service.url}


JOB = JobSpec(
    name="prices",
    build=build,
    inputs=("bids",),
    # The noise and the service's rate are free; which bid an output prices is not.
    contract=ConsistencyContract(
        deterministic=False,
        agreement=Fields(("auction", "bidder", "dateTime", "price")),
        free=("euro",),
    ),
    default_prefix=NEXMARK_PREFIX,
    params=("price_url",),
    services=price_service,
    description="NexMark bids priced with random noise and a live HTTP price service",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
