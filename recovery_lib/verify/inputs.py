"""The input of a judged run, for invariants that need it: which topic held each of the job's
inputs, read on demand (every record, in partition and offset order), and the NexMark
generator's configuration when the input was generated (its events can be re-generated)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from recovery_lib.io.sinks.dedup_reader import read_topic


@dataclass(frozen=True)
class InputRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class InputView:
    """``topics``: the job's input name -> the topic the judged runs read."""

    topics: Mapping[str, str]
    # The generator's configuration when the input was generated (NexMark's GeneratorConfig):
    # an invariant of the generator's own job may re-generate the events from it.
    generator: Any = None
    events: int | None = None
    reader: Callable[[str], list[InputRecord]] | None = None
    _cache: dict[str, list[InputRecord]] = field(default_factory=dict, repr=False)

    def has(self, name: str) -> bool:
        """The run's input ``name`` can be read (its topic is known)."""
        return name in self.topics

    def records(self, name: str) -> list[InputRecord]:
        """Every record of input ``name`` (partition by partition, in offset order)."""
        if name not in self.topics:
            raise KeyError(f"no input {name!r}; the run's inputs are {sorted(self.topics)}")
        if name not in self._cache:
            read = self.reader or _read_topic_records
            self._cache[name] = read(self.topics[name])
        return self._cache[name]

    def decoded(self, name: str) -> list[tuple[InputRecord, Any]]:
        """Records of ``name`` with their JSON value (None where the value is not JSON)."""

        out = []
        for record in self.records(name):
            try:
                value = json.loads(record.value) if record.value is not None else None
            except ValueError:
                value = None
            out.append((record, value))
        return out


def _read_topic_records(topic: str) -> list[InputRecord]:
    return [InputRecord(r.partition, r.offset, r.key, r.value) for r in read_topic(topic)]
