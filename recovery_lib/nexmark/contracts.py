"""The consistency contracts of the NexMark queries and the NexMark job specs' common parts.

Q1-Q8 are deterministic functions of their input (queries.py): every failure-free run gives the
same outputs, and DuckDB computes them from the generated input (reference.py). Q12 counts bids
in processing-time windows: which window a bid falls in is free, each bid counted once is not.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields

from recovery_lib.job.options import JobOptions
from recovery_lib.nexmark.reference import as_multiset, load_events, reference_rows
from recovery_lib.verify.contract import (
    ConsistencyContract,
    EventTimes,
    Flaw,
    Invariant,
    InvariantResult,
    KeyTotals,
    Output,
    TimeSpan,
    UniqueOutputs,
    Windows,
    number_problem,
)
from recovery_lib.verify.inputs import InputView

TICK_BIDDER = 1  # q12 ticks: a bidder id the generator never uses (ids start at 1000)


class ReferenceResults:
    """The outputs equal DuckDB's result of the query over the generated input."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.name = f"{query} reference results (DuckDB over the generated input)"
        self.agreement_covers = True  # a reference run compared exactly shows the same

    def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult:
        if inputs is None or inputs.generator is None or not inputs.events:
            return InvariantResult(self.name, checked=False, details={"why": "input not generated"})

        con = load_events(inputs.generator, inputs.events)
        got = as_multiset(o.value for o in outputs)
        want = as_multiset(reference_rows(con, self.query))
        surplus = got - want
        violations: Counter[Flaw] = Counter()
        violations[Flaw.MISSING_INPUT] = sum((want - got).values())
        violations[Flaw.DUPLICATED_INPUT] = sum(n for row, n in surplus.items() if row in want)
        violations[Flaw.INCONSISTENT] = sum(n for row, n in surplus.items() if row not in want)
        examples = [f"missing {row}" for row in list(want - got)[:3]]
        examples += [f"not in the reference {row}" for row in surplus if row not in want][:3]
        return InvariantResult(
            self.name,
            checked=True,
            violations=+violations,
            details={"expected_rows": sum(want.values()), "rows": sum(got.values())},
            examples=examples,
        )


class BidsCountedOnce:
    """Q12: per bidder, the window counts add up to the bidder's bids in the input, and no
    (bidder, window) is output twice."""

    name = "q12 every bid counted once"
    agreement_covers = True  # per-bidder totals against a reference run show the same

    @staticmethod
    def _bids_per_bidder(inputs: InputView | None) -> Counter[int] | None:
        """From the input topic when known, else from the generator (None: no input at hand)."""
        if inputs is None:
            return None
        if inputs.has("bids"):
            expected: Counter[int] = Counter()
            for _record, bid in inputs.decoded("bids"):
                if isinstance(bid, dict) and bid.get("bidder") not in (None, TICK_BIDDER):
                    expected[bid["bidder"]] += 1
            return expected
        if inputs.generator is not None and inputs.events:
            return _generated_bids(inputs)
        return None

    def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult:
        per_bidder: Counter[int] = Counter()
        windows: Counter[tuple[int, int]] = Counter()
        for o in outputs:
            bidder, num = o.value.get("bidder"), o.value.get("num")
            if bidder == TICK_BIDDER or number_problem(num, True, True) is not None:
                continue  # a tick, or malformed (the agreement counts it)
            per_bidder[bidder] += num
            windows[(bidder, o.value.get("window_start"))] += 1
        violations: Counter[Flaw] = Counter()
        violations[Flaw.DUPLICATED_INPUT] += sum(n - 1 for n in windows.values() if n > 1)
        expected = self._bids_per_bidder(inputs)
        if expected is None:
            return InvariantResult(self.name, checked=False, violations=+violations)
        violations[Flaw.MISSING_INPUT] += sum((expected - per_bidder).values())
        violations[Flaw.DUPLICATED_INPUT] += sum((per_bidder - expected).values())
        wrong = [b for b in set(expected) | set(per_bidder) if expected[b] != per_bidder[b]]
        return InvariantResult(
            self.name,
            checked=True,
            violations=+violations,
            details={
                "bidders": len(expected),
                "bids_expected": sum(expected.values()),
                "bids_counted": sum(per_bidder.values()),
                "bidders_wrong": len(wrong),
            },
            examples=[f"bidder {b}: counted {per_bidder[b]}, bid {expected[b]}" for b in wrong[:5]],
        )


def _generated_bids(inputs: InputView) -> Counter[int]:
    con = load_events(inputs.generator, inputs.events)
    return Counter(
        dict(con.execute("SELECT bidder, count(*) FROM bids GROUP BY bidder").fetchall())
    )


@dataclass(frozen=True)
class GeneratedEventTimes:
    """The earliest and latest event time of the query's ``inputs``: from the generator's
    events when the input was generated (DuckDB), else from the input topics."""

    inputs: tuple[str, ...]

    def __call__(self, inputs: InputView) -> TimeSpan | None:
        if inputs.generator is not None and inputs.events:
            con = load_events(inputs.generator, inputs.events)
            spans = [
                con.execute(f'SELECT min("dateTime"), max("dateTime") FROM {name}').fetchone()
                for name in self.inputs
            ]
            found = [(lo, hi) for lo, hi in spans if lo is not None]
            if found:
                return TimeSpan(min(lo for lo, _ in found), max(hi for _, hi in found))
        return EventTimes(self.inputs, "dateTime")(inputs)


# What each windowed query reads (event times of its windows).
WINDOWED_INPUTS = {"q5": ("bids",), "q7": ("bids",), "q8": ("persons", "auctions")}


def _default(name: str) -> int:
    """A job option's default (without building options: no broker)."""
    return next(f.default for f in fields(JobOptions) if f.name == name)


def contract(query: str) -> ConsistencyContract:
    if query == "q12":
        return ConsistencyContract(
            deterministic=False,
            agreement=KeyTotals(("bidder",), "num", "sum", ignore=frozenset({TICK_BIDDER})),
            invariants=(BidsCountedOnce(),),
            free=("window_start",),  # processing time: which window a bid falls in
            window="window_start",
            windows=Windows(
                "window_start", size_ms=_default("q12_window_s") * 1000, clock="processing"
            ),
        )
    window_ms = _default("window_s") * 1000
    window_end = None
    windows = None
    if query == "q5":
        window_end = _q5_window_end
        windows = Windows(
            "window_start", end="window_end", event_times=GeneratedEventTimes(("bids",))
        )
    elif query in ("q7", "q8"):
        window_end = _WindowStartPlus(window_ms)
        windows = Windows(
            "window_start",
            size_ms=window_ms,
            event_times=GeneratedEventTimes(WINDOWED_INPUTS[query]),
        )
    invariants: tuple[Invariant, ...] = (ReferenceResults(query),)
    if query in UNIQUE_OUTPUTS:  # also judges a reference run without the input
        invariants = (UniqueOutputs(), *invariants)
    return ConsistencyContract(
        invariants=invariants,
        window_end=window_end,
        window="window_start" if window_end is not None else None,
        windows=windows,
    )


# Queries whose outputs never repeat in a failure-free run (a join result per auction, one
# result per window); Q1 and Q2 map bids, and two equal bids give two equal outputs.
UNIQUE_OUTPUTS = ("q3", "q5", "q7", "q8")


def _q5_window_end(row: dict) -> int:
    return int(row["window_end"])


class _WindowStartPlus:
    def __init__(self, size_ms: int) -> None:
        self.size_ms = size_ms

    def __call__(self, row: dict) -> int:
        return int(row["window_start"]) + self.size_ms


def q12_tick(base_time_ms: int) -> bytes:
    """A bid of TICK_BIDDER: sent after the input so that processing-time windows close."""
    return json.dumps(
        {
            "auction": 1000,
            "bidder": TICK_BIDDER,
            "price": 1,
            "channel": "tick",
            "url": "tick",
            "dateTime": base_time_ms,
        }
    ).encode()
