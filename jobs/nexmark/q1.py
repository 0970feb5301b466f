"""NexMark Q1: see recovery_lib.nexmark.queries.q1. Run: python -m jobs.nexmark.q1 --help"""

from recovery_lib.job import JobSpec
from recovery_lib.job.runner import run
from recovery_lib.nexmark.contracts import contract
from recovery_lib.nexmark.queries import q1
from recovery_lib.nexmark.streams import NEXMARK_PREFIX

JOB = JobSpec(
    name="q1",
    build=q1,
    inputs=("bids",),
    contract=contract("q1"),
    default_prefix=NEXMARK_PREFIX,
    description="NexMark Q1 on Spark Structured Streaming",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
