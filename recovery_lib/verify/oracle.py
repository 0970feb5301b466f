"""Compare a (faulty) run's sink output with a failure-free reference run and reference results.

Two views, because they answer different questions:

* **By output id, within the run.** Ids are (batch, partition, seq): a re-executed batch
  reuses them. ``duplicated`` = copies beyond the first that the consumer sees (0 when it reads
  through the dedup reader; the raw count is ``duplicates_dropped``); ``divergent`` = ids whose
  copies differ in content: the replay computed something else, which no single failure-free
  run would produce.
* **By content, against the reference.** Batch boundaries differ between two runs, so ids do
  not match across runs; content does for deterministic queries. ``lost`` = outputs of the
  reference missing from the run; ``unexpected`` = outputs the reference never produced.

Nondeterministic queries (Q12) are instead checked against their invariants (paper 004: every
output must be producible by some failure-free run), which the caller passes in.

Verdict: consistent iff nothing is lost, duplicated, divergent or unexpected and the invariants
hold.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from recovery_lib.io.sinks.dedup_reader import SinkRecord


@dataclass
class ConsistencyReport:
    query: str
    outputs: int
    reference_outputs: int
    lost: int
    duplicated: int
    divergent: int
    unexpected: int
    duplicates_dropped: int = 0
    reference_results_mismatch: int | None = None
    invariants: dict[str, Any] | None = None
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        invariant_ok = self.invariants is None or bool(self.invariants.get("ok"))
        clean = not (self.lost or self.duplicated or self.divergent or self.unexpected)
        results_ok = not self.reference_results_mismatch
        return "consistent" if clean and invariant_ok and results_ok else "inconsistent"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict}


def _content(record: SinkRecord) -> bytes:
    return (record.key or b"") + b"\x00" + (record.value or b"")


def check(
    query: str,
    run_output: Iterable[SinkRecord],
    reference_output: Iterable[SinkRecord] | None,
    dedup: bool,
    deterministic: bool = True,
    reference_results: Iterable[bytes] | None = None,
    invariants: dict[str, Any] | None = None,
    max_examples: int = 5,
) -> ConsistencyReport:
    """``run_output`` is the raw topic content (every copy); ``dedup`` says whether the
    consumer reads through the dedup reader (first copy of an id wins)."""
    copies: dict[str, list[bytes]] = defaultdict(list)
    seen: list[bytes] = []  # what the consumer sees, in order
    dropped = 0
    for record in run_output:
        content = _content(record)
        if record.id is not None:
            copies[record.id].append(content)
            if dedup and len(copies[record.id]) > 1:
                dropped += 1
                continue
        seen.append(content)
    duplicated = 0 if dedup else sum(len(c) - 1 for c in copies.values())
    divergent_ids = [rid for rid, c in copies.items() if len(set(c)) > 1]
    examples: dict[str, list[str]] = {"divergent_ids": divergent_ids[:max_examples]}
    if not dedup:
        examples["duplicated_ids"] = [rid for rid, c in copies.items() if len(c) > 1][:max_examples]

    lost = unexpected = 0
    reference_count = 0
    if reference_output is not None:
        ref_seen: list[bytes] = []
        ref_ids: set[str] = set()
        for record in reference_output:
            if record.id is not None:
                if record.id in ref_ids:
                    continue  # the reference is read deduplicated
                ref_ids.add(record.id)
            ref_seen.append(_content(record))
        reference_count = len(ref_seen)
        if deterministic:
            got, want = Counter(seen), Counter(ref_seen)
            # Extra copies of a correct output are duplicates, not unexpected outputs.
            extra = got - want
            dup_content = sum(n for c, n in extra.items() if c in want)
            lost = sum((want - got).values())
            unexpected = sum(extra.values()) - dup_content
            duplicated = max(duplicated, dup_content)
            examples["lost"] = [_show(c) for c in list(want - got)[:max_examples]]
            examples["unexpected"] = [_show(c) for c in extra if c not in want][:max_examples]
    mismatch = None
    if reference_results is not None and deterministic:
        values = Counter(c.split(b"\x00", 1)[1] for c in seen)
        expected = Counter(reference_results)
        mismatch = sum((expected - values).values()) + sum((values - expected).values())
    return ConsistencyReport(
        query=query,
        outputs=len(seen),
        reference_outputs=reference_count,
        lost=lost,
        duplicated=duplicated,
        divergent=len(divergent_ids),
        unexpected=unexpected,
        duplicates_dropped=dropped,
        reference_results_mismatch=mismatch,
        invariants=invariants,
        examples=examples,
    )


def _show(content: bytes) -> str:
    key, _, value = content.partition(b"\x00")
    return f"{key.decode(errors='replace')}: {value.decode(errors='replace')[:160]}"


def check_running_values(outputs: Iterable[tuple[str, int, int]]) -> dict[str, Any]:
    """Per-key running results ``(key, inputs_seen, running_value)`` in output order: each key's
    ``inputs_seen`` must step by exactly one (no input skipped or repeated)."""
    last: dict[str, int] = {}
    skipped = repeated = 0
    for key, count, _value in outputs:
        previous = last.get(key, 0)
        if count <= previous:
            repeated += 1
        elif count > previous + 1:
            skipped += 1
        last[key] = max(previous, count)
    return {
        "keys": len(last),
        "skipped": skipped,
        "repeated": repeated,
        "ok": skipped == 0 and repeated == 0,
    }
