"""NexMark queries as spark-submit-able jobs: ``python -m jobs.nexmark.q3 --help``."""
