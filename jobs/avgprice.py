"""CEC's workload on NexMark bids: the average bid price per auction over windows of 10 bids
(paper 003: average price per item over count windows). Its build returns a CEC aggregate:
``--mode cec`` checkpoints the open windows into the output log (recovery_lib/cec), ``--mode
native`` runs the same aggregate on Spark's state store.

    python -m jobs.avgprice --prefix nx --mode cec
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from recovery_lib.cec import AggregateSpec, CECPlan, CountWindows, cec_aggregate
from recovery_lib.cec.operator import result_schema
from recovery_lib.job import JobOptions, JobSpec
from recovery_lib.job.runner import run
from recovery_lib.nexmark.streams import BID_SCHEMA, NEXMARK_PREFIX
from recovery_lib.verify.contract import ConsistencyContract

WINDOW_BIDS = 10


def build(spark: SparkSession, opts: JobOptions) -> CECPlan:
    size = int(opts.params.get("window", WINDOW_BIDS))
    spec = AggregateSpec(key="auction", value="price", kind=CountWindows(size), aggregate="avg")
    return cec_aggregate(spark, opts, "bids", BID_SCHEMA, spec)


JOB = JobSpec(
    name="avgprice",
    build=build,
    inputs=("bids",),
    # Deterministic (compared exactly); CEC writes its results itself: their type declared.
    contract=ConsistencyContract(output_schema=result_schema("avg", timed=False)),
    default_prefix=NEXMARK_PREFIX,
    description="average bid price per auction over count windows (CEC's workload)",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
