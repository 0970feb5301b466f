"""NexMark Q7: see recovery_lib.nexmark.queries.q7. Run: python -m jobs.nexmark.q7 --help"""

from pyspark.sql import DataFrame, SparkSession

from recovery_lib.nexmark.job import run
from recovery_lib.nexmark.queries import q7
from recovery_lib.nexmark.streams import QueryOptions


def build(spark: SparkSession, opts: QueryOptions) -> DataFrame:
    """The query's output DataFrame (key, value, ingest_ms), built in-process."""
    return q7(spark, opts)


def main(argv: list[str] | None = None) -> None:
    run("q7", argv)


if __name__ == "__main__":
    main()
