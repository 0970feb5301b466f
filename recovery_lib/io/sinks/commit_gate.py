"""Sink mode ``two_phase``: outputs visible to consumers only when their micro-batch commits.

A two-phase commit that works on any Kafka-protocol broker (the embedded one's transactions
do not hide aborted records). Phase one: every task writes its records tagged with its
transaction token (header ``rl.txn``: the writer's run token and Spark's task attempt id) and
flushes them. Phase two: when every task of batch b succeeded, the driver (the sink's
``commit``) appends a *commit record* to every partition of the topic (header ``rl.commit``
= b, value = the committed tokens). Nothing is visible before it.

The consumer side is ``CommitGate``: it holds a partition's records per token and releases
those of the committed tokens when the commit record arrives, in log order. Records of other
attempts of b (a failed task's, a batch re-run after a driver restart) are dropped, and so is
a second commit record of b (a driver that died after committing and before Spark's commit
log re-runs b and commits it again): the first commit of a batch is the one that counts.
The visibility time of a released record is its commit record's timestamp.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from recovery_lib.io.sinks.dedup_reader import SinkRecord, read_topic
from recovery_lib.io.sinks.ids import parse_output_id
from recovery_lib.kafka.headers import COMMIT_HEADER, TXN_HEADER


def commit_record(batch_id: int, tokens: Iterable[str], sink_id: str = "") -> bytes:
    """The value of batch ``batch_id``'s commit record."""
    return json.dumps({"batch": batch_id, "sink": sink_id, "txns": sorted(tokens)}).encode()


@dataclass
class _Partition:
    held: dict[str, list[SinkRecord]] = field(default_factory=lambda: defaultdict(list))
    committed: set[int] = field(default_factory=set)  # batches whose commit record was seen


class CommitGate:
    """Consumer side of ``two_phase``: feed it every record of a partition in log order;
    it returns what becomes visible. ``dropped`` counts records of attempts never committed."""

    def __init__(self, sink_id: str = "") -> None:
        self.sink_id = sink_id
        self.dropped = 0
        self.commits = 0
        self._parts: dict[tuple[str, int], _Partition] = defaultdict(_Partition)

    def offer(self, record: SinkRecord) -> list[SinkRecord]:
        part = self._parts[(record.topic, record.partition)]
        headers = dict(record.headers)
        commit = headers.get(COMMIT_HEADER)
        if commit is not None:
            return self._commit(part, record, json.loads(record.value or b"{}"))
        token = headers.get(TXN_HEADER)
        if token is None:  # not written by a two-phase sink: visible as it is
            return [record]
        batch = _batch_of(record)
        if batch is not None and batch in part.committed:
            self.dropped += 1  # a late copy of a batch that is committed already
            return []
        part.held[token.decode()].append(record)
        return []

    def _commit(self, part: _Partition, marker: SinkRecord, body: dict) -> list[SinkRecord]:
        if body.get("sink", "") != self.sink_id:
            return []
        batch = int(body["batch"])
        if batch in part.committed:
            return []  # committed before: this re-run's records were dropped as they came
        part.committed.add(batch)
        self.commits += 1
        visible: list[SinkRecord] = []
        for token in body.get("txns", []):
            visible.extend(part.held.pop(token, []))
        for token in [t for t, recs in part.held.items() if recs and _batch_of(recs[0]) == batch]:
            self.dropped += len(part.held.pop(token))
        visible.sort(key=lambda r: r.offset)
        return [replace(r, timestamp_ms=marker.timestamp_ms) for r in visible]

    def pending(self) -> int:
        """Records held, waiting for a commit record."""
        return sum(len(recs) for p in self._parts.values() for recs in p.held.values())


class CommittedReader:
    """What a read-committed consumer of a ``two_phase`` topic sees: every committed output
    once, with its visibility time (the commit record's timestamp) as ``timestamp_ms``."""

    def __init__(
        self, topic: str, config: Mapping[str, str] | None = None, sink_id: str = ""
    ) -> None:
        self.topic = topic
        self.config = config
        self.gate = CommitGate(sink_id)

    def __iter__(self) -> Iterator[SinkRecord]:
        for record in read_topic(self.topic, self.config):
            yield from self.gate.offer(record)


def _batch_of(record: SinkRecord) -> int | None:
    if record.id is None:
        return None
    try:
        return parse_output_id(record.id)[1]
    except ValueError:
        return None
