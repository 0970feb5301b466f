"""Judge a (faulty) run's sink output by paper 004's delivery guarantees (definitions 6-8).

The judgement reads the job's consistency contract (contract.py) and nothing else about it:

1. **By output id, within the run.** Ids come from lineage, so a re-executed batch reuses them.
   ``divergent`` = ids whose copies differ: the run released two versions of one output, which
   no failure-free run does. What the consumer sees is the first copy of each id (``dedup``
   sink) or every copy; ``duplicates_dropped`` counts what the dedup reader dropped.
2. **By the contract's agreement, against a failure-free reference run** on the same input.
   Ids do not match across runs (batch boundaries differ); the agreement does. Units of the
   reference missing from the run are ``lost``; surplus units of known items ``duplicated``;
   items the reference never has ``extra`` (an output no failure-free run produces).
3. **Invariants** of the contract, each violation tagged with the input flaw that explains it.

Guarantee: ``exactly-once`` when nothing is lost, duplicated, extra or divergent and every
invariant holds; ``at-most-once`` when only missing input explains the differences;
``at-least-once`` when only duplicated input does; ``none`` otherwise. The verdict is
``consistent`` only for exactly-once, and ``inconclusive`` when a requested failure did not
fire or when neither run produced anything (nothing was shown).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.verify.contract import (
    ConsistencyContract,
    Flaw,
    InvariantResult,
    Output,
)
from recovery_lib.verify.inputs import InputView


class Guarantee(StrEnum):
    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"
    AT_MOST_ONCE = "at-most-once"
    NONE = "none"


class Verdict(StrEnum):
    CONSISTENT = "consistent"
    INCONSISTENT = "inconsistent"
    INCONCLUSIVE = "inconclusive"


@dataclass
class ConsistencyReport:
    """The oracle's judgement of one run. ``lost``/``duplicated``/``extra`` are in units of the
    contract's agreement (outputs for ``Exact``/``Fields``, totals for ``KeyTotals``); None
    without a reference run."""

    query: str  # the job's name
    outputs: int
    reference_outputs: int | None
    lost: int | None
    duplicated: int
    divergent: int
    extra: int | None
    duplicates_dropped: int = 0
    agreement: str | None = None
    invariants: list[InvariantResult] = field(default_factory=list)
    failures_not_fired: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)
    # Outputs of windows past the contract's ``closed_by``, left out on each side.
    left_open: dict[str, int] = field(default_factory=dict)

    @property
    def guarantee(self) -> Guarantee:
        flaws: Counter[Flaw] = Counter()
        for result in self.invariants:
            flaws.update(result.violations)
        if self.divergent or self.extra or flaws[Flaw.INCONSISTENT]:
            return Guarantee.NONE
        missing = bool(self.lost) or bool(flaws[Flaw.MISSING_INPUT])
        repeated = bool(self.duplicated) or bool(flaws[Flaw.DUPLICATED_INPUT])
        if missing and repeated:
            return Guarantee.NONE
        if missing:
            return Guarantee.AT_MOST_ONCE
        if repeated:
            return Guarantee.AT_LEAST_ONCE
        return Guarantee.EXACTLY_ONCE

    @property
    def inconclusive_because(self) -> str | None:
        if self.failures_not_fired:
            return (
                f"{self.failures_not_fired} requested failure(s) did not fire: the run shows "
                "nothing about recovery"
            )
        if self.outputs == 0 and not self.reference_outputs:
            return "neither run produced an output: nothing was shown"
        unchecked = [r.name for r in self.invariants if not r.checked]
        # With a reference run the agreement judges; without one, only the invariants do.
        if self.lost is None and unchecked and self.guarantee is Guarantee.EXACTLY_ONCE:
            return f"no reference run and invariants not checked: {', '.join(unchecked)}"
        return None

    @property
    def verdict(self) -> Verdict:
        if self.inconclusive_because is not None:
            return Verdict.INCONCLUSIVE
        if self.guarantee is Guarantee.EXACTLY_ONCE:
            return Verdict.CONSISTENT
        return Verdict.INCONSISTENT

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "verdict": str(self.verdict),
            "guarantee": str(self.guarantee),
            "inconclusive_because": self.inconclusive_because,
            "outputs": self.outputs,
            "reference_outputs": self.reference_outputs,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "divergent": self.divergent,
            "extra": self.extra,
            "unexpected": self.extra,  # the metrics store's column name
            "duplicates_dropped": self.duplicates_dropped,
            "agreement": self.agreement,
            "invariants": [r.to_dict() for r in self.invariants],
            "failures_not_fired": self.failures_not_fired,
            "examples": self.examples,
            "left_open": self.left_open,
        }


def consumer_view(raw: Iterable[SinkRecord], dedup: bool) -> list[Output]:
    """What a consumer sees: the first copy of each id (dedup reader) or every record."""
    seen: set[str] = set()
    outputs = []
    for record in raw:
        if dedup and record.id is not None:
            if record.id in seen:
                continue
            seen.add(record.id)
        outputs.append(Output.decode(record.id, record.key, record.value))
    return outputs


def judge(
    job: str,
    contract: ConsistencyContract,
    run_output: Iterable[SinkRecord],
    reference_output: Iterable[SinkRecord] | None,
    dedup: bool,
    inputs: InputView | None = None,
    failures_not_fired: int = 0,
    max_examples: int = 5,
) -> ConsistencyReport:
    """Judge ``run_output`` (every record of the sink topic, all copies) by the contract."""
    raw = list(run_output)
    # Step 1: copies of one id within the run.
    copies: dict[str, list[bytes]] = defaultdict(list)
    for record in raw:
        if record.id is not None:
            copies[record.id].append((record.key or b"") + b"\x00" + (record.value or b""))
    divergent_ids = [rid for rid, c in copies.items() if len(set(c)) > 1]
    same_id_copies = sum(len(c) - 1 for c in copies.values())
    seen = consumer_view(raw, dedup)
    examples: dict[str, list[str]] = {"divergent_ids": divergent_ids[:max_examples]}
    duplicated = 0 if dedup else same_id_copies
    if not dedup:
        examples["duplicated_ids"] = [r for r, c in copies.items() if len(c) > 1][:max_examples]

    # Step 2: the agreement against the reference run.
    view = contract.view
    lost = extra = None
    reference_count = None
    left_open: dict[str, int] = {}
    if reference_output is not None:
        reference = consumer_view(reference_output, dedup=True)  # read deduplicated
        reference_count = len(reference)
        compared = seen
        cutoff = _closed_by(contract, inputs)
        if cutoff is not None:
            compared, reference, left_open = _closed_windows(contract, cutoff, seen, reference)
        if view is not None:
            got, want = view.units(compared), view.units(reference)
            missing = want - got
            surplus = got - want
            lost = sum(missing.values())
            extra_items = [item for item in surplus if item not in want]
            extra = sum(surplus[item] for item in extra_items)
            duplicated = max(duplicated, sum(surplus.values()) - extra)
            examples["lost"] = [_show(item) for item in list(missing)[:max_examples]]
            examples["extra"] = [_show(item) for item in extra_items[:max_examples]]

    # Step 3: the invariants.
    results = [inv.check(seen, inputs) for inv in contract.invariants]
    return ConsistencyReport(
        query=job,
        outputs=len(seen),
        reference_outputs=reference_count,
        lost=lost,
        duplicated=duplicated,
        divergent=len(divergent_ids),
        extra=extra,
        duplicates_dropped=len(raw) - len(seen) if dedup else 0,
        agreement=view.describe() if view is not None else None,
        invariants=results,
        failures_not_fired=failures_not_fired,
        examples=examples,
        left_open=left_open,
    )


def _closed_by(contract: ConsistencyContract, inputs: InputView | None) -> int | None:
    if contract.closed_by is None or inputs is None:
        return None
    return contract.closed_by(inputs)


def _closed_windows(
    contract: ConsistencyContract, cutoff: int, run: list[Output], reference: list[Output]
) -> tuple[list[Output], list[Output], dict[str, int]]:
    """Both sides without the windows that end after ``cutoff`` (see ``closed_by``)."""
    end_of = contract.window_end
    assert end_of is not None  # the contract checks it

    def closed(out: Output) -> bool:
        try:
            return end_of(out.value) <= cutoff
        except (KeyError, TypeError, ValueError):
            return True  # not a window result: compared

    run_kept = [o for o in run if closed(o)]
    ref_kept = [o for o in reference if closed(o)]
    counts = {
        "closed_by_ms": cutoff,
        "run": len(run) - len(run_kept),
        "reference": len(reference) - len(ref_kept),
    }
    return run_kept, ref_kept, counts


def _show(item: Hashable) -> str:
    if isinstance(item, tuple) and len(item) == 2:
        return f"{item[0]}: {str(item[1])[:160]}"
    return str(item)[:160]
