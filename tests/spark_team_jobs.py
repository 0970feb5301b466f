"""Two Spark jobs as a team runs them in production, unchanged: one reads and writes Kafka with
Spark's own connector, one writes from ``foreachBatch``; and the declaration beside them that
names their inputs and outputs for the toolkit (recovery_lib/job/spark_query.py). Tests write
them into a directory outside the repository's packages and put it on PYTHONPATH."""

from __future__ import annotations

from pathlib import Path

# Reads prod.bids with format("kafka"), keeps even prices in euros, writes prod.bids_eur with
# format("kafka"); waits for its query as a production main() does.
BIDS_EUR = """
import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

BOOTSTRAP = os.environ.get("TEAM_KAFKA", "kafka.internal:9092")
BID = "auction long, bidder long, price long, dateTime long"


def main():
    spark = SparkSession.builder.appName("bids_eur").getOrCreate()
    bids = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", BOOTSTRAP)
        .option("subscribe", "prod.bids")
        .option("startingOffsets", "earliest")
        .load()
    )
    bid = F.from_json(F.col("value").cast("string"), BID).alias("b")
    eur = (
        bids.select(F.col("key"), bid)
        .where("b.price % 2 = 0")
        .select(
            F.col("key"),
            F.to_json(
                F.struct(
                    F.col("b.auction").alias("auction"),
                    F.col("b.bidder").alias("bidder"),
                    (F.col("b.price") * 0.9).alias("price_eur"),
                    F.col("b.dateTime").alias("ts"),
                )
            ).alias("value"),
        )
    )
    query = (
        eur.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", BOOTSTRAP)
        .option("topic", "prod.bids_eur")
        .option("checkpointLocation", "/data/checkpoints/bids_eur")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main()
"""

# Reads prod.bids, writes each micro-batch from foreachBatch with a batch Kafka write, and
# returns its query.
BIDS_UPPER = """
import os

BOOTSTRAP = os.environ.get("TEAM_KAFKA", "kafka.internal:9092")


def write_batch(batch, batch_id):
    (
        batch.selectExpr("key", "upper(cast(value as string)) AS value")
        .write.format("kafka")
        .option("kafka.bootstrap.servers", BOOTSTRAP)
        .option("topic", "prod.bids_upper")
        .save()
    )


def start(spark):
    bids = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", BOOTSTRAP)
        .option("subscribe", "prod.bids")
        .option("startingOffsets", "earliest")
        .load()
    )
    return (
        bids.writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", "/data/checkpoints/bids_upper")
        .start()
    )
"""

DECLARATION = '''
"""What the toolkit needs to know of the team's jobs (their files stay as they are)."""

from recovery_lib.job import spark_query_job

BIDS_EUR = spark_query_job(
    "teamjobs.bids_eur:main", name="bids_eur", inputs={"bids": "prod.bids"},
    output="prod.bids_eur",
)
BIDS_UPPER = spark_query_job(
    "teamjobs.bids_upper:start", name="bids_upper", inputs={"bids": "prod.bids"},
    output="prod.bids_upper",
)
'''


def write_team_jobs(root: Path) -> Path:
    """The team's package ``teamjobs`` under ``root`` (to put on PYTHONPATH)."""
    package = root / "teamjobs"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "bids_eur.py").write_text(BIDS_EUR)
    (package / "bids_upper.py").write_text(BIDS_UPPER)
    (package / "recovery.py").write_text(DECLARATION)
    return root
