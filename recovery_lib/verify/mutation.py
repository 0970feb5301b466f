"""How strong is a job's contract? Mutation testing of the oracle on the job's own output.

A reference output (a failure-free run) is changed by every mutation operator that applies to
the job's contract, and the oracle judges each mutant against the unchanged reference:

* a **mutant** is an output no failure-free run produces (a dropped output, one re-emitted
  under a new id, a count that is not a count, a list out of order, ...): the contract must
  catch it (verdict ``inconsistent``);
* a **control** is an output some failure-free run could produce (a free field changed, a
  same-id copy the dedup reader drops, JSON keys in another order, a running result skipped):
  the contract must let it pass (verdict ``consistent``), else it rejects correct runs.

Which operators apply, and whether each change is a mutant or a control, follows from the
contract's declarations (agreement, ``free``, ``window``, ``ordered_list``). A contract that
misses a mutant is named with the operators it misses (``MutationReport.missed``).
"""

from __future__ import annotations

import json
import logging
import random
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.verify.contract import ConsistencyContract, KeyTotals, Output, TimeSpan
from recovery_lib.verify.inputs import InputView
from recovery_lib.verify.oracle import Verdict, consumer_view, judge

log = logging.getLogger(__name__)


class Expect(StrEnum):
    CAUGHT = "caught"  # a mutant: no failure-free run produces it
    PASSES = "passes"  # a control: some failure-free run could produce it


@dataclass(frozen=True)
class Mutant:
    """One changed output of the reference run, and what the contract must say of it."""

    operator: str
    expect: Expect
    records: tuple[SinkRecord, ...]
    what: str


@dataclass
class OperatorResult:
    """One operator's mutants on one job: how many the contract judged as it must."""

    operator: str
    applies: bool
    why_not: str = ""
    mutants: int = 0
    caught: int = 0  # mutants judged inconsistent
    controls: int = 0
    passed: int = 0  # controls judged consistent
    misjudged: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "applies": self.applies,
            "why_not": self.why_not,
            "mutants": self.mutants,
            "caught": self.caught,
            "controls": self.controls,
            "passed": self.passed,
            "misjudged": self.misjudged,
        }


@dataclass
class MutationReport:
    job: str
    outputs: int
    dedup: bool
    with_input: bool
    operators: list[OperatorResult]

    @property
    def mutants(self) -> int:
        return sum(r.mutants for r in self.operators)

    @property
    def caught(self) -> int:
        return sum(r.caught for r in self.operators)

    @property
    def score(self) -> float | None:
        """Caught mutants / mutants (None: no operator made a mutant)."""
        return self.caught / self.mutants if self.mutants else None

    @property
    def false_rejections(self) -> int:
        return sum(r.controls - r.passed for r in self.operators)

    @property
    def missed(self) -> list[str]:
        """Operators with a mutant the contract let pass: where the contract is weak."""
        return [r.operator for r in self.operators if r.caught < r.mutants]

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "outputs": self.outputs,
            "dedup": self.dedup,
            "with_input": self.with_input,
            "score": self.score,
            "mutants": self.mutants,
            "caught": self.caught,
            "false_rejections": self.false_rejections,
            "missed": self.missed,
            "operators": [r.to_dict() for r in self.operators],
        }


# -- the reference as the operators see it ---------------------------------------------------


@dataclass
class Target:
    """The reference run the operators change: every record (all copies) and the consumer's
    view of it, with the contract's roles of the fields."""

    records: list[SinkRecord]
    outputs: list[Output]  # deduplicated, aligned with ``unique``
    unique: list[SinkRecord]  # the first copy of each id
    contract: ConsistencyContract
    dedup: bool
    rng: random.Random

    @classmethod
    def of(
        cls, records: Sequence[SinkRecord], contract: ConsistencyContract, dedup: bool, seed: int
    ) -> Target:
        seen: set[str | None] = set()
        unique = []
        for r in records:
            if r.id is None or r.id not in seen:
                seen.add(r.id)
                unique.append(r)
        outputs = consumer_view(unique, dedup=False)
        return cls(list(records), outputs, unique, contract, dedup, random.Random(seed))

    @property
    def running(self) -> KeyTotals | None:
        """The agreement when outputs are running results (maximum per key), else None."""
        view = self.contract.view
        return view if isinstance(view, KeyTotals) and view.how == "max" else None

    def key_of(self, i: int) -> Any:
        view = self.contract.view
        o = self.outputs[i]
        if isinstance(view, KeyTotals):
            return view.unit_key(o)
        return o.key

    def last_per_key(self) -> list[int]:
        last: dict[Any, int] = {}
        for i in range(len(self.outputs)):
            last[self.key_of(i)] = i
        return sorted(last.values())

    def data(self) -> list[int]:
        """Outputs that are data (not ignored keys such as Q12's ticks)."""
        view = self.contract.view
        if isinstance(view, KeyTotals):
            return [i for i, o in enumerate(self.outputs) if not view.ignored(o)]
        return list(range(len(self.outputs)))

    def pick(self, candidates: Sequence[int], k: int = 2) -> list[int]:
        return sorted(self.rng.sample(list(candidates), min(k, len(candidates))))

    def with_value(self, i: int, value: dict[str, Any], **changes: Any) -> SinkRecord:
        return replace(self.unique[i], value=json.dumps(value).encode(), **changes)

    def replaced(self, i: int, record: SinkRecord | None) -> tuple[SinkRecord, ...]:
        """The reference's records with output ``i`` (every copy of its id) replaced by
        ``record``, or removed."""
        return self.replaced_many({i: record})

    def replaced_many(self, changes: dict[int, SinkRecord | None]) -> tuple[SinkRecord, ...]:
        by_id = {self.unique[i].id: rec for i, rec in changes.items() if self.unique[i].id}
        victims = {id(self.unique[i]): rec for i, rec in changes.items()}
        out = []
        for r in self.records:
            if id(r) in victims or (r.id is not None and r.id in by_id):
                new = victims.get(id(r), by_id.get(r.id))
                if new is not None:
                    out.append(new)
                continue
            out.append(r)
        return tuple(out)

    def added(self, record: SinkRecord) -> tuple[SinkRecord, ...]:
        return (*self.records, record)


def _changed(value: Any, salt: int) -> Any:
    """Another value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 + salt
    if isinstance(value, float):
        return value + 1.5 + salt
    if isinstance(value, str):
        return f"{value}~{salt}"
    if isinstance(value, list):
        return [*value, salt]
    if value is None:
        return salt + 1
    return {"changed": salt}


def _list_of(value: Any) -> tuple[list[Any], Callable[[list[Any]], Any]] | None:
    """A list field's items and how to write items back (JSON array or comma-separated)."""
    if isinstance(value, list):
        return list(value), list
    if isinstance(value, str):
        return [a for a in value.split(",") if a], ",".join
    return None


# -- the operators -----------------------------------------------------------------------------

Operator = Callable[[Target], Iterator[Mutant]]
NotApplicable = str  # why an operator does not apply to a contract


def drop(t: Target) -> Iterator[Mutant]:
    """Lose an output. For running results only a key's last output is every run's; skipping
    an earlier one is what another batching does (a control)."""
    if t.contract.view is None:
        return
    if t.running is None:
        for i in t.pick(t.data()):
            yield Mutant("drop", Expect.CAUGHT, t.replaced(i, None), f"output {t.unique[i].id}")
        return
    last = t.last_per_key()
    for i in t.pick([i for i in last if i in set(t.data())]):
        yield Mutant(
            "drop", Expect.CAUGHT, t.replaced(i, None), f"last of its key {t.unique[i].id}"
        )
    earlier = sorted(set(t.data()) - set(last))
    for i in t.pick(earlier, 1):
        yield Mutant("drop", Expect.PASSES, t.replaced(i, None), f"earlier {t.unique[i].id}")


def duplicate_same_id(t: Target) -> Iterator[Mutant]:
    """A replayed write: the same id and content again. The dedup reader drops it (a control);
    a consumer without dedup sees input twice."""
    expect = Expect.PASSES if t.dedup else Expect.CAUGHT
    for i in t.pick(range(len(t.unique))):
        yield Mutant("duplicate-same-id", expect, t.added(t.unique[i]), f"copy of {t.unique[i].id}")


def reemit_new_id(t: Target) -> Iterator[Mutant]:
    """An output emitted again under a new id: input processed twice."""
    for n, i in enumerate(t.pick(t.data())):
        copy = replace(t.unique[i], id=f"mutant-{n}", offset=10**9 + n)
        yield Mutant("reemit-new-id", Expect.CAUGHT, t.added(copy), f"{t.unique[i].id} again")


def change_agreed_field(t: Target) -> Iterator[Mutant]:
    """A field every failure-free run agrees on, changed (a running result's last value)."""
    view = t.contract.view
    if view is None:
        return
    victims = t.last_per_key() if t.running is not None else t.pick(t.data(), 3)
    victims = [i for i in victims if i in set(t.data())]
    for n, i in enumerate(t.pick(victims, 3)):
        value = dict(t.outputs[i].value)
        names = view.fields if view.fields is not None else tuple(value)
        name = names[n % len(names)]
        value[name] = _changed(value.get(name), n)
        yield Mutant(
            "change-agreed-field", Expect.CAUGHT, t.replaced(i, t.with_value(i, value)), name
        )


def change_free_field(t: Target) -> Iterator[Mutant]:
    """A field a failure-free run chooses (a random draw, a processing-time window), changed
    to a value no other output of the key holds: a control."""
    for n, i in enumerate(t.pick(t.data())):
        value = dict(t.outputs[i].value)
        for name in t.contract.free:
            if name in value:
                value[name] = _fresh(t, name, value[name], n, t.outputs[i].key)
        yield Mutant(
            "change-free-field",
            Expect.PASSES,
            t.replaced(i, t.with_value(i, value)),
            ", ".join(t.contract.free),
        )


def _fresh(t: Target, name: str, value: Any, salt: int, key: Any = None) -> Any:
    """A value of field ``name`` no output holds; for the window field, a window other keys
    use and ``key`` does not (one the run opened: out of it would be a window no run opens)."""
    if name == t.contract.window:
        mine = {json.dumps(o.value.get(name)) for o in t.outputs if o.key == key}
        others = sorted({json.dumps(o.value[name]) for o in t.outputs if name in o.value} - mine)
        if others:
            return json.loads(others[salt % len(others)])
    used = {json.dumps(o.value.get(name)) for o in t.outputs}
    candidate = _changed(value, salt)
    step = 0
    while json.dumps(candidate) in used:
        step += 1
        candidate = _changed(value, salt + 1000 * step)
    if isinstance(value, int) and not isinstance(value, bool):
        numbers = [o.value.get(name) for o in t.outputs if isinstance(o.value.get(name), int)]
        candidate = max(numbers, default=value) + 1_000_003 + salt  # beyond every window
    return candidate


def move_key(t: Target) -> Iterator[Mutant]:
    """An output written under another output's Kafka key."""
    if t.contract.view is None:
        return
    keys = sorted({o.key for o in t.outputs if o.key is not None})
    if len(keys) < 2:
        return
    for i in t.pick(t.data()):
        other = next(k for k in keys if k != t.outputs[i].key)
        record = replace(t.unique[i], key=other.encode())
        yield Mutant("move-key", Expect.CAUGHT, t.replaced(i, record), f"to key {other}")


def corrupt_count(t: Target) -> Iterator[Mutant]:
    """A count or sum that is negative, fractional, text or not a number."""
    view = t.contract.view
    if not isinstance(view, KeyTotals):
        return
    victims = t.pick(t.data(), 4)
    for n, (how, bad) in enumerate(
        (
            ("negative", lambda v: -abs(v) - 1),
            ("fractional", lambda v: v + 0.5),
            ("text", str),
            ("NaN", lambda v: float("nan")),
        )
    ):
        if not victims:
            return
        i = victims[n % len(victims)]
        value = dict(t.outputs[i].value)
        value[view.total] = bad(value[view.total])
        yield Mutant("corrupt-count", Expect.CAUGHT, t.replaced(i, t.with_value(i, value)), how)


def move_window(t: Target) -> Iterator[Mutant]:
    """An output moved to another window: a mutant where windows are the job's (event time),
    a control where a run chooses them (processing time: to a window its key does not use)."""
    name = t.contract.window
    if name is None:
        return
    if name in t.contract.free:
        for n, i in enumerate(t.pick(t.data())):
            value = dict(t.outputs[i].value)
            value[name] = _fresh(t, name, value.get(name), n, t.outputs[i].key)
            yield Mutant(
                "move-window", Expect.PASSES, t.replaced(i, t.with_value(i, value)), "fresh"
            )
        return
    windows_of: dict[Any, set[str]] = defaultdict(set)  # Kafka key -> its windows
    for o in t.outputs:
        if name in o.value:
            windows_of[o.key].add(json.dumps(o.value[name]))
    every = sorted(set().union(*windows_of.values())) if windows_of else []
    if len(every) < 2:
        return
    for i in t.pick([i for i in t.data() if name in t.outputs[i].value]):
        value = dict(t.outputs[i].value)
        current = json.dumps(value[name])
        # Another window of the same key where there is one: a value counted in the wrong window.
        same_key = sorted(windows_of[t.outputs[i].key] - {current})
        value[name] = json.loads((same_key or [w for w in every if w != current])[0])
        yield Mutant("move-window", Expect.CAUGHT, t.replaced(i, t.with_value(i, value)), "other")


def _list_victims(t: Target, need: int) -> list[int]:
    """Outputs whose list has ``need`` distinct items; for running results, ones whose first
    two items the key's previous output pins (k new items, k <= len - 2)."""
    name = t.contract.ordered_list
    assert name is not None
    running = t.running
    previous: dict[Any, float] = {}
    out = []
    for i in t.data():
        parsed = _list_of(t.outputs[i].value.get(name))
        key = t.key_of(i)
        total = t.outputs[i].value.get(running.total) if running is not None else None
        before = previous.get(key)
        if running is not None and isinstance(total, int | float):
            previous[key] = total
        if parsed is None or len(set(map(str, parsed[0]))) < need:
            continue
        if running is not None and need >= 2:
            if before is None or not isinstance(total, int | float):
                continue
            if total - before > len(parsed[0]) - 2:
                continue
        out.append(i)
    return out


def list_edits(t: Target) -> Iterator[Mutant]:
    """An ordered list truncated, with its first two items swapped, or with an item replaced
    by one the input never held."""
    name = t.contract.ordered_list
    if name is None:
        return
    edits: list[tuple[str, int, Callable[[list[Any]], list[Any]]]] = [
        ("truncate", 2, lambda xs: xs[:-1]),
        ("reorder", 2, lambda xs: [xs[1], xs[0], *xs[2:]]),
        ("replace", 1, lambda xs: [*xs[:-1], _foreign(xs[-1])]),
    ]
    for how, need, edit in edits:
        for i in t.pick(_list_victims(t, need), 1):
            value = dict(t.outputs[i].value)
            items, write = _list_of(value[name])  # type: ignore[misc]
            value[name] = write(edit(items))
            yield Mutant(f"list-{how}", Expect.CAUGHT, t.replaced(i, t.with_value(i, value)), name)


def _foreign(item: Any) -> Any:
    return 987_654_321 if isinstance(item, int) else "987654321"


def swap_values(t: Target) -> Iterator[Mutant]:
    """Two outputs of different keys exchange their values."""
    view = t.contract.view
    if view is None:
        return
    data = t.data()

    def agreed(i: int) -> str:
        value = t.outputs[i].value
        names = view.fields if view.fields is not None else tuple(sorted(value))
        return json.dumps([value.get(n) for n in names])

    for i in t.pick(data, 2):
        j = next(
            (j for j in data if t.outputs[j].key != t.outputs[i].key and agreed(j) != agreed(i)),
            None,
        )
        if j is None:
            continue
        records = t.replaced_many(
            {
                i: replace(t.unique[i], value=t.unique[j].value),
                j: replace(t.unique[j], value=t.unique[i].value),
            }
        )
        yield Mutant("swap-values", Expect.CAUGHT, records, f"{t.unique[i].id}<->{t.unique[j].id}")


def reorder_json_keys(t: Target) -> Iterator[Mutant]:
    """The same value with its JSON keys in another order: a control."""
    for i in t.pick(range(len(t.unique))):
        value = t.outputs[i].value
        text = json.dumps(dict(reversed(list(value.items())))).encode()
        yield Mutant(
            "json-key-order",
            Expect.PASSES,
            t.replaced(i, replace(t.unique[i], value=text)),
            "reversed",
        )


def _schema_victims(t: Target, k: int) -> list[int]:
    return t.pick(t.data(), k)


def drop_field(t: Target) -> Iterator[Mutant]:
    """A field of the output schema missing from an output (each field in turn)."""
    schema = t.contract.output_schema
    assert schema is not None
    for n, i in enumerate(_schema_victims(t, len(schema.names))):
        value = dict(t.outputs[i].value)
        name = schema.names[n % len(schema.names)]
        if value.pop(name, None) is None and name not in t.outputs[i].value:
            continue
        yield Mutant("drop-field", Expect.CAUGHT, t.replaced(i, t.with_value(i, value)), name)


def extra_field(t: Target) -> Iterator[Mutant]:
    """An output with a field the output schema does not have."""
    for i in _schema_victims(t, 1):
        value = {**t.outputs[i].value, "mutant_field": 1}
        yield Mutant("extra-field", Expect.CAUGHT, t.replaced(i, t.with_value(i, value)), "added")


def _other_type(value: Any) -> Any:
    """A value of another JSON type: text for a number ("banana"), a number for text."""
    return 12345 if isinstance(value, str) else "banana"


def change_type(t: Target) -> Iterator[Mutant]:
    """A field holding a value of another type than the schema's (each field in turn)."""
    schema = t.contract.output_schema
    assert schema is not None
    for n, i in enumerate(_schema_victims(t, len(schema.names))):
        value = dict(t.outputs[i].value)
        name = schema.names[n % len(schema.names)]
        if value.get(name) is None:
            continue
        value[name] = _other_type(value[name])
        yield Mutant("change-type", Expect.CAUGHT, t.replaced(i, t.with_value(i, value)), name)


def null_field(t: Target) -> Iterator[Mutant]:
    """A field the schema says is never null, null."""
    schema = t.contract.output_schema
    assert schema is not None
    required = schema.not_nullable()
    for n, i in enumerate(_schema_victims(t, 2)):
        if not required:
            return
        value = {**t.outputs[i].value, required[n % len(required)]: None}
        yield Mutant(
            "null-field",
            Expect.CAUGHT,
            t.replaced(i, t.with_value(i, value)),
            required[n % len(required)],
        )


# Window starts no run opens: in the year 33658, and as far before 1970.
FAR_MS = 10**15


def window_out_of_range(t: Target) -> Iterator[Mutant]:
    """An output's window moved where no run opens one: long after every input (and after
    now), or long before it."""
    windows = t.contract.windows
    assert windows is not None
    victims = [i for i in t.data() if windows.start in t.outputs[i].value]
    for where, i in zip(("after", "before"), t.pick(victims, 2), strict=False):
        value = dict(t.outputs[i].value)
        start, end = windows.bounds(value)
        moved = FAR_MS if where == "after" else -FAR_MS
        value[windows.start] = moved
        if windows.end is not None and isinstance(end, int) and isinstance(start, int):
            value[windows.end] = moved + (end - start)
        yield Mutant(
            "window-out-of-range", Expect.CAUGHT, t.replaced(i, t.with_value(i, value)), where
        )


def _no_schema(c: ConsistencyContract) -> NotApplicable | None:
    return None if c.output_schema is not None else "no output schema"


OPERATORS: dict[str, tuple[Operator, Callable[[ConsistencyContract], NotApplicable | None]]] = {
    "drop": (drop, lambda c: None if c.view is not None else "no agreement"),
    "duplicate-same-id": (duplicate_same_id, lambda c: None),
    "reemit-new-id": (reemit_new_id, lambda c: None),
    "change-agreed-field": (
        change_agreed_field,
        lambda c: None if c.view is not None else "no agreement",
    ),
    "change-free-field": (change_free_field, lambda c: None if c.free else "no free fields"),
    "move-key": (move_key, lambda c: None if c.view is not None else "no agreement"),
    "corrupt-count": (
        corrupt_count,
        lambda c: None if isinstance(c.view, KeyTotals) else "no count or sum (KeyTotals)",
    ),
    "move-window": (move_window, lambda c: None if c.window else "no window field"),
    "list-edits": (list_edits, lambda c: None if c.ordered_list else "no ordered list field"),
    "swap-values": (swap_values, lambda c: None if c.view is not None else "no agreement"),
    "json-key-order": (reorder_json_keys, lambda c: None),
    "drop-field": (drop_field, _no_schema),
    "extra-field": (extra_field, _no_schema),
    "change-type": (change_type, _no_schema),
    "null-field": (
        null_field,
        lambda c: (
            _no_schema(c) or (None if c.output_schema.not_nullable() else "every field may be null")
        ),  # type: ignore[union-attr]
    ),
    "window-out-of-range": (
        window_out_of_range,
        lambda c: None if c.windows is not None else "no placed windows (Windows)",
    ),
}


def mutate(
    job: str,
    contract: ConsistencyContract,
    reference: Sequence[SinkRecord],
    dedup: bool = True,
    inputs: InputView | None = None,
    seed: int = 0,
    on_mutant: Callable[[Mutant], None] | None = None,
    clock: TimeSpan | None = None,
) -> MutationReport:
    """Every applicable operator's mutants of ``reference``, each judged against it;
    ``clock``: the reference run's wall-clock span (processing-time windows lie in it)."""
    target = Target.of(reference, contract, dedup, seed)
    results = []
    for name, (operator, why_not) in OPERATORS.items():
        reason = why_not(contract)
        if reason is not None:
            results.append(OperatorResult(name, applies=False, why_not=reason))
            continue
        result = OperatorResult(name, applies=True)
        for mutant in operator(target):
            report = judge(
                job,
                contract,
                mutant.records,
                reference,
                dedup,
                inputs,
                clock=clock,
                reference_clock=clock,
            )
            if on_mutant is not None:
                on_mutant(mutant)
            if mutant.expect is Expect.CAUGHT:
                result.mutants += 1
                ok = report.verdict is Verdict.INCONSISTENT
                result.caught += ok
            else:
                result.controls += 1
                ok = report.verdict is Verdict.CONSISTENT
                result.passed += ok
            if not ok:
                result.misjudged.append(
                    f"{mutant.operator} ({mutant.what}, must be {mutant.expect}): "
                    f"{report.verdict}, {report.inconclusive_because or report.guarantee}"
                )
        if not result.mutants and not result.controls:
            result.applies, result.why_not = False, "nothing in the output to change"
        results.append(result)
    report = MutationReport(job, len(target.outputs), dedup, inputs is not None, results)
    log.info("contract of %s: %s of %s mutants caught", job, report.caught, report.mutants)
    return report
