"""NexMark Q8: see recovery_lib.nexmark.queries.q8. Run: python -m jobs.nexmark.q8 --help"""

from recovery_lib.job import JobSpec
from recovery_lib.job.runner import run
from recovery_lib.nexmark.contracts import contract
from recovery_lib.nexmark.queries import q8
from recovery_lib.nexmark.streams import NEXMARK_PREFIX

JOB = JobSpec(
    name="q8",
    build=q8,
    inputs=("persons", "auctions"),
    contract=contract("q8"),
    default_prefix=NEXMARK_PREFIX,
    description="NexMark Q8 on Spark Structured Streaming",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
