"""Judge one NexMark run's sink output: the oracle against a reference run, plus the query's
reference results computed by DuckDB from the very input the generator produced (deterministic
queries), or the query's invariants (Q12: every bid counted exactly once across windows).

Used by ``recovery experiment run`` and ``recovery verify``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.verify.oracle import ConsistencyReport, check

NONDETERMINISTIC = frozenset({"q12", "prices", "lastbids"})
# Judged against failure-free reference runs only (no DuckDB reference results).
NO_REFERENCE_RESULTS = frozenset({"prices", "lastbids"})
TICK_BIDDER = 1  # q12 ticks: a bidder id the generator never uses (ids start at 1000)


def consumer_view(raw: Iterable[SinkRecord], dedup: bool) -> list[dict]:
    """The rows a consumer sees: through the dedup reader (first copy of each id) or raw."""
    seen: set[str] = set()
    rows = []
    for record in raw:
        if dedup and record.id is not None:
            if record.id in seen:
                continue
            seen.add(record.id)
        rows.append(json.loads(record.value))
    return rows


def judge_run(
    query: str,
    raw: Sequence[SinkRecord],
    reference: Sequence[SinkRecord] | None,
    dedup: bool,
    generator: GeneratorConfig | None = None,
    events: int | None = None,
) -> ConsistencyReport:
    """The oracle's report; with ``generator`` and ``events`` also the reference results."""
    from recovery_lib.nexmark.reference import check_q12, compare, load_events, reference_rows

    query = query.lower()
    deterministic = query not in NONDETERMINISTIC
    invariants = None
    mismatch = None
    if generator is not None and events and query not in NO_REFERENCE_RESULTS:
        con = load_events(generator, events)
        rows = consumer_view(raw, dedup)
        if deterministic:
            mismatch = compare(rows, reference_rows(con, query))
        else:
            invariants = check_q12(con, rows, ignore_bidders=[TICK_BIDDER])
    report = check(
        query, list(raw), list(reference) if reference is not None else None,
        dedup=dedup, deterministic=deterministic, invariants=invariants,
    )  # fmt: skip
    if mismatch is not None:
        report.reference_results_mismatch = mismatch.missing + mismatch.unexpected
    return report
