"""NexMark Q3: see recovery_lib.nexmark.queries.q3. Run: python -m jobs.nexmark.q3 --help"""

from recovery_lib.job.runner import run
from recovery_lib.nexmark.jobs import nexmark_job

JOB = nexmark_job("q3", ("persons", "auctions"))


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
