"""NexMark Q2: see recovery_lib.nexmark.queries.q2. Run: python -m jobs.nexmark.q2 --help"""

from pyspark.sql import DataFrame, SparkSession

from recovery_lib.nexmark.job import run
from recovery_lib.nexmark.queries import q2
from recovery_lib.nexmark.streams import QueryOptions


def build(spark: SparkSession, opts: QueryOptions) -> DataFrame:
    """The query's output DataFrame (key, value, ingest_ms), built in-process."""
    return q2(spark, opts)


def main(argv: list[str] | None = None) -> None:
    run("q2", argv)


if __name__ == "__main__":
    main()
