"""NexMark Q12: see recovery_lib.nexmark.queries.q12. Run: python -m jobs.nexmark.q12 --help"""

from recovery_lib.job import JobSpec
from recovery_lib.job.runner import run
from recovery_lib.job.spec import ClosingTicks
from recovery_lib.nexmark.config import DEFAULT_BASE_TIME_MS
from recovery_lib.nexmark.contracts import contract, q12_tick
from recovery_lib.nexmark.queries import q12
from recovery_lib.nexmark.streams import NEXMARK_PREFIX

JOB = JobSpec(
    name="q12",
    build=q12,
    inputs=("bids",),
    contract=contract("q12"),
    default_prefix=NEXMARK_PREFIX,
    closing_ticks=ClosingTicks("bids", q12_tick(DEFAULT_BASE_TIME_MS), every_s=11.0),
    description="NexMark Q12 on Spark Structured Streaming",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
