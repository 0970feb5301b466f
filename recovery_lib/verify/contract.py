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

__all__ = [
    "Agreement",
    "ConsistencyContract",
    "EventTimes",
    "Exact",
    "Fields",
    "Flaw",
    "Invariant",
    "InvariantResult",
    "KeyTotals",
    "Output",
    "TimeSpan",
    "UniqueOutputs",
    "Windows",
    "invariant",
    "number_problem",
]


@dataclass(frozen=True)
class Output:
    """One output as a consumer sees it: what agreements and invariants read.

    Attributes:
        id: Its id (from lineage: a re-executed batch gives the same ids); None without one.
        key: Its Kafka key as text.
        value: Its value: the JSON object, or ``{"value": <text>}`` when it is not one.
        wrapped: Whether ``value`` wraps text that is not a JSON object.
    """

    id: str | None
    key: str | None
    value: dict[str, Any]
    wrapped: bool = False

    @classmethod
    def decode(cls, rid: str | None, key: bytes | None, value: bytes | None) -> Output:
        """The output of a sink record.

        Args:
            rid: The record's id header.
            key: The record's key.
            value: The record's value; JSON that is not an object, or no JSON, is wrapped.

        Returns:
            The output.
        """
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

    ``Exact``, ``Fields`` and ``KeyTotals`` are the ones there are; the oracle calls these
    methods on the run's and the reference run's outputs.
    """

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]:
        """The outputs' units.

        Args:
            outputs: A run's outputs as a consumer sees them, none of them malformed.

        Returns:
            Each unit with its multiplicity.
        """
        ...

    def malformed(self, output: Output) -> str | None:
        """Why ``output`` cannot come from any failure-free run (a count that is not a count).
        The oracle counts such outputs as inconsistent and leaves them out of ``units``.

        Args:
            output: One output.

        Returns:
            The reason, or None when the agreement can read the output.
        """
        ...

    @property
    def fields(self) -> tuple[str, ...] | None:
        """The value fields the units read (None: all of them)."""
        ...

    def describe(self) -> str:
        """What the agreement compares, in words, for reports.

        Returns:
            One line.
        """
        ...


def _frozen(value: Any) -> Hashable:
    return canonical(value)


@dataclass(frozen=True)
class Exact:
    """Deterministic jobs: every output, key and whole value."""

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]:
        """See ``Agreement.units``: one unit per output, its key and whole value.

        Args:
            outputs: A run's outputs.

        Returns:
            Each (key, value) with its multiplicity.
        """
        return Counter((o.key, _frozen(o.value)) for o in outputs)

    def malformed(self, output: Output) -> str | None:
        """See ``Agreement.malformed``: every output can be compared whole.

        Args:
            output: One output.

        Returns:
            None.
        """
        return None

    @property
    def fields(self) -> tuple[str, ...] | None:
        """None: the units read every field."""
        return None

    def describe(self) -> str:
        """See ``Agreement.describe``.

        Returns:
            One line.
        """
        return "every output (key and value)"


@dataclass(frozen=True)
class Fields:
    """Nondeterministic maps: each output's key and these value fields (the others, e.g. a
    random draw or a service's answer, are free).

    Args:
        names: The value fields every failure-free run agrees on; every output has them.
    """

    names: tuple[str, ...]

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]:
        """See ``Agreement.units``: one unit per output, its key and the named fields.

        Args:
            outputs: A run's outputs.

        Returns:
            Each (key, named fields) with its multiplicity.
        """
        return Counter((o.key, _frozen({n: o.value.get(n) for n in self.names})) for o in outputs)

    def malformed(self, output: Output) -> str | None:
        """See ``Agreement.malformed``.

        Args:
            output: One output.

        Returns:
            The named fields it lacks, or None.
        """
        missing = [n for n in self.names if n not in output.value]
        return f"no field {', '.join(missing)}" if missing else None

    @property
    def fields(self) -> tuple[str, ...] | None:
        """The named fields."""
        return self.names

    def describe(self) -> str:
        """See ``Agreement.describe``.

        Returns:
            One line.
        """
        return f"each output's key and fields {', '.join(self.names)}"


def number_problem(value: Any, integer: bool, nonnegative: bool) -> str | None:
    """Why ``value`` is not a finite number of the declared kind; for invariants that read
    counts.

    Args:
        value: A JSON value.
        integer: It must be an integer.
        nonnegative: It must not be negative.

    Returns:
        The reason, or None when it is such a number.
    """
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
    input.

    Args:
        keys: The key fields (one name or several).
        total: The numeric field summed or maximised.
        how: "sum" or "max".
        ignore: Values of the first key field that are not data (e.g. Q12's window ticks).
        integer: The total must be an integer; otherwise the output is malformed.
        nonnegative: The total must not be negative; otherwise the output is malformed.

    Raises:
        OracleError: No key field, or ``how`` is neither "sum" nor "max".
    """

    keys: tuple[str, ...] | str
    total: str
    how: str = "sum"
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
        """Whether ``output`` is not data (its first key field is in ``ignore``).

        Args:
            output: One output.

        Returns:
            True to leave it out.
        """
        try:
            return output.value.get(self.keys[0]) in self.ignore
        except TypeError:  # a list or an object where a key belongs: not ignored, malformed?
            return False

    def malformed(self, output: Output) -> str | None:
        """See ``Agreement.malformed``: a missing field, or a total that is not a finite
        number of the declared kind.

        Args:
            output: One output.

        Returns:
            The reason, or None.
        """
        if self.ignored(output):
            return None
        missing = [k for k in (*self.keys, self.total) if k not in output.value]
        if missing:
            return f"no field {', '.join(missing)}"
        problem = number_problem(output.value[self.total], self.integer, self.nonnegative)
        return f"{self.total}: {problem}" if problem else None

    def unit_key(self, output: Output) -> Hashable:
        """The (Kafka key, key fields) ``output`` counts towards.

        Args:
            output: One output.

        Returns:
            A hashable key.
        """
        return (output.key, _frozen([output.value.get(k) for k in self.keys]))

    def totals(self, outputs: Iterable[Output]) -> dict[Hashable, float]:
        """Per unit key, the sum or maximum of the total.

        Args:
            outputs: A run's outputs; malformed and ignored ones are left out.

        Returns:
            ``unit_key`` -> total.
        """
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
        """See ``Agreement.units``: an integer total is the multiplicity of its key; another
        total is one unit of (key, total).

        Args:
            outputs: A run's outputs.

        Returns:
            The units with their multiplicities.
        """
        units: Counter[Hashable] = Counter()
        for key, total in self.totals(outputs).items():
            if self.integer:
                units[key] = int(total)  # the total is the multiplicity of its key
            else:
                units[(key, round(total, 9))] = 1
        return +units

    @property
    def fields(self) -> tuple[str, ...] | None:
        """The key fields and the total."""
        return (*self.keys, self.total)

    def describe(self) -> str:
        """See ``Agreement.describe``.

        Returns:
            One line.
        """
        return f"per Kafka key and {', '.join(self.keys)}, the {self.how} of {self.total}"


@dataclass(frozen=True)
class TimeSpan:
    """The times a run's windows can hold: the input's event times, or the run's wall clock
    for processing-time windows.

    Args:
        first_ms: The earliest, in ms since the epoch.
        last_ms: The latest, in ms since the epoch.
    """

    first_ms: int
    last_ms: int


@dataclass(frozen=True)
class EventTimes:
    """The earliest and latest event time of the run's input: ``Windows.event_times``.
    Called with the run's ``InputView``; returns a ``TimeSpan``, or None when no record holds
    a time.

    Args:
        inputs: The job's inputs whose records hold event times.
        field: The JSON field holding a record's event time (ms).
    """

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
    """Where an output's window lies. A window holds times from its start to before its end;
    one that holds none of the times a run could put in windows was opened by no run: the
    output is malformed.

    Args:
        start: The value field holding the window's start (ms).
        end: The value field holding its end (ms), or None with ``size_ms``.
        size_ms: A fixed window size, or None with ``end``.
        clock: "event": windows hold the input's event times (by ``event_times``);
            "processing": the run's wall clock.
        event_times: For event-time windows: the input's event times (``EventTimes``).

    Raises:
        OracleError: An unknown ``clock``, or event-time windows without ``event_times``.
    """

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
        """An output's window as it holds it.

        Args:
            value: The output's value.

        Returns:
            (start, end); end None when there is neither an end field nor a size.
        """
        start = value.get(self.start)
        if self.end is not None:
            return start, value.get(self.end)
        if self.size_ms is not None and number_problem(start, True, False) is None:
            return start, start + self.size_ms
        return start, None

    def problem(self, value: dict[str, Any], span: TimeSpan) -> str | None:
        """Why the output's window holds none of ``span``.

        Args:
            value: The output's value.
            span: The times the run's windows can hold.

        Returns:
            The reason, or None when the window may hold some of them.
        """
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
    """Which change of the input would explain a violation (paper 004, definitions 7-8).

    Attributes:
        MISSING_INPUT: Input lost: at-most-once.
        DUPLICATED_INPUT: Input processed twice: at-least-once.
        INCONSISTENT: No failure-free run on any input.
    """

    MISSING_INPUT = "missing-input"  # at-most-once
    DUPLICATED_INPUT = "duplicated-input"  # at-least-once
    INCONSISTENT = "inconsistent"  # no failure-free run on any input


@dataclass
class InvariantResult:
    """What an invariant found in one run (``Invariant.check`` returns it).

    Attributes:
        name: The invariant's name.
        checked: False: the invariant needs what the oracle did not have (e.g. the input).
        violations: Violations counted by the flaw that explains them (``flag``).
        details: Anything the invariant wants in the report.
        examples: The first few violations, one line each.
        agreement_covers: Set by the oracle from the invariant (``Invariant.agreement_covers``).
    """

    name: str
    checked: bool
    violations: Counter[Flaw] = field(default_factory=Counter)
    details: dict[str, Any] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    agreement_covers: bool = True

    MAX_EXAMPLES = 5

    @property
    def ok(self) -> bool:
        """Checked and nothing violated."""
        return self.checked and not self.violations

    def flag(self, flaw: Flaw, example: str, count: int = 1) -> None:
        """Count violations; keep the first few examples.

        Args:
            flaw: The input flaw that explains them.
            example: One line shown in the report (kept while fewer than ``MAX_EXAMPLES``).
            count: How many violations.
        """
        self.violations[flaw] += count
        if len(self.examples) < self.MAX_EXAMPLES:
            self.examples.append(example)

    def to_dict(self) -> dict[str, Any]:
        """The result as the report's JSON holds it.

        Returns:
            A JSON-serialisable dict.
        """
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
    inconclusive.

    ``UniqueOutputs`` is one; ``invariant`` makes one from a function.

    Attributes:
        name: Shown in reports.
        agreement_covers: See above.
    """

    name: str
    agreement_covers: bool

    def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult:
        """Check one run.

        Args:
            outputs: The run's outputs as a consumer sees them.
            inputs: The run's input, or None when it is not at hand.

        Returns:
            What was found (``InvariantResult``).
        """
        ...


@dataclass(frozen=True)
class UniqueOutputs:
    """No two outputs of a failure-free run share these value fields (with the Kafka key), or
    the whole output when ``fields`` is empty: a second one is input processed twice (an
    output re-emitted under a new id). Needs no input, so it also judges a reference run.

    Args:
        fields: The value fields that identify an output (empty: the whole output).
        agreement_covers: See ``Invariant``.
    """

    fields: tuple[str, ...] = ()
    agreement_covers: bool = True

    @property
    def name(self) -> str:
        """``each output once (by ...)``."""
        what = ", ".join(self.fields) if self.fields else "key and value"
        return f"each output once (by {what})"

    def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult:
        """See ``Invariant.check``: each surplus copy is a duplicated-input violation.

        Args:
            outputs: The run's outputs.
            inputs: Not read.

        Returns:
            The result, always checked.
        """
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
    """What a job promises about its failure-free runs (see the module docstring and
    docs/jobs.md, "Declare its consistency contract").

    Args:
        deterministic: Failure-free runs on the same input give the same outputs; the
            default agreement is then ``Exact``. A nondeterministic job names its agreement.
        agreement: What every failure-free run shares (``Exact``, ``Fields``, ``KeyTotals``).
        invariants: Properties every failure-free run's outputs have (``UniqueOutputs``,
            ``invariant``).
        ordered: The job has an order-sensitive (non-commutative) operator; it must run with
            deterministic record order in the modes that re-execute batches
            (``recovery_lib.causal.ordered``).
        batch_deterministic: Nondeterministic only in where micro-batches end (a running
            aggregate in update mode): a re-executed batch, on the same input ranges,
            recomputes the same outputs, so a replay needs no causal log. Failure-free runs
            still differ: the agreement judges them.
        window_end: Event-time windowed outputs: an output value's window end (ms), so a
            comparison as of a snapshot can leave out windows the watermark has not closed.
        closed_by: With ``window_end``: the latest window end every run must have closed
            once its input is consumed (from the input's event times). Windows ending later
            close or not depending on the run's watermark rule (e.g. CEC's against Spark's):
            both sides leave them out.
        free: Value fields a failure-free run chooses freely (a random draw, a service's
            answer, a processing-time window). For readers and the mutation check
            (``recovery_lib.verify.mutation``).
        window: The value field naming an output's window.
        ordered_list: A value field holding an ordered list (a JSON array or comma-separated
            text).
        output_schema: The Spark type of the output values (``OutputSchema``): declared by a
            job that serializes its values itself; else the one the runtime recorded with
            the run (``with_schema``).
        windows: Where each output's window lies, checked against the times a run could
            window (``Windows``).

    Raises:
        OracleError: ``closed_by`` without ``window_end``; free fields with an ``Exact``
            agreement or also agreed on; a nondeterministic contract with neither an
            agreement nor invariants (the oracle could not tell a lost output from a
            different one).
    """

    deterministic: bool = True
    agreement: Agreement | None = None
    invariants: tuple[Invariant, ...] = ()
    ordered: bool = False
    batch_deterministic: bool = False
    window_end: Callable[[dict[str, Any]], int] | None = None
    closed_by: Callable[[InputView], int | None] | None = None
    free: tuple[str, ...] = ()
    window: str | None = None
    ordered_list: str | None = None
    output_schema: OutputSchema | None = None
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
        """The agreement the oracle judges by: ``agreement``, else ``Exact`` for a
        deterministic job (None: only the invariants judge)."""
        if self.agreement is not None:
            return self.agreement
        return Exact() if self.deterministic else None

    def with_schema(self, schema: OutputSchema | None) -> ConsistencyContract:
        """This contract judging with a run's recorded schema, unless it declares its own.

        Args:
            schema: The schema the runtime recorded with the run, or None.

        Returns:
            A copy with ``output_schema`` set, or this contract.
        """
        if schema is None or self.output_schema is not None:
            return self
        return dataclasses.replace(self, output_schema=schema)

    def window_span(self, inputs: InputView | None, clock: TimeSpan | None) -> TimeSpan | None:
        """The times a run's windows can hold.

        Args:
            inputs: The run's input, for event-time windows.
            clock: The run's wall-clock span, for processing-time windows; without it, up to
                now (no window opens in the future).

        Returns:
            The span, or None when it is not known (no ``windows``, or no input for
            event-time windows): the windows are then not placed.
        """
        if self.windows is None:
            return None
        if self.windows.clock == "processing":
            return clock or TimeSpan(0, int(time.time() * 1000))
        assert self.windows.event_times is not None  # Windows checks it
        return self.windows.event_times(inputs) if inputs is not None else None

    def malformed(self, output: Output, span: TimeSpan | None = None) -> str | None:
        """Why no failure-free run produces ``output`` on its own: it does not fit the output
        schema, its window holds none of ``span``, or the agreement cannot read it.

        Args:
            output: One output.
            span: The run's ``window_span``, or None not to place windows.

        Returns:
            The reason, or None when some failure-free run could produce it.
        """
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
        """Check every invariant on one run.

        Args:
            outputs: The run's outputs as a consumer sees them.
            inputs: The run's input, or None.

        Returns:
            Each invariant's result, marked with whether the agreement covers it (the oracle
            reads that when the invariant could not be checked).
        """
        results = []
        for inv in self.invariants:
            result = inv.check(outputs, inputs)
            result.agreement_covers = inv.agreement_covers
            results.append(result)
        return results

    def describe(self) -> dict[str, Any]:
        """The contract as reports show it.

        Returns:
            A JSON-serialisable dict: determinism, agreement, invariants, roles of fields.
        """
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
    """An invariant from a plain function.

    Args:
        name: Shown in reports.
        fn: ``fn(outputs, inputs)``, as ``Invariant.check``.
        agreement_covers: See ``Invariant``.

    Returns:
        The invariant.
    """

    @dataclass(frozen=True)
    class _FnInvariant:
        name: str
        agreement_covers: bool

        def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult:
            return fn(outputs, inputs)

    return _FnInvariant(name, agreement_covers)
