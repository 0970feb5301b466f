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
# NexMark delays 0.1 % of events by up to 2 s: windows wait the watermark delay for them.
DELAY_MS = delay_ms(JobOptions.watermark_delay)
KIND = TimeWindows(JobOptions.window_s * 1000, JobOptions.slide_s * 1000, lateness_ms=DELAY_MS)


def build(spark: SparkSession, opts: JobOptions) -> CECPlan:
    kind = TimeWindows(
        opts.window_s * 1000, opts.slide_s * 1000, lateness_ms=delay_ms(opts.watermark_delay)
    )
    spec = AggregateSpec(
        key="auction", value="price", kind=kind, aggregate="max", event_time="dateTime"
    )
    return cec_aggregate(spark, opts, "bids", BID_SCHEMA, spec)


JOB = JobSpec(
    name="hotbids",
    build=build,
    inputs=("bids",),
    contract=windowed_contract("bids", "dateTime", KIND, DELAY_MS, aggregate="max"),
    default_prefix=NEXMARK_PREFIX,
    description="bids and highest price per auction over sliding event-time windows",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
