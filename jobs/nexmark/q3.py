"""NexMark Q3: see recovery_lib.nexmark.queries.q3. Run: python -m jobs.nexmark.q3 --help"""

from recovery_lib.job import JobSpec
from recovery_lib.job.runner import run
from recovery_lib.nexmark.contracts import contract
from recovery_lib.nexmark.queries import q3
from recovery_lib.nexmark.streams import NEXMARK_PREFIX

JOB = JobSpec(
    name="q3",
    build=q3,
    inputs=("persons", "auctions"),
    contract=contract("q3"),
    default_prefix=NEXMARK_PREFIX,
    description="NexMark Q3 on Spark Structured Streaming",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
