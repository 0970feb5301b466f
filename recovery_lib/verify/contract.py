"""A job's consistency contract: what every failure-free run of the job agrees on.

Paper 004 (section III, definitions 5-8) calls an output correct if some failure-free run could
produce it. A job cannot hand the oracle "every failure-free run", so it declares what all of
them share:

* an **agreement**: a view of the outputs that is the same in every failure-free run on the
  same input (``Exact``: whole outputs, for deterministic jobs; ``Fields``: the value fields a
  nondeterministic map leaves alone; ``KeyTotals``: per key, the sum or maximum of a field,
  for windows cut by processing time or running results cut by batch boundaries);
* **invariants**: properties of the outputs (and the input) that every failure-free run
  satisfies, e.g. "each bid is counted once" or "each list is in an order some run produces".

The oracle (oracle.py) counts lost, extra and duplicated units of the agreement against a
reference run and classifies the run by which input flaw would explain it. Nothing else about
a job is read by the oracle.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from recovery_lib.errors import OracleError
from recovery_lib.verify.schema import OutputSchema

if TYPE_CHECKING:
    from recovery_lib.verify.inputs import InputView


@dataclass(frozen=True)
class Output:
    """One output as a consumer sees it: its id (lineage), key and value (a JSON object when
    the value is one, else ``{"value": <text>}``, and ``wrapped`` then says so)."""

    id: str | None
    key: str | None
    value: dict[str, Any]
    wrapped: bool = False

    @classmethod
    def decode(cls, rid: str | None, key: bytes | None, value: bytes | None) -> Output:
        text = (value or b"").decode(errors="replace")
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        wrapped = not isinstance(parsed, dict)
        if wrapped:
            parsed = {"value": text}
        return cls(rid, key.decode(errors="replace") if key is not None else None, parsed, wrapped)


def canonical(value: Any) -> str:
    """A JSON value's canonical text: two values are equal as JSON iff their texts are."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


class _Record(Protocol):
    """What ``divergent_ids`` reads of a sink record (io.sinks.dedup_reader.SinkRecord)."""

    @property
    def id(self) -> str | None: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


def _content(record: _Record) -> tuple[bytes | None, str]:
    """A copy's content compared as a value: JSON values by their canonical text."""
    text = (record.value or b"").decode(errors="replace")
    with contextlib.suppress(ValueError):
        text = canonical(json.loads(text))
    return record.key, text


def divergent_ids(raw: Iterable[_Record]) -> tuple[list[str], int]:
    """Ids whose copies differ as values, and the number of surplus same-id copies."""
    copies: dict[str, list[_Record]] = defaultdict(list)
    for record in raw:
        if record.id is not None:
            copies[record.id].append(record)
    divergent = []
    for rid, group in copies.items():
        differ = len(group) > 1 and len({(r.key, r.value) for r in group}) > 1
        if differ and len({_content(r) for r in group}) > 1:  # bytes differ: as values?
            divergent.append(rid)
    return divergent, sum(len(c) - 1 for c in copies.values())


class Agreement(Protocol):
    """A view of a run's outputs that every failure-free run on the same input shares, as a
    multiset of units: a missing unit is lost, a surplus unit of a known item is a duplicate,
    an item the reference never has is extra. Every unit holds the output's Kafka key.

    ``malformed`` names why an output cannot come from any failure-free run (a count that is
    not a count), or None; the oracle counts such outputs as inconsistent and leaves them out
    of ``units``. ``fields`` are the value fields the units read (None: all of them)."""

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]: ...

    def malformed(self, output: Output) -> str | None: ...

    @property
    def fields(self) -> tuple[str, ...] | None: ...

    def describe(self) -> str: ...


def _frozen(value: Any) -> Hashable:
    return canonical(value)


@dataclass(frozen=True)
class Exact:
    """Deterministic jobs: every output, key and whole value."""

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]:
        return Counter((o.key, _frozen(o.value)) for o in outputs)

    def malformed(self, output: Output) -> str | None:
        return None

    @property
    def fields(self) -> tuple[str, ...] | None:
        return None

    def describe(self) -> str:
        return "every output (key and value)"


@dataclass(frozen=True)
class Fields:
    """Nondeterministic maps: each output's key and these value fields (the others, e.g. a
    random draw or a service's answer, are free)."""

    names: tuple[str, ...]

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]:
        return Counter((o.key, _frozen({n: o.value.get(n) for n in self.names})) for o in outputs)

    def malformed(self, output: Output) -> str | None:
        missing = [n for n in self.names if n not in output.value]
        return f"no field {', '.join(missing)}" if missing else None

    @property
    def fields(self) -> tuple[str, ...] | None:
        return self.names

    def describe(self) -> str:
        return f"each output's key and fields {', '.join(self.names)}"


def number_problem(value: Any, integer: bool, nonnegative: bool) -> str | None:
    """Why ``value`` is not a finite number of the declared kind (None: it is one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r} is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not finite"
    if integer and not isinstance(value, int):
        return f"{value!r} is not an integer"
    if nonnegative and value < 0:
        return f"{value!r} is negative"
    return None


@dataclass(frozen=True)
class KeyTotals:
    """Per (Kafka key, key fields), the sum (windows whose boundaries a run chooses) or maximum
    (running results whose emission points a run chooses) of a numeric field. Units are the
    total itself, so a key counted short is lost input and one counted over is duplicated
    input. A total that is not a finite number of the declared kind (``integer``), or is
    negative where it cannot be (``nonnegative``), is malformed. ``ignore``: values of the
    first key field that are not data (e.g. Q12's window ticks)."""

    keys: tuple[str, ...] | str
    total: str
    how: str = "sum"  # "sum" | "max"
    ignore: frozenset[Any] = frozenset()
    integer: bool = True
    nonnegative: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.keys, str):
            object.__setattr__(self, "keys", (self.keys,))
        if not self.keys:
            raise OracleError("KeyTotals needs at least one key field")
        if self.how not in ("sum", "max"):
            raise OracleError(f"KeyTotals.how must be 'sum' or 'max', got {self.how!r}")

    def ignored(self, output: Output) -> bool:
        try:
            return output.value.get(self.keys[0]) in self.ignore
        except TypeError:  # a list or an object where a key belongs: not ignored, malformed?
            return False

    def malformed(self, output: Output) -> str | None:
        if self.ignored(output):
            return None
        missing = [k for k in (*self.keys, self.total) if k not in output.value]
        if missing:
            return f"no field {', '.join(missing)}"
        problem = number_problem(output.value[self.total], self.integer, self.nonnegative)
        return f"{self.total}: {problem}" if problem else None

    def unit_key(self, output: Output) -> Hashable:
        return (output.key, _frozen([output.value.get(k) for k in self.keys]))

    def totals(self, outputs: Iterable[Output]) -> dict[Hashable, float]:
        """Per unit key, the sum or maximum of the total (malformed and ignored outputs left
        out)."""
        totals: dict[Hashable, float] = {}
        for o in outputs:
            if self.ignored(o) or self.malformed(o) is not None:
                continue
            key, amount = self.unit_key(o), o.value[self.total]
            if self.how == "sum":
                totals[key] = totals.get(key, 0) + amount
            else:
                totals[key] = max(totals.get(key, amount), amount)
        return totals

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]:
        units: Counter[Hashable] = Counter()
        for key, total in self.totals(outputs).items():
            if self.integer:
                units[key] = int(total)  # the total is the multiplicity of its key
            else:
                units[(key, round(total, 9))] = 1
        return +units

    @property
    def fields(self) -> tuple[str, ...] | None:
        return (*self.keys, self.total)

    def describe(self) -> str:
        return f"per Kafka key and {', '.join(self.keys)}, the {self.how} of {self.total}"


@dataclass(frozen=True)
class TimeSpan:
    """From ``first_ms`` to ``last_ms``: the times a run's windows can hold (the input's event
    times, or the run's wall clock for processing-time windows)."""

    first_ms: int
    last_ms: int


@dataclass(frozen=True)
class EventTimes:
    """The earliest and latest event time (field ``field``, ms) of the run's ``inputs`` that
    can be read (None: none can)."""

    inputs: tuple[str, ...]
    field: str

    def __call__(self, inputs: InputView) -> TimeSpan | None:
        times = [
            value[self.field]
            for name in self.inputs
            if inputs.has(name)
            for _record, value in inputs.decoded(name)
            if isinstance(value, dict)
            and number_problem(value.get(self.field), True, False) is None
        ]
        return TimeSpan(min(times), max(times)) if times else None


@dataclass(frozen=True)
class Windows:
    """Where an output's window lies: field ``start`` (ms), and field ``end`` or a fixed
    ``size_ms``. A window holds times from its start to before its end; one that holds none
    of the times a run could put in windows (``clock`` "event": the input's event times, by
    ``event_times``; "processing": the run's wall clock) was opened by no run: the output is
    malformed."""

    start: str
    end: str | None = None
    size_ms: int | None = None
    clock: str = "event"
    event_times: Callable[[InputView], TimeSpan | None] | None = None

    def __post_init__(self) -> None:
        if self.clock not in ("event", "processing"):
            raise OracleError(f"Windows.clock is 'event' or 'processing', not {self.clock!r}")
        if self.clock == "event" and self.event_times is None:
            raise OracleError("event-time Windows need event_times: the input's event times")

    def bounds(self, value: dict[str, Any]) -> tuple[Any, Any]:
        """(start, end) as the output holds them (end None: neither an end field nor a size)."""
        start = value.get(self.start)
        if self.end is not None:
            return start, value.get(self.end)
        if self.size_ms is not None and number_problem(start, True, False) is None:
            return start, start + self.size_ms
        return start, None

    def problem(self, value: dict[str, Any], span: TimeSpan) -> str | None:
        """Why the output's window holds none of ``span`` (None: it may hold some)."""
        start, end = self.bounds(value)
        for name, bound in ((self.start, start), (self.end, end)):
            if bound is not None and number_problem(bound, True, False) is not None:
                return f"window {name}: {bound!r} is not a time in ms"
        if start is None:
            return f"no window field {self.start}"
        if end is not None and end <= start:
            return f"window [{start}, {end}) is empty"
        if start > span.last_ms:
            return f"window starts at {start}, after the last {self.clock} time {span.last_ms}"
        if end is not None and end <= span.first_ms:
            return f"window ends at {end}, before the first {self.clock} time {span.first_ms}"
        return None


class Flaw(StrEnum):
    """Which change of the input would explain a violation (paper 004, definitions 7-8)."""

    MISSING_INPUT = "missing-input"  # at-most-once
    DUPLICATED_INPUT = "duplicated-input"  # at-least-once
    INCONSISTENT = "inconsistent"  # no failure-free run on any input


@dataclass
class InvariantResult:
    name: str
    checked: bool  # False: the invariant needs what the oracle did not have (e.g. the input)
    violations: Counter[Flaw] = field(default_factory=Counter)
    details: dict[str, Any] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    # Set by the oracle from the invariant (see ``Invariant.agreement_covers``).
    agreement_covers: bool = True

    MAX_EXAMPLES = 5

    @property
    def ok(self) -> bool:
        return self.checked and not self.violations

    def flag(self, flaw: Flaw, example: str, count: int = 1) -> None:
        """Count ``count`` violations explained by ``flaw``; keep the first few examples."""
        self.violations[flaw] += count
        if len(self.examples) < self.MAX_EXAMPLES:
            self.examples.append(example)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "checked": self.checked,
            "ok": self.ok,
            "agreement_covers": self.agreement_covers,
            "violations": {str(k): v for k, v in self.violations.items()},
            "details": self.details,
            "examples": self.examples,
        }


class Invariant(Protocol):
    """A property every failure-free run's outputs have. Called by the oracle once per judged
    run (and once on the reference run) with the consumer's view of the outputs (in topic
    order, partition by partition) and the run's input, or None when the input is not at hand
    (return ``checked=False`` then if the input is needed; violations found without it still
    count). Raising means the invariant itself is broken, not the run.

    ``agreement_covers``: when the invariant cannot be checked, the contract's agreement
    against a reference run shows what it would (e.g. "each bid counted once" against per-key
    totals); False means nothing else judges what it checks, and the verdict is then
    inconclusive."""

    name: str
    agreement_covers: bool

    def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult: ...


@dataclass(frozen=True)
class UniqueOutputs:
    """No two outputs of a failure-free run share these value fields (with the Kafka key), or
    the whole output when ``fields`` is empty: a second one is input processed twice (an
    output re-emitted under a new id). Needs no input, so it also judges a reference run."""

    fields: tuple[str, ...] = ()
    agreement_covers: bool = True

    @property
    def name(self) -> str:
        what = ", ".join(self.fields) if self.fields else "key and value"
        return f"each output once (by {what})"

    def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult:
        seen: Counter[Hashable] = Counter()
        for o in outputs:
            if self.fields:
                seen[(o.key, _frozen([o.value.get(f) for f in self.fields]))] += 1
            else:
                seen[(o.key, _frozen(o.value))] += 1
        twice = {item: n - 1 for item, n in seen.items() if n > 1}
        violations: Counter[Flaw] = Counter()
        if twice:
            violations[Flaw.DUPLICATED_INPUT] = sum(twice.values())
        return InvariantResult(
            self.name,
            checked=True,
            violations=violations,
            examples=[
                f"{item[1][:120]} output {n + 1} times" for item, n in list(twice.items())[:5]
            ],
        )


@dataclass(frozen=True)
class ConsistencyContract:
    """What a job promises about its failure-free runs (see the module docstring).

    ``deterministic``: failure-free runs on the same input give the same outputs; the default
    agreement is then ``Exact``. A nondeterministic job names its agreement. ``ordered``: the
    job has an order-sensitive (non-commutative) operator; it must run with deterministic
    record order in the modes that re-execute batches (causal.order)."""

    deterministic: bool = True
    agreement: Agreement | None = None
    invariants: tuple[Invariant, ...] = ()
    ordered: bool = False
    # Nondeterministic only in where micro-batches end (a running aggregate in update mode):
    # a re-executed batch, on the same input ranges, recomputes the same outputs, so a replay
    # needs no causal log. Failure-free runs still differ: the agreement judges them.
    batch_deterministic: bool = False
    # Event-time windowed outputs: the window's end (ms) of an output value, so a comparison as
    # of a snapshot can leave out windows the job's watermark has not closed yet.
    window_end: Callable[[dict[str, Any]], int] | None = None
    # With ``window_end``: the latest window end every run must have closed once its input
    # is consumed (from the input's event times). Windows ending later close or not depending
    # on the run's watermark rule (e.g. CEC's against Spark's): both sides leave them out.
    closed_by: Callable[[InputView], int | None] | None = None
    # Roles of value fields, for readers and for the mutation check (verify/mutation.py):
    # fields a failure-free run chooses freely (a random draw, a service's answer, a
    # processing-time window), the field naming an output's window, and a field holding an
    # ordered list (a JSON array or comma-separated text).
    free: tuple[str, ...] = ()
    window: str | None = None
    ordered_list: str | None = None
    # The Spark type of the output values (verify/schema.py): declared by a job that serializes
    # its values itself; else the one the runtime recorded with the run (``with_schema``).
    output_schema: OutputSchema | None = None
    # Where each output's window lies, checked against the times a run could window.
    windows: Windows | None = None

    def __post_init__(self) -> None:
        if self.closed_by is not None and self.window_end is None:
            raise OracleError("closed_by needs window_end: the end of an output's window")
        judged = self.view.fields if self.view is not None else ()
        if self.free and judged is None:
            raise OracleError(
                f"free fields {', '.join(self.free)}: an Exact agreement compares every field; "
                "name the agreed fields with Fields(...) instead"
            )
        clash = set(self.free) & set(judged or ())
        if clash:
            raise OracleError(
                f"fields {', '.join(sorted(clash))} are both free and agreed on; keep each in one"
            )
        if not self.deterministic and self.agreement is None and not self.invariants:
            raise OracleError(
                "a nondeterministic job's contract needs an agreement (Fields, KeyTotals) or "
                "invariants: otherwise the oracle could not tell a lost output from a "
                "different one"
            )

    @property
    def replay_needs_causal(self) -> bool:
        """A re-executed batch recomputes what the first run produced only under causal
        logging (nondeterminism replayed, order-sensitive operators fed in a logged order)."""
        return not (self.deterministic or self.batch_deterministic) or self.ordered

    @property
    def view(self) -> Agreement | None:
        if self.agreement is not None:
            return self.agreement
        return Exact() if self.deterministic else None

    def with_schema(self, schema: OutputSchema | None) -> ConsistencyContract:
        """This contract judging with ``schema`` (a run's recorded one), unless it declares
        its own."""
        if schema is None or self.output_schema is not None:
            return self
        return dataclasses.replace(self, output_schema=schema)

    def window_span(self, inputs: InputView | None, clock: TimeSpan | None) -> TimeSpan | None:
        """The times a run's windows can hold: the input's event times, or the run's wall
        clock (``clock``; without it, up to now: no window opens in the future). None: not
        known, the windows are not placed."""
        if self.windows is None:
            return None
        if self.windows.clock == "processing":
            return clock or TimeSpan(0, int(time.time() * 1000))
        assert self.windows.event_times is not None  # Windows checks it
        return self.windows.event_times(inputs) if inputs is not None else None

    def malformed(self, output: Output, span: TimeSpan | None = None) -> str | None:
        """Why no failure-free run produces ``output`` on its own (None: some could): it does
        not fit the output schema, its window holds none of ``span`` (``window_span``), or
        the agreement cannot read it."""
        if self.output_schema is not None:
            if output.wrapped:
                return "the value is not a JSON object"
            problem = self.output_schema.problem(output.value)
            if problem is not None:
                return problem
        if self.windows is not None and span is not None:
            problem = self.windows.problem(output.value, span)
            if problem is not None:
                return problem
        view = self.view
        return view.malformed(output) if view is not None else None

    def check_invariants(
        self, outputs: Sequence[Output], inputs: InputView | None
    ) -> list[InvariantResult]:
        """Every invariant's result on ``outputs``, each marked with whether the agreement
        covers it (the oracle reads that when the invariant could not be checked)."""
        results = []
        for inv in self.invariants:
            result = inv.check(outputs, inputs)
            result.agreement_covers = inv.agreement_covers
            results.append(result)
        return results

    def describe(self) -> dict[str, Any]:
        view = self.view
        return {
            "deterministic": self.deterministic,
            "agreement": view.describe() if view is not None else None,
            "invariants": [inv.name for inv in self.invariants],
            "ordered": self.ordered,
            "batch_deterministic": self.batch_deterministic,
            "free": list(self.free),
            "output_schema": list(self.output_schema.names) if self.output_schema else None,
        }


def invariant(
    name: str,
    fn: Callable[[Sequence[Output], InputView | None], InvariantResult],
    agreement_covers: bool = False,
) -> Invariant:
    """An invariant from a plain function (name + check)."""

    @dataclass(frozen=True)
    class _FnInvariant:
        name: str
        agreement_covers: bool

        def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult:
            return fn(outputs, inputs)

    return _FnInvariant(name, agreement_covers)
