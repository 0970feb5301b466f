"""KaZoo's order log: the leader's batches, published before any of their outputs is written.

One record per batch: ``{"batch": b, "sources": [ends of every source], "epoch": e}``, the
content of the leader's offset-log entry b (Spark writes it before the batch runs, with one
line per source, so the whole batch is one record whatever the number of sources). A leader
that takes over first appends a fence record (header ``rl.fence`` = its new epoch). Every
reader folds the log in offset order with one rule, so all of them agree:

* an entry of an epoch older than the newest fence before it is a zombie's, and dropped;
* the first accepted entry of a batch wins; a later one for the same batch is ignored.

A decision read from a prefix of the log never changes as the log grows, so a follower runs
exactly what the leader ran, and a new leader first runs whatever its predecessor published.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from recovery_lib.io.offsets import Offsets
from recovery_lib.io.sinks.fences import FENCE_HEADER


def offset_log_sources(entry: Path) -> list[Offsets] | None:
    """Every source's end offsets in one of Spark's offset-log entries (None if absent)."""
    try:
        lines = entry.read_text().splitlines()
    except FileNotFoundError:
        return None
    sources = []
    for line in lines[2:]:  # "v1", batch metadata, then one line per source
        try:
            ends = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(ends, dict):
            sources.append(_normal(ends))
    return sources


def _normal(ends: Mapping) -> Offsets:
    return {t: {str(p): int(o) for p, o in parts.items()} for t, parts in ends.items()}


@dataclass(frozen=True)
class OrderEntry:
    batch: int
    sources: list[Offsets]
    epoch: int

    def ends_for(self, topics: Iterable[str]) -> Offsets | None:
        """The ends of the source reading ``topics``; None if the batch does not name it."""
        wanted = set(topics)
        return next((s for s in self.sources if set(s) and set(s) <= wanted), None)

    def same_batch(self, sources: list[Offsets]) -> bool:
        key = lambda s: json.dumps(s, sort_keys=True)  # noqa: E731
        return sorted(map(key, self.sources)) == sorted(map(key, sources))

    def encode(self) -> bytes:
        raw = {"batch": self.batch, "sources": self.sources, "epoch": self.epoch}
        return json.dumps(raw).encode()

    @classmethod
    def decode(cls, value: bytes) -> OrderEntry:
        raw = json.loads(value)
        return cls(int(raw["batch"]), [_normal(s) for s in raw["sources"]], int(raw["epoch"]))


@dataclass
class OrderFold:
    """The accepted entries of an order log read so far, in offset order."""

    fence: int = 0  # the newest fence epoch seen
    entries: dict[int, OrderEntry] = field(default_factory=dict)
    dropped: int = 0  # a zombie leader's entries (older epoch than a fence before them)
    ignored: int = 0  # entries for a batch already decided
    forgotten: int = -1  # batches up to this one were dropped from memory

    def apply(self, value: bytes | None, headers: Mapping[str, bytes]) -> None:
        fence = headers.get(FENCE_HEADER)
        if fence is not None:
            self.fence = max(self.fence, int(fence))
            return
        if not value:
            return
        entry = OrderEntry.decode(value)
        if entry.epoch < self.fence:
            self.dropped += 1
        elif entry.batch in self.entries or entry.batch <= self.forgotten:
            self.ignored += 1
        else:
            self.entries[entry.batch] = entry

    def get(self, batch: int) -> OrderEntry | None:
        return self.entries.get(batch)

    def forget_before(self, batch: int) -> None:
        """Decisions of batches before ``batch``: this reader will not ask for them again."""
        for old in [b for b in self.entries if b < batch]:
            del self.entries[old]
        self.forgotten = max(self.forgotten, batch - 1)
