"""NexMark Q2: see recovery_lib.nexmark.queries.q2. Run: python -m jobs.nexmark.q2 --help"""

from recovery_lib.job import JobSpec
from recovery_lib.job.runner import run
from recovery_lib.nexmark.contracts import contract
from recovery_lib.nexmark.queries import q2
from recovery_lib.nexmark.streams import NEXMARK_PREFIX

JOB = JobSpec(
    name="q2",
    build=q2,
    inputs=("bids",),
    contract=contract("q2"),
    default_prefix=NEXMARK_PREFIX,
    description="NexMark Q2 on Spark Structured Streaming",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
