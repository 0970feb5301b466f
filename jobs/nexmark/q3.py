"""NexMark Q3: see recovery_lib.nexmark.queries.q3. Run: python -m jobs.nexmark.q3 --help"""

from pyspark.sql import DataFrame, SparkSession

from recovery_lib.nexmark.job import run
from recovery_lib.nexmark.queries import q3
from recovery_lib.nexmark.streams import QueryOptions


def build(spark: SparkSession, opts: QueryOptions) -> DataFrame:
    """The query's output DataFrame (key, value, ingest_ms), built in-process."""
    return q3(spark, opts)


def main(argv: list[str] | None = None) -> None:
    run("q3", argv)


if __name__ == "__main__":
    main()
