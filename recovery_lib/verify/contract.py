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

import json
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from recovery_lib.verify.inputs import InputView


@dataclass(frozen=True)
class Output:
    """One output as a consumer sees it: its id (lineage), key and value (a JSON object when
    the value is one, else ``{"value": <text>}``)."""

    id: str | None
    key: str | None
    value: dict[str, Any]

    @classmethod
    def decode(cls, rid: str | None, key: bytes | None, value: bytes | None) -> Output:
        text = (value or b"").decode(errors="replace")
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            parsed = {"value": text}
        return cls(rid, key.decode(errors="replace") if key is not None else None, parsed)


class Agreement(Protocol):
    """A view of a run's outputs that every failure-free run on the same input shares, as a
    multiset of units: a missing unit is lost, a surplus unit of a known item is a duplicate,
    an item the reference never has is extra."""

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]: ...

    def describe(self) -> str: ...


def _frozen(value: Any) -> Hashable:
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class Exact:
    """Deterministic jobs: every output, key and whole value."""

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]:
        return Counter((o.key, _frozen(o.value)) for o in outputs)

    def describe(self) -> str:
        return "every output (key and value)"


@dataclass(frozen=True)
class Fields:
    """Nondeterministic maps: each output's key and these value fields (the others, e.g. a
    random draw or a service's answer, are free)."""

    names: tuple[str, ...]

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]:
        return Counter((o.key, _frozen({n: o.value.get(n) for n in self.names})) for o in outputs)

    def describe(self) -> str:
        return f"each output's key and fields {', '.join(self.names)}"


@dataclass(frozen=True)
class KeyTotals:
    """Per key, the sum (windows whose boundaries a run chooses) or maximum (running results
    whose emission points a run chooses) of a numeric field. Units are the total itself, so a
    key counted short is lost input and one counted over is duplicated input."""

    key: str
    total: str
    how: str = "sum"  # "sum" | "max"
    ignore: frozenset[Any] = frozenset()  # keys that are not data (e.g. Q12's window ticks)

    def __post_init__(self) -> None:
        if self.how not in ("sum", "max"):
            raise ValueError(f"KeyTotals.how must be 'sum' or 'max', got {self.how!r}")

    def units(self, outputs: Iterable[Output]) -> Counter[Hashable]:
        totals: Counter[Hashable] = Counter()
        for o in outputs:
            key = o.value.get(self.key)
            if key in self.ignore:
                continue
            amount = int(o.value.get(self.total) or 0)
            if self.how == "sum":
                totals[_frozen(key)] += amount
            else:
                totals[_frozen(key)] = max(totals[_frozen(key)], amount)
        return +totals

    def describe(self) -> str:
        return f"per {self.key}, the {self.how} of {self.total}"


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

    @property
    def ok(self) -> bool:
        return self.checked and not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "checked": self.checked,
            "ok": self.ok,
            "violations": {str(k): v for k, v in self.violations.items()},
            "details": self.details,
            "examples": self.examples,
        }


class Invariant(Protocol):
    """A property every failure-free run's outputs have. Called by the oracle once per judged
    run with the consumer's view of the outputs (in topic order, partition by partition) and
    the run's input, or None when the input is not at hand (return ``checked=False`` then if
    the input is needed). Raising means the invariant itself is broken, not the run."""

    name: str

    def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult: ...


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
    # Event-time windowed outputs: the window's end (ms) of an output value, so a comparison as
    # of a snapshot can leave out windows the job's watermark has not closed yet.
    window_end: Callable[[dict[str, Any]], int] | None = None
    # With ``window_end``: the latest window end every run must have closed once its input
    # is consumed (from the input's event times). Windows ending later close or not depending
    # on the run's watermark rule (e.g. CEC's against Spark's): both sides leave them out.
    closed_by: Callable[[InputView], int | None] | None = None

    def __post_init__(self) -> None:
        if self.closed_by is not None and self.window_end is None:
            raise ValueError("closed_by needs window_end: the end of an output's window")
        if not self.deterministic and self.agreement is None and not self.invariants:
            raise ValueError(
                "a nondeterministic job's contract needs an agreement (Fields, KeyTotals) or "
                "invariants: otherwise the oracle could not tell a lost output from a "
                "different one"
            )

    @property
    def replay_needs_causal(self) -> bool:
        """A re-executed batch recomputes what the first run produced only under causal
        logging (nondeterminism replayed, order-sensitive operators fed in a logged order)."""
        return not self.deterministic or self.ordered

    @property
    def view(self) -> Agreement | None:
        if self.agreement is not None:
            return self.agreement
        return Exact() if self.deterministic else None

    def describe(self) -> dict[str, Any]:
        view = self.view
        return {
            "deterministic": self.deterministic,
            "agreement": view.describe() if view is not None else None,
            "invariants": [inv.name for inv in self.invariants],
            "ordered": self.ordered,
        }


def invariant(
    name: str, fn: Callable[[Sequence[Output], InputView | None], InvariantResult]
) -> Invariant:
    """An invariant from a plain function (name + check)."""

    @dataclass(frozen=True)
    class _FnInvariant:
        name: str

        def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult:
            return fn(outputs, inputs)

    return _FnInvariant(name)
