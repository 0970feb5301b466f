"""The input of an experiment: what the faulty run and the reference run both read.

``GeneratedInput``: NexMark events from the generator (seeded, so the oracle can re-generate
them). ``KeyedInput``: ``{"account", "amount"}`` events over a fixed number of distinct keys, every
key once in the warm-up (a keyed job's state then holds them all before the timed phase).
``RecordedInput``: records already in a set of topics (a team's recorded production input),
within an offset range, replayed into fresh topics with their keys and partitions, so that both
runs read the same records and the originals stay untouched.

Both produce a warm-up share unpaced, then the rest paced at the experiment's rate while the
faulty run is watched.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from confluent_kafka import Producer

from recovery_lib.errors import ConfigurationError
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.generator import Draws
from recovery_lib.nexmark.producer import ensure_topics, produce_events
from recovery_lib.nexmark.streams import KINDS
from recovery_lib.runtime.pacing import Pacer
from recovery_lib.verify.inputs import InputView


class ExperimentInput(Protocol):
    """Called by the experiment runner: ``create_topics`` once, ``warm_up`` before the faulty
    run's timed phase, ``produce`` during it (in a thread; returns when done or stopped),
    ``view`` for the oracle after both runs."""

    topics: dict[str, str]  # the job's input name -> the topic both runs read

    def create_topics(self, admin: TopicAdmin) -> None: ...

    def warm_up(self, count: int) -> int: ...

    def produce(
        self,
        first: int,
        rate: float,
        duration_s: float,
        on_progress: Callable[[int], None],
        stop: Callable[[], bool],
    ) -> None: ...

    def view(self, produced: int) -> InputView: ...


class GeneratedInput:
    """NexMark events; the job's inputs must be NexMark streams (persons, auctions, bids)."""

    def __init__(self, generator: GeneratorConfig, inputs: tuple[str, ...]) -> None:
        unknown = [name for name in inputs if name not in KINDS]
        if unknown:
            raise ConfigurationError(
                f"the NexMark generator makes {', '.join(KINDS)}, not {unknown}: give the job "
                "recorded input instead (--replay input=topic)"
            )
        self.generator = generator
        self.topics = {kind: f"{generator.topic_prefix}.{kind}" for kind in KINDS}

    def create_topics(self, admin: TopicAdmin) -> None:
        ensure_topics(self.generator, admin)

    def warm_up(self, count: int) -> int:
        if count > 0:
            produce_events(self.generator, count=count)
        return max(count, 0)

    def produce(
        self,
        first: int,
        rate: float,
        duration_s: float,
        on_progress: Callable[[int], None],
        stop: Callable[[], bool],
    ) -> None:
        produce_events(
            self.generator,
            duration_s=duration_s,
            rate=rate,
            first_event_id=first,
            on_progress=on_progress,
            stop=stop,
        )

    def view(self, produced: int) -> InputView:
        return InputView(dict(self.topics), generator=self.generator, events=produced)


class KeyedInput:
    """Events ``{"account": "a00000042", "amount": 17}`` on input ``input`` over ``keys``
    distinct accounts, Kafka-keyed by the account: event ``i < keys`` has account ``i`` (the
    warm-up states every account), a later one an account drawn uniformly (seeded, so any
    range can be re-generated)."""

    KEY_FIELD, AMOUNT_FIELD = 0, 1  # the draw streams (nexmark.generator.Draws)
    CHUNK = 50_000  # events built and produced at a time

    def __init__(self, input: str, keys: int, prefix: str, seed: int, partitions: int = 2):
        if keys < 1:
            raise ConfigurationError(f"keyed input needs at least one key, got {keys}")
        self.input, self.keys, self.seed, self.partitions = input, keys, seed, partitions
        self.topics = {input: f"{prefix}.{input}"}

    def create_topics(self, admin: TopicAdmin) -> None:
        admin.create(self.topics[self.input], self.partitions)

    def events(self, first: int, count: int) -> list[tuple[bytes, bytes]]:
        """(Kafka key, value) of events ``first .. first + count - 1``."""
        ids = np.arange(first, first + count, dtype=np.int64)
        draws = Draws(self.seed, ids)
        keys = np.where(ids < self.keys, ids, draws.below(self.KEY_FIELD, self.keys))
        amounts = draws.below(self.AMOUNT_FIELD, 100)
        out = []
        for key, amount in zip(keys.tolist(), amounts.tolist(), strict=True):
            name = f"a{key:08d}"
            out.append((name.encode(), f'{{"account":"{name}","amount":{amount}}}'.encode()))
        return out

    def _send(self, producer: Producer, first: int, count: int) -> None:
        topic = self.topics[self.input]
        for key, value in self.events(first, count):
            while True:
                try:
                    producer.produce(topic, value, key)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.05)
        producer.poll(0)

    def warm_up(self, count: int) -> int:
        """At least one event per key, unpaced."""
        count = max(count, self.keys)
        producer = Producer(client_config())
        for first in range(0, count, self.CHUNK):
            self._send(producer, first, min(self.CHUNK, count - first))
        if producer.flush(60):
            raise RecordsNotAcknowledged(
                "the broker did not acknowledge the keyed warm-up events; check the broker is up"
            )
        return count

    def produce(
        self,
        first: int,
        rate: float,
        duration_s: float,
        on_progress: Callable[[int], None],
        stop: Callable[[], bool],
    ) -> None:
        producer = Producer(client_config())
        total = int(rate * duration_s)
        step = max(1, int(rate / 20))  # 50 ms of events at a time
        pacer = Pacer(rate)
        sent = 0
        while sent < total and not stop():
            pacer.wait(sent)
            count = min(step, total - sent)
            self._send(producer, first + sent, count)
            sent += count
            on_progress(sent)
        if producer.flush(30):
            raise RecordsNotAcknowledged(
                "the broker did not acknowledge every keyed event; check the broker is up"
            )

    def view(self, produced: int) -> InputView:
        return InputView(dict(self.topics), events=produced)


@dataclass(frozen=True)
class _Recorded:
    input: str
    partition: int
    key: bytes | None
    value: bytes | None


class RecordedInput:
    """Records of existing topics, ``[start, end)`` per partition (default: all present),
    replayed into ``<prefix>.<input>`` with the same partitions and keys, in an order that keeps
    every partition's order and interleaves partitions by record timestamp."""

    def __init__(
        self,
        sources: Mapping[str, str],
        prefix: str,
        start: Mapping[str, Mapping[int, int]] | None = None,
        end: Mapping[str, Mapping[int, int]] | None = None,
    ) -> None:
        if not sources:
            raise ConfigurationError("recorded input needs at least one input=topic")
        self.sources = dict(sources)
        self.topics = {name: f"{prefix}.{name}" for name in sources}
        self.start = {t: dict(p) for t, p in (start or {}).items()}
        self.end = {t: dict(p) for t, p in (end or {}).items()}
        self.records: list[_Recorded] = []
        self._partitions: dict[str, int] = {}

    def load(self) -> int:
        """Read the recorded range into memory (bounded by the range the user chose)."""
        queues = []
        for name, topic in self.sources.items():
            admin_parts = TopicAdmin().partitions(topic)
            if not admin_parts:
                raise ConfigurationError(
                    f"recorded input {name}: topic {topic} does not exist; name a recorded topic"
                )
            self._partitions[name] = len(admin_parts)
            per_part: dict[int, list] = {}
            ends = self.end.get(topic, {})
            for r in read_topic(topic, start=self.start.get(topic)):
                if r.partition in ends and r.offset >= ends[r.partition]:
                    continue
                per_part.setdefault(r.partition, []).append(
                    (r.timestamp_ms, _Recorded(name, r.partition, r.key, r.value))
                )
            queues.extend(per_part.values())
        # A k-way merge by timestamp keeps each partition's order (each queue is in order).
        heads = [(q[0][0], i, 0) for i, q in enumerate(queues) if q]
        heapq.heapify(heads)
        while heads:
            _ts, i, j = heapq.heappop(heads)
            self.records.append(queues[i][j][1])
            if j + 1 < len(queues[i]):
                heapq.heappush(heads, (queues[i][j + 1][0], i, j + 1))
        if not self.records:
            raise ConfigurationError(
                f"the recorded range of {sorted(self.sources.values())} is empty; give start and "
                "end offsets that hold records"
            )
        return len(self.records)

    def create_topics(self, admin: TopicAdmin) -> None:
        if not self.records:
            self.load()
        for name, topic in self.topics.items():
            admin.create(topic, self._partitions[name])

    def _send(self, producer: Producer, record: _Recorded) -> None:
        producer.produce(
            self.topics[record.input], record.value, record.key, partition=record.partition
        )

    def warm_up(self, count: int) -> int:
        count = min(max(count, 0), len(self.records) // 10)  # most of the input stays timed
        producer = Producer(client_config())
        for record in self.records[:count]:
            self._send(producer, record)
            producer.poll(0)
        if producer.flush(30):
            raise RecordsNotAcknowledged(
                "the broker did not acknowledge the replayed warm-up records; check the broker "
                "is up"
            )
        return count

    def produce(
        self,
        first: int,
        rate: float,
        duration_s: float,
        on_progress: Callable[[int], None],
        stop: Callable[[], bool],
    ) -> None:
        producer = Producer(client_config())
        pacer = Pacer(rate)
        sent = 0
        for record in self.records[first:]:
            if stop():
                break
            pacer.wait(sent)
            self._send(producer, record)
            producer.poll(0)
            sent += 1
            if sent % 1000 == 0:
                on_progress(sent)
        if producer.flush(30):
            raise RecordsNotAcknowledged(
                "the broker did not acknowledge every replayed record; check the broker is up"
            )
        on_progress(sent)

    def view(self, produced: int) -> InputView:
        return InputView(dict(self.topics))
