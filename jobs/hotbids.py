"""A time-based sliding-window aggregate on NexMark bids (the first half of Q5): bids and the
highest price per auction over 10 s windows sliding every 2 s, by event time. Its build
returns a CEC aggregate (``--mode cec``; ``--mode native`` runs Spark's window aggregation).

    python -m jobs.hotbids --prefix nx --mode cec
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from recovery_lib.cec import AggregateSpec, CECPlan, TimeWindows, cec_aggregate
from recovery_lib.cec.spark import windowed_contract
from recovery_lib.job import JobOptions, JobSpec
from recovery_lib.job.runner import run
from recovery_lib.nexmark.streams import BID_SCHEMA, NEXMARK_PREFIX


def delay_ms(text: str) -> int:
    """``"5 seconds"`` -> 5000 (the job options' watermark delay)."""
    amount, unit = text.split()
    return int(float(amount) * {"second": 1000, "millisecond": 1}[unit.rstrip("s")])


# The job options' defaults (class attributes of the dataclass): what the contract assumes.
KIND = TimeWindows(size_ms=JobOptions.window_s * 1000, slide_ms=JobOptions.slide_s * 1000)


def build(spark: SparkSession, opts: JobOptions) -> CECPlan:
    kind = TimeWindows(size_ms=opts.window_s * 1000, slide_ms=opts.slide_s * 1000)
    spec = AggregateSpec(
        key="auction", value="price", kind=kind, aggregate="max", event_time="dateTime"
    )
    return cec_aggregate(spark, opts, "bids", BID_SCHEMA, spec)


JOB = JobSpec(
    name="hotbids",
    build=build,
    inputs=("bids",),
    contract=windowed_contract("bids", "dateTime", KIND, delay_ms(JobOptions.watermark_delay)),
    default_prefix=NEXMARK_PREFIX,
    description="bids and highest price per auction over sliding event-time windows",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
