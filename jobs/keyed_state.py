"""A keyed running aggregate whose state grows with the number of distinct keys: per account,
the count and sum of its events. The state benchmark (``recovery bench state``) runs it at 10^4 to
10^7 keys to see how each recovery mode's restart grows with state.

Input ``events``: JSON ``{"account": "a00000042", "amount": 17}``, Kafka-keyed by the account
(``recovery bench state`` and ``recovery experiment run --keys K`` generate them). Each
micro-batch writes, for every account it saw, the running count, sum and newest ingest time
(Spark's update output mode).

    python -m jobs.keyed_state --help
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib.job import JobOptions, JobSpec, output, read_json_input
from recovery_lib.job.runner import run
from recovery_lib.verify.contract import ConsistencyContract, KeyTotals, UniqueOutputs

EVENT_SCHEMA = "account string, amount long"


def build(spark: SparkSession, opts: JobOptions) -> DataFrame:
    events = read_json_input(spark, opts, "events", EVENT_SCHEMA, ["account", "amount"])
    totals = events.groupBy("account").agg(
        F.count("*").alias("count"),
        F.sum("amount").alias("amount"),
        F.max("ingest_ms").alias("ingest_ms"),
    )
    return totals.select(
        *output(
            F.col("account"),
            [F.col("account"), F.col("count"), F.col("amount")],
            F.col("ingest_ms"),
        )
    )


JOB = JobSpec(
    name="keyed_state",
    build=build,
    inputs=("events",),
    output_mode="update",
    # Where batches end decides which running totals are emitted; an account's final count
    # does not depend on it (a count short is lost input, a count over is input counted
    # twice). A re-executed batch recomputes its totals: replay needs no causal log. An
    # account's count grows with every batch that saw it, so no failure-free run writes one
    # count of an account twice (a second is a re-emitted output).
    contract=ConsistencyContract(
        deterministic=False,
        batch_deterministic=True,
        agreement=KeyTotals(("account",), "count", "max"),
        invariants=(UniqueOutputs(("account", "count")),),
    ),
    default_prefix="keyed",
    description="Running count and sum per key (state grows with distinct keys)",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
