"""The NexMark queries as jobs of the public API: ``jobs/nexmark/qN.py`` each hold ``JOB``."""

from __future__ import annotations

from recovery_lib.job.spec import ClosingTicks, JobSpec
from recovery_lib.nexmark.config import DEFAULT_BASE_TIME_MS
from recovery_lib.nexmark.contracts import contract, q12_tick
from recovery_lib.nexmark.queries import get_query
from recovery_lib.nexmark.streams import NEXMARK_PREFIX


def nexmark_job(query: str, inputs: tuple[str, ...]) -> JobSpec:
    """NexMark ``query`` reading ``inputs`` (of persons, auctions, bids) from the ``nexmark``
    prefix, judged by its contract; Q12's processing-time windows close with ticks."""
    ticks = None
    if query == "q12":
        ticks = ClosingTicks("bids", q12_tick(DEFAULT_BASE_TIME_MS), every_s=11.0)
    return JobSpec(
        name=query,
        build=get_query(query),
        inputs=inputs,
        contract=contract(query),
        default_prefix=NEXMARK_PREFIX,
        closing_ticks=ticks,
        description=f"NexMark {query.upper()} on Spark Structured Streaming",
    )
