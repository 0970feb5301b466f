"""A pipeline with two nondeterministic steps, the baseline the causal-logging issue must fix:
each NexMark bid's price is scaled by Spark's ``rand()`` and converted with a rate fetched from
an HTTP price service whose answers change over time. Output ids are deterministic
(batch, partition, seq); after a re-execution the same id carries a different price.

    python -m jobs.nondeterministic_prices --prefix nx --price-url http://127.0.0.1:8000 ...
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from collections.abc import Iterator

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib.nexmark.streams import QueryOptions, output, read_events


def build(spark: SparkSession, opts: QueryOptions, price_url: str) -> DataFrame:
    bids = read_events(spark, "bids", opts).select(
        "auction", "bidder", "price", "dateTime", "ingest_ms", (F.rand() * 0.01 + 1).alias("noise")
    )

    def convert(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        cache: dict[int, float] = {}
        for frame in frames:
            rates = []
            for auction in frame["auction"].tolist():
                if auction not in cache:  # one call per auction and task
                    url = f"{price_url}/rate?item={auction}"
                    with urllib.request.urlopen(url, timeout=10) as response:
                        cache[auction] = json.loads(response.read())["rate"]
                rates.append(cache[auction])
            frame["euro"] = (frame["price"] * frame["noise"] * pd.Series(rates)).round(2)
            yield frame

    schema = (
        "auction long, bidder long, price long, dateTime long, ingest_ms long, noise double, "
        "euro double"
    )
    converted = bids.mapInPandas(convert, schema)
    return converted.select(
        *output(
            F.col("auction"),
            [F.col("auction"), F.col("bidder"), F.col("dateTime"), F.col("euro")],
            F.col("ingest_ms"),
        )
    )


def main(argv: list[str] | None = None) -> None:
    from recovery_lib.nexmark.job import run_with

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--price-url", required=True)
    known, rest = parser.parse_known_args(argv)
    run_with("nondeterministic_prices", lambda s, opts: build(s, opts, known.price_url), rest)


if __name__ == "__main__":
    main()
