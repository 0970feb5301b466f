"""NexMark Q5: see recovery_lib.nexmark.queries.q5. Run: python -m jobs.nexmark.q5 --help"""

from recovery_lib.job.runner import run
from recovery_lib.nexmark.jobs import nexmark_job

JOB = nexmark_job("q5", ("bids",))


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
