"""NexMark Q1: see recovery_lib.nexmark.queries.q1. Run: python -m jobs.nexmark.q1 --help"""

from recovery_lib.job.runner import run
from recovery_lib.nexmark.jobs import nexmark_job

JOB = nexmark_job("q1", ("bids",))


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
