"""The input of a judged run, for invariants that need it: which topic held each of the job's
inputs, read on demand (every record, in partition and offset order), and the NexMark
generator's configuration when the input was generated (its events can be re-generated)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from recovery_lib.io.sinks.dedup_reader import read_topic

__all__ = [
    "InputRecord",
    "InputView",
]


@dataclass(frozen=True)
class InputRecord:
    """One record of an input topic.

    Attributes:
        partition: Its partition.
        offset: Its offset.
        key: Its key.
        value: Its value.
    """

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class InputView:
    """The input of a judged run, which invariants read (``Invariant.check``'s ``inputs``).
    Records are read on first use and kept.

    Attributes:
        topics: The job's input name -> the topic the judged runs read.
        generator: The generator's configuration when the input was generated (NexMark's
            ``GeneratorConfig``): an invariant of the generator's own job may re-generate
            the events from it.
        events: How many events the generator produced (with ``generator``).
        reader: Reads a topic's records (default: every record of the topic on the broker).
    """

    topics: Mapping[str, str]
    generator: Any = None
    events: int | None = None
    reader: Callable[[str], list[InputRecord]] | None = None
    _cache: dict[str, list[InputRecord]] = field(default_factory=dict, repr=False)

    def has(self, name: str) -> bool:
        """Whether the run's input ``name`` can be read.

        Args:
            name: One of the job's inputs.

        Returns:
            True when its topic is known.
        """
        return name in self.topics

    def records(self, name: str) -> list[InputRecord]:
        """Every record of input ``name``.

        Args:
            name: One of the job's inputs.

        Returns:
            Its records, partition by partition, in offset order.

        Raises:
            KeyError: The run has no input ``name`` (see ``has``).
        """
        if name not in self.topics:
            raise KeyError(f"no input {name!r}; the run's inputs are {sorted(self.topics)}")
        if name not in self._cache:
            read = self.reader or _read_topic_records
            self._cache[name] = read(self.topics[name])
        return self._cache[name]

    def decoded(self, name: str) -> list[tuple[InputRecord, Any]]:
        """Records of input ``name`` with their JSON value.

        Args:
            name: One of the job's inputs.

        Returns:
            (record, value) pairs as ``records`` orders them; value None where it is not
            JSON.
        """

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
