"""NexMark Q5: see recovery_lib.nexmark.queries.q5. Run: python -m jobs.nexmark.q5 --help"""

from recovery_lib.job import JobSpec
from recovery_lib.job.runner import run
from recovery_lib.nexmark.contracts import contract
from recovery_lib.nexmark.queries import q5
from recovery_lib.nexmark.streams import NEXMARK_PREFIX

JOB = JobSpec(
    name="q5",
    build=q5,
    inputs=("bids",),
    contract=contract("q5"),
    default_prefix=NEXMARK_PREFIX,
    description="NexMark Q5 on Spark Structured Streaming",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
