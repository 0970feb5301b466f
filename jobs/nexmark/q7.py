"""NexMark Q7: see recovery_lib.nexmark.queries.q7. Run: python -m jobs.nexmark.q7 --help"""

from recovery_lib.job import JobSpec
from recovery_lib.job.runner import run
from recovery_lib.nexmark.contracts import contract
from recovery_lib.nexmark.queries import q7
from recovery_lib.nexmark.streams import NEXMARK_PREFIX

JOB = JobSpec(
    name="q7",
    build=q7,
    inputs=("bids",),
    contract=contract("q7"),
    default_prefix=NEXMARK_PREFIX,
    description="NexMark Q7 on Spark Structured Streaming",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
