"""NexMark Q1: see recovery_lib.nexmark.queries.q1. Run: python -m jobs.nexmark.q1 --help"""

from pyspark.sql import DataFrame, SparkSession

from recovery_lib.nexmark.job import run
from recovery_lib.nexmark.queries import q1
from recovery_lib.nexmark.streams import QueryOptions


def build(spark: SparkSession, opts: QueryOptions) -> DataFrame:
    """The query's output DataFrame (key, value, ingest_ms), built in-process."""
    return q1(spark, opts)


def main(argv: list[str] | None = None) -> None:
    run("q1", argv)


if __name__ == "__main__":
    main()
