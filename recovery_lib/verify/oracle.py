"""Judge a (faulty) run's sink output by paper 004's delivery guarantees (definitions 6-8).

The judgement reads the job's consistency contract (contract.py) and nothing else about it:

1. **The run on its own.** Ids come from lineage, so a re-executed batch reuses them.
   ``divergent`` = ids whose copies differ as values: the run released two versions of one
   output, which no failure-free run does. What the consumer sees is the first copy of each id
   (``dedup`` sink) or every copy. ``malformed`` outputs are ones no run produces (e.g. a
   count that is not a count); the contract's **invariants** are checked, each violation
   tagged with the input flaw that explains it.
2. **The reference run is checked first**, as a run is; a reference that fails the checks is
   not failure-free, and nothing measured against it counts.
3. **The agreement, against the failure-free reference run** on the same input. Ids do not
   match across runs (batch boundaries differ); the agreement does. Units of the reference
   missing from the run are ``lost``; surplus units of known items ``duplicated``; items the
   reference never has ``extra`` (an output no failure-free run produces).

Guarantee: ``exactly-once`` when nothing is lost, duplicated, extra, malformed or divergent and
every invariant holds; ``at-most-once`` when only missing input explains the differences;
``at-least-once`` when only duplicated input does; ``none`` otherwise. A violation shown makes
the verdict ``inconsistent`` whatever else happened; with none, it is ``inconclusive`` when the
evidence is missing (a requested failure did not fire, the reference is not failure-free,
nothing was produced, or neither a reference run nor a checked invariant judges what the
contract promises) and ``consistent`` otherwise.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import pyarrow as pa

from recovery_lib.io.sinks.dedup_reader import SinkRecord, read_topic_batches
from recovery_lib.settings import Settings
from recovery_lib.verify.columnar import (
    ColumnarJudge,
    SideFacts,
    SpilledSide,
    ingest,
    record_batches,
    workspace,
)
from recovery_lib.verify.contract import (
    ConsistencyContract,
    Flaw,
    InvariantResult,
    Output,
    TimeSpan,
    divergent_ids,
)
from recovery_lib.verify.inputs import InputView

__all__ = [
    "ConsistencyReport",
    "Guarantee",
    "Verdict",
    "judge",
    "judge_topics",
]


class Guarantee(StrEnum):
    """The delivery guarantee a run kept (paper 004, definitions 6-8).

    Attributes:
        EXACTLY_ONCE: Nothing lost, duplicated, extra, malformed or divergent; every
            invariant holds.
        AT_LEAST_ONCE: Only duplicated input explains the differences.
        AT_MOST_ONCE: Only missing input explains them.
        NONE: Anything else.
    """

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"
    AT_MOST_ONCE = "at-most-once"
    NONE = "none"


class Verdict(StrEnum):
    """The oracle's answer about one run.

    Attributes:
        CONSISTENT: Nothing wrong shown, and the evidence is there.
        INCONSISTENT: A violation shown, whatever else happened.
        INCONCLUSIVE: Nothing wrong shown, but the evidence is missing
            (``ConsistencyReport.inconclusive_because`` says which).
    """

    CONSISTENT = "consistent"
    INCONSISTENT = "inconsistent"
    INCONCLUSIVE = "inconclusive"


@dataclass
class ConsistencyReport:
    """The oracle's judgement of one run (``judge``, ``judge_topics``); ``verdict`` and
    ``guarantee`` sum it up.

    Attributes:
        query: The job's name.
        outputs: Outputs the consumer saw (first copies only with dedup).
        reference_outputs: The reference run's outputs; None without a reference run.
        lost: Units of the agreement (outputs for ``Exact``/``Fields``, totals for
            ``KeyTotals``) the reference has and the run lacks; None without a reference.
        duplicated: Surplus units of items the reference has (or same-id copies a consumer
            sees, without a trusted reference).
        divergent: Ids whose copies differ as values: two versions of one output released.
        extra: Units of items the reference never has; None without a reference.
        duplicates_dropped: Same-id copies the dedup reader dropped.
        agreement: The agreement, in words.
        invariants: Each invariant's result on the run.
        failures_not_fired: Requested failures that did not fire (the run then shows
            nothing about recovery).
        examples: A few ids or units per kind of finding.
        left_open: Outputs of windows past the contract's ``closed_by``, left out on each
            side.
        copies: Same-id copies a consumer without dedup sees.
        malformed: Outputs no failure-free run can produce (e.g. a count that is text).
        reference_problems: Why the reference run is not failure-free (then nothing
            measured against it counts).
        output_schema: The output schema's fields the malformed count checked (None: none).
        window_span: The times the run's windows could hold (None: not checked).
    """

    query: str
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
    left_open: dict[str, int] = field(default_factory=dict)
    copies: int = 0
    malformed: int = 0
    reference_problems: list[str] = field(default_factory=list)
    output_schema: list[str] | None = None
    window_span: TimeSpan | None = None

    @property
    def reference_trusted(self) -> bool:
        """Whether there is a reference run and its own checks found nothing."""
        return self.reference_outputs is not None and not self.reference_problems

    @property
    def guarantee(self) -> Guarantee:
        """The delivery guarantee the run kept, from what was found."""
        flaws: Counter[Flaw] = Counter()
        for result in self.invariants:
            flaws.update(result.violations)
        trusted = self.reference_trusted
        extra = self.extra if trusted else 0
        duplicated = self.duplicated if trusted else self.copies
        lost = self.lost if trusted else 0
        if self.divergent or self.malformed or extra or flaws[Flaw.INCONSISTENT]:
            return Guarantee.NONE
        missing = bool(lost) or bool(flaws[Flaw.MISSING_INPUT])
        repeated = bool(duplicated) or bool(flaws[Flaw.DUPLICATED_INPUT])
        if missing and repeated:
            return Guarantee.NONE
        if missing:
            return Guarantee.AT_MOST_ONCE
        if repeated:
            return Guarantee.AT_LEAST_ONCE
        return Guarantee.EXACTLY_ONCE

    @property
    def inconclusive_because(self) -> str | None:
        """Why nothing wrong shown is not enough to say consistent (None: it is enough). A
        violation shown is never inconclusive."""
        if self.guarantee is not Guarantee.EXACTLY_ONCE:
            return None
        if self.reference_problems:
            return "the reference run is not failure-free: " + "; ".join(self.reference_problems)
        if self.failures_not_fired:
            return (
                f"{self.failures_not_fired} requested failure(s) did not fire: the run shows "
                "nothing about recovery"
            )
        if self.outputs == 0 and not self.reference_outputs:
            return "neither run produced an output: nothing was shown"
        unchecked = [r.name for r in self.invariants if not r.checked]
        if self.reference_outputs is None:
            if not any(r.checked for r in self.invariants):
                why = f" ({', '.join(unchecked)} need the input)" if unchecked else ""
                return f"no reference run and no invariant that could judge{why}"
            if unchecked:
                return f"no reference run and invariants not checked: {', '.join(unchecked)}"
            return None
        uncovered = [r.name for r in self.invariants if not r.checked and not r.agreement_covers]
        if uncovered:
            return (
                f"invariants not checked (they need the input, and the agreement does not show "
                f"what they check): {', '.join(uncovered)}"
            )
        return None

    @property
    def verdict(self) -> Verdict:
        """Inconsistent when the guarantee is not exactly-once; else inconclusive when
        ``inconclusive_because`` gives a reason; else consistent."""
        if self.guarantee is not Guarantee.EXACTLY_ONCE:
            return Verdict.INCONSISTENT
        if self.inconclusive_because is not None:
            return Verdict.INCONCLUSIVE
        return Verdict.CONSISTENT

    def to_dict(self) -> dict[str, Any]:
        """The report as the experiment's JSON and the metrics store hold it.

        Returns:
            A JSON-serialisable dict, with ``verdict`` and ``guarantee``.
        """
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
            "copies": self.copies,
            "malformed": self.malformed,
            "reference_problems": self.reference_problems,
            "duplicates_dropped": self.duplicates_dropped,
            "agreement": self.agreement,
            "invariants": [r.to_dict() for r in self.invariants],
            "failures_not_fired": self.failures_not_fired,
            "examples": self.examples,
            "left_open": self.left_open,
            "output_schema": self.output_schema,
            "window_span": dataclasses.asdict(self.window_span) if self.window_span else None,
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


def _malformed(
    contract: ConsistencyContract, outputs: Sequence[Output], span: TimeSpan | None = None
) -> list[str]:
    found = []
    for o in outputs:
        why = contract.malformed(o, span)
        if why is not None:
            found.append(f"{o.id}: {why}")
    return found


def check_reference(
    contract: ConsistencyContract,
    raw: Sequence[SinkRecord],
    reference: Sequence[Output],
    inputs: InputView | None,
    span: TimeSpan | None = None,
) -> list[str]:
    """Why the reference run is not failure-free (empty: nothing found). Checked as a run is:
    copies of one id that differ, outputs no run can produce, and the invariants."""
    divergent, _ = divergent_ids(raw)
    return reference_problems(
        divergent,
        _malformed(contract, reference, span),
        contract.check_invariants(reference, inputs),
    )


def reference_problems(
    divergent: Sequence[str], malformed: Sequence[str], invariants: Sequence[InvariantResult]
) -> list[str]:
    """What a reference run's own checks found, one line each (empty: failure-free)."""
    problems = []
    if divergent:
        problems.append(f"{len(divergent)} ids with differing copies (e.g. {divergent[0]})")
    if malformed:
        problems.append(f"{len(malformed)} malformed outputs (e.g. {malformed[0]})")
    for result in invariants:
        if result.violations:
            flaws = ", ".join(f"{n} {flaw}" for flaw, n in result.violations.items())
            problems.append(f"{result.name}: {flaws}")
    return problems


@dataclass(frozen=True)
class AgreementDiff:
    """The run's units against the reference's: ``lost`` (missing units), ``extra`` (items the
    reference never has), ``surplus`` (all surplus units, extra ones included)."""

    lost: int
    extra: int
    surplus: int
    examples: dict[str, list[str]]

    @classmethod
    def of(
        cls, got: Counter[Hashable], want: Counter[Hashable], max_examples: int
    ) -> AgreementDiff:
        missing = want - got
        over = got - want
        extra_items = [item for item in over if item not in want]
        return cls(
            lost=sum(missing.values()),
            extra=sum(over[item] for item in extra_items),
            surplus=sum(over.values()),
            examples={
                "lost": [_show(item) for item in list(missing)[:max_examples]],
                "extra": [_show(item) for item in extra_items[:max_examples]],
            },
        )

    @property
    def duplicated(self) -> int:
        """Surplus units of items the reference has: input processed twice."""
        return self.surplus - self.extra


def judge_objects(
    job: str,
    contract: ConsistencyContract,
    run_output: Iterable[SinkRecord],
    reference_output: Iterable[SinkRecord] | None,
    dedup: bool,
    inputs: InputView | None = None,
    failures_not_fired: int = 0,
    max_examples: int = 5,
    clock: TimeSpan | None = None,
    reference_clock: TimeSpan | None = None,
) -> ConsistencyReport:
    """The judgement as plain Python, one decoded output at a time: the definition the columnar
    engine (``judge``) is checked against, for runs small enough to hold as objects.
    ``clock``/``reference_clock``: each run's wall-clock span, where processing-time windows
    can lie (``ConsistencyContract.window_span``)."""
    raw = list(run_output)
    # Step 1: the run on its own: copies of one id, outputs no run produces, invariants.
    divergent, same_id_copies = divergent_ids(raw)
    seen = consumer_view(raw, dedup)
    copies = 0 if dedup else same_id_copies
    examples: dict[str, list[str]] = {"divergent_ids": divergent[:max_examples]}
    if not dedup:
        examples["duplicated_ids"] = _ids_with_copies(raw)[:max_examples]
    span, reference_span = _spans(contract, inputs, clock, reference_clock)
    malformed = _malformed(contract, seen, span)
    examples["malformed"] = malformed[:max_examples]
    results = contract.check_invariants(seen, inputs)

    # Step 2: the reference run, checked as a run first, then the agreement against it.
    view = contract.view
    lost = extra = None
    duplicated = copies
    reference_count = None
    left_open: dict[str, int] = {}
    problems: list[str] = []
    if reference_output is not None:
        reference_raw = list(reference_output)
        reference = consumer_view(reference_raw, dedup=True)  # read deduplicated
        reference_count = len(reference)
        problems = check_reference(contract, reference_raw, reference, inputs, reference_span)
        compared = seen
        cutoff = _closed_by(contract, inputs)
        if cutoff is not None:
            compared, reference, left_open = _closed_windows(contract, cutoff, seen, reference)
        if view is not None:
            diff = AgreementDiff.of(view.units(compared), view.units(reference), max_examples)
            lost, extra = diff.lost, diff.extra
            duplicated = max(duplicated, diff.duplicated)
            examples.update(diff.examples)

    return ConsistencyReport(
        query=job,
        outputs=len(seen),
        reference_outputs=reference_count,
        lost=lost,
        duplicated=duplicated,
        divergent=len(divergent),
        extra=extra,
        duplicates_dropped=len(raw) - len(seen) if dedup else 0,
        agreement=view.describe() if view is not None else None,
        invariants=results,
        failures_not_fired=failures_not_fired,
        examples=examples,
        left_open=left_open,
        copies=copies,
        malformed=len(malformed),
        reference_problems=problems,
        output_schema=_schema_fields(contract),
        window_span=span,
    )


def judge(
    job: str,
    contract: ConsistencyContract,
    run_output: Iterable[SinkRecord],
    reference_output: Iterable[SinkRecord] | None,
    dedup: bool,
    inputs: InputView | None = None,
    failures_not_fired: int = 0,
    max_examples: int = 5,
    clock: TimeSpan | None = None,
    reference_clock: TimeSpan | None = None,
) -> ConsistencyReport:
    """Judge a run's output, held in memory, by the job's contract (module docstring).

    The columnar engine (columnar.py) gives the same verdicts as ``judge_objects``, the
    definition in plain Python. For a topic of any size, ``judge_topics``.

    Args:
        job: The job's name, for the report.
        contract: The job's consistency contract (``JobSpec.contract``).
        run_output: Every record of the run's sink topic, all copies
            (``recovery_lib.io.sinks.modes.consumer_records``).
        reference_output: The same of a failure-free reference run on the same input, or
            None (then nothing is lost or extra, and a verdict needs invariants).
        dedup: The consumer reads through the dedup reader (first copy of an id;
            ``recovery_lib.io.sinks.modes.consumer_dedups``).
        inputs: The run's input, for invariants and event-time windows.
        failures_not_fired: Requested failures that did not fire; any makes a run with
            nothing wrong inconclusive.
        max_examples: Examples kept per kind of finding.
        clock: The run's wall-clock span, where processing-time windows can lie.
        reference_clock: The reference run's.

    Returns:
        The report; ``verdict`` and ``guarantee`` sum it up.
    """
    return judge_batches(
        job,
        contract,
        record_batches(run_output),
        record_batches(reference_output) if reference_output is not None else None,
        dedup,
        inputs,
        failures_not_fired,
        max_examples,
        clock,
        reference_clock,
    )


def judge_topics(
    job: str,
    contract: ConsistencyContract,
    run_topic: str,
    reference_topic: str | None,
    dedup: bool,
    inputs: InputView | None = None,
    failures_not_fired: int = 0,
    config: dict[str, str] | None = None,
    timings: dict[str, float] | None = None,
    clock: TimeSpan | None = None,
    reference_clock: TimeSpan | None = None,
    settings: Settings | None = None,
) -> ConsistencyReport:
    """Judge a run's sink topic against a reference run's, for millions of outputs.

    Each topic is read in Arrow batches (no object per output) while a DuckDB thread ingests
    the previous batch, into a DuckDB file and IPC files (bounded memory). One process reads
    both topics, one after the other: its reading thread and its DuckDB thread already keep
    both cores of this machine busy; a reader process per topic was measured slower (10^7
    outputs per side: 45-50 s instead of 40 s).

    Args:
        job: The job's name, for the report.
        contract: The job's consistency contract (``JobSpec.contract``).
        run_topic: The run's sink topic (every record, all copies).
        reference_topic: A failure-free reference run's sink topic, or None.
        dedup: The consumer reads through the dedup reader (``judge``).
        inputs: The run's input, for invariants and event-time windows.
        failures_not_fired: Requested failures that did not fire.
        config: Kafka client properties (default: the settings').
        timings: If given, receives ``read_s`` (reading both topics, the ingest overlapped)
            and ``judge_s`` (everything after).
        clock: The run's wall-clock span, where processing-time windows can lie.
        reference_clock: The reference run's.
        settings: The broker, its timeouts and the readers' switches (the environment's if
            None).

    Returns:
        The report, as ``judge`` gives it.
    """
    started = time.perf_counter()
    with workspace() as directory:
        engine = ColumnarJudge(contract, Path(directory), on_disk=True)
        try:
            run = engine.side("run")
            ingest(run, read_topic_batches(run_topic, config, settings=settings), threaded=True)
            reference = None
            if reference_topic is not None:
                reference = engine.side("reference")
                batches = read_topic_batches(reference_topic, config, settings=settings)
                ingest(reference, batches, threaded=True)
            read_s = time.perf_counter() - started
            report = _judge_sides(
                engine,
                job,
                run,
                reference,
                dedup,
                inputs,
                failures_not_fired,
                max_examples=5,
                spans=_spans(contract, inputs, clock, reference_clock),
            )
        finally:
            engine.close()
    if timings is not None:
        timings["read_s"] = read_s
        timings["judge_s"] = time.perf_counter() - started - read_s
    return report


def judge_batches(
    job: str,
    contract: ConsistencyContract,
    run_batches: Iterable[pa.RecordBatch],
    reference_batches: Iterable[pa.RecordBatch] | None,
    dedup: bool,
    inputs: InputView | None = None,
    failures_not_fired: int = 0,
    max_examples: int = 5,
    clock: TimeSpan | None = None,
    reference_clock: TimeSpan | None = None,
) -> ConsistencyReport:
    """The columnar judgement of two sides given as ``SINK_BATCH_SCHEMA`` batches in memory
    (for topics of any size, ``judge_topics``)."""
    with workspace() as directory:
        engine = ColumnarJudge(contract, Path(directory), on_disk=False)
        try:
            run = engine.side("run")
            ingest(run, run_batches, threaded=False)
            reference = None
            if reference_batches is not None:
                reference = engine.side("reference")
                ingest(reference, reference_batches, threaded=False)
            return _judge_sides(
                engine,
                job,
                run,
                reference,
                dedup,
                inputs,
                failures_not_fired,
                max_examples,
                _spans(contract, inputs, clock, reference_clock),
            )
        finally:
            engine.close()


def _judge_sides(
    engine: ColumnarJudge,
    job: str,
    run: SpilledSide,
    reference: SpilledSide | None,
    dedup: bool,
    inputs: InputView | None,
    failures_not_fired: int,
    max_examples: int,
    spans: tuple[TimeSpan | None, TimeSpan | None] = (None, None),
) -> ConsistencyReport:
    # Steps 1-4: the run on its own.
    facts = engine.facts(run, dedup, inputs, max_examples, spans[0])
    copies = 0 if dedup else facts.copies
    examples: dict[str, list[str]] = {
        "divergent_ids": facts.divergent[:max_examples],
        "malformed": facts.malformed[:max_examples],
    }
    if not dedup:
        examples["duplicated_ids"] = [
            rid.decode(errors="replace")
            for (rid,) in engine.con.execute(
                f"SELECT id FROM {run.name} WHERE id IS NOT NULL GROUP BY id "
                f"HAVING count(*) > 1 LIMIT {max_examples}"
            ).fetchall()
        ]
    view = engine.contract.view
    lost = extra = None
    duplicated = copies
    reference_count = None
    left_open: dict[str, int] = {}
    problems: list[str] = []
    if reference is not None:
        # Step 5: the reference run, checked as a run (read deduplicated).
        ref_facts = engine.facts(reference, True, inputs, max_examples, spans[1])
        reference_count = ref_facts.outputs
        problems = reference_problems(
            ref_facts.divergent, ref_facts.malformed, ref_facts.invariants
        )
        # Step 6: the agreement.
        excluded = None
        cutoff = _closed_by(engine.contract, inputs)
        if cutoff is not None:
            excluded, left_open = _open_windows(engine, cutoff, run, facts, reference, ref_facts)
        if view is not None:
            got, want = engine.compare(
                run, facts.seen_table, reference, ref_facts.seen_table, excluded
            )
            diff = AgreementDiff.of(got, want, max_examples)
            lost, extra = diff.lost, diff.extra
            duplicated = max(duplicated, diff.duplicated)
            examples.update(diff.examples)
    return ConsistencyReport(
        query=job,
        outputs=facts.outputs,
        reference_outputs=reference_count,
        lost=lost,
        duplicated=duplicated,
        divergent=len(facts.divergent),
        extra=extra,
        duplicates_dropped=facts.records - facts.outputs if dedup else 0,
        agreement=view.describe() if view is not None else None,
        invariants=facts.invariants,
        failures_not_fired=failures_not_fired,
        examples=examples,
        left_open=left_open,
        copies=copies,
        malformed=len(facts.malformed),
        reference_problems=problems,
        output_schema=_schema_fields(engine.contract),
        window_span=spans[0],
    )


def _schema_fields(contract: ConsistencyContract) -> list[str] | None:
    return list(contract.output_schema.names) if contract.output_schema is not None else None


def _spans(
    contract: ConsistencyContract,
    inputs: InputView | None,
    clock: TimeSpan | None,
    reference_clock: TimeSpan | None,
) -> tuple[TimeSpan | None, TimeSpan | None]:
    """Where each side's windows can lie (event times are the same for both)."""
    if contract.windows is None:
        return None, None
    run = contract.window_span(inputs, clock)
    if contract.windows.clock == "event":
        return run, run
    return run, contract.window_span(inputs, reference_clock)


def _open_windows(
    engine: ColumnarJudge,
    cutoff: int,
    run: SpilledSide,
    run_facts: SideFacts,
    reference: SpilledSide,
    ref_facts: SideFacts,
) -> tuple[tuple[set[int], set[int]], dict[str, int]]:
    """Positions of outputs whose window ends after ``cutoff``, per side (see ``closed_by``)."""
    end_of = engine.contract.window_end
    assert end_of is not None  # the contract checks it

    def open_positions(side: SpilledSide, seen: str) -> set[int]:
        keep = {s for (s,) in engine.con.execute(f"SELECT seq FROM {seen}").fetchall()}
        out = set()
        for seq, o in side.iter_outputs(keep.__contains__):
            try:
                if end_of(o.value) > cutoff:
                    out.add(seq)
            except (KeyError, TypeError, ValueError):
                pass  # not a window result: compared
        return out

    run_open = open_positions(run, run_facts.seen_table)
    ref_open = open_positions(reference, ref_facts.seen_table)
    counts = {"closed_by_ms": cutoff, "run": len(run_open), "reference": len(ref_open)}
    return (run_open, ref_open), counts


def _ids_with_copies(raw: Sequence[SinkRecord]) -> list[str]:
    counts = Counter(r.id for r in raw if r.id is not None)
    return [rid for rid, n in counts.items() if n > 1]


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
