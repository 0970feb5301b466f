"""The replica gate: a plain consumer's exactly-once view of two replicas' output.

Both replicas write the *raw* topic ``<output>.replicas`` (identical ids, interleaved); the gate
forwards the first copy of every id to ``<output>``, partition for partition, and drops the
rest. Per partition, the first copies come in increasing id order: each replica writes a
partition's ids in increasing order (release sink: task p -> partition p, batches in
sequence), and an id smaller than one already forwarded was written (or skipped by the release
barrier, because it was there) by the faster replica before. So the gate keeps one number
per partition, the last id it forwarded, and forwards a record iff its id is greater.

Restartable without a checkpoint of its own: every forwarded record carries the raw offset it
came from (header ``rl.src``), so a gate that starts reads the last record of each output
partition and resumes the raw partition right after it, with that record's id as the floor.
A zombie replica's late copies (SIGSTOP past its lease, then SIGCONT) are ids forwarded long
before and are dropped here, counted per writer (header ``rl.replica``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from recovery_lib.io.sinks.ids import parse_output_id
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.assignment import assign
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.exceptions import RecordsUnreadable
from recovery_lib.kafka.headers import CONTROL_HEADER, GATE_SOURCE_HEADER, ID_HEADER, REPLICA_HEADER
from recovery_lib.kafka.tail_probe import TailProbe
from recovery_lib.settings import Settings, get_settings


def raw_topic(output_topic: str) -> str:
    return f"{output_topic}.replicas"


def id_key(value: bytes) -> tuple[int, int, int] | None:
    try:
        _, batch, partition, seq = parse_output_id(value.decode())
    except ValueError:
        return None
    return batch, partition, seq


class ReplicaGate:
    def __init__(
        self,
        output_topic: str,
        kafka: Mapping[str, str] | None = None,
        raw: str | None = None,
        settings: Settings | None = None,
    ) -> None:
        self._request_timeout_s = (settings or get_settings()).kafka_request_timeout_s
        self.output_topic = output_topic
        self.raw_topic = raw or raw_topic(output_topic)
        self.kafka = {**client_config(), **dict(kafka or {})}
        self.floor: dict[int, tuple[int, int, int]] = {}  # partition -> last id forwarded
        self.forwarded = 0
        self.dropped: Counter[str] = Counter()  # copies dropped, by writing replica
        self.last_forward_ms = 0
        self._consumer: Any = None
        self._producer: Any = None

    def resume(self) -> dict[int, int]:
        """Floors and raw positions from the output's last records; returns the positions."""
        from confluent_kafka import Consumer, TopicPartition

        timeout = self._request_timeout_s
        parts = TopicAdmin(self.kafka).partitions(self.raw_topic)
        probe = TailProbe(self.kafka, timeout, timeout)
        reader = Consumer({**self.kafka, "group.id": "rl-gate", "enable.auto.commit": "false"})
        positions: dict[int, int] = {}
        try:
            ends = probe.ends([(self.output_topic, p) for p in parts])
            for part in parts:
                positions[part] = 0
                end = ends[(self.output_topic, part)]
                if end <= probe.first_offset(self.output_topic, part):
                    continue  # nothing forwarded to this partition yet
                assign(reader, [TopicPartition(self.output_topic, part, end - 1)])
                deadline = time.monotonic() + timeout
                msg = reader.poll(0.1)
                while msg is None or msg.error() is not None or msg.offset() != end - 1:
                    if time.monotonic() > deadline:
                        raise RecordsUnreadable(
                            f"{self.output_topic}/{part}: last record unreadable; check the "
                            "broker is up, then start the gate again"
                        )
                    msg = reader.poll(0.1)
                headers = dict(msg.headers() or ())
                key = id_key(headers.get(ID_HEADER, b""))
                if key is not None:
                    self.floor[part] = key
                positions[part] = int(headers.get(GATE_SOURCE_HEADER, b"-1")) + 1
        finally:
            reader.close()
            probe.close()
        return positions

    def start(self) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        positions = self.resume()
        self._consumer = Consumer(
            {
                **self.kafka,
                "group.id": f"rl-gate-{self.output_topic}",
                "enable.auto.commit": "false",
                "fetch.wait.max.ms": "5",
            }
        )
        assign(self._consumer, [TopicPartition(self.raw_topic, p, o) for p, o in positions.items()])
        self._producer = Producer({**self.kafka, "enable.idempotence": "true", "linger.ms": "1"})

    def step(self, max_records: int = 500, timeout_s: float = 0.05) -> int:
        """Forward what arrived; returns how many records were read."""
        messages = self._consumer.consume(max_records, timeout_s)
        for msg in messages:
            if msg.error() is not None:
                continue
            headers = list(msg.headers() or ())
            hmap = dict(headers)
            part = msg.partition()
            key = id_key(hmap.get(ID_HEADER, b""))
            if key is None or CONTROL_HEADER in hmap:
                self.dropped["(no id)"] += 1
                continue
            if part in self.floor and key <= self.floor[part]:
                self.dropped[hmap.get(REPLICA_HEADER, b"?").decode()] += 1
                continue
            self.floor[part] = key
            headers.append((GATE_SOURCE_HEADER, str(msg.offset()).encode()))
            while True:
                try:
                    self._producer.produce(
                        self.output_topic, msg.value(), msg.key(), part, headers=headers,
                        timestamp=msg.timestamp()[1],
                    )  # fmt: skip
                    break
                except BufferError:
                    self._producer.poll(0.05)
            self.forwarded += 1
            self.last_forward_ms = int(time.time() * 1000)
        self._producer.poll(0)
        return len(messages)

    def run(self, stop: threading.Event) -> None:
        self.start()
        try:
            while not stop.is_set():
                self.step()
        finally:
            self.close()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def late_copies(records: Iterable[Any]) -> Counter[str]:
    """Per writing replica, the raw topic's records (SinkRecords, in partition order) whose id
    an earlier record of the partition already carried: the copies the gate drops. A paused
    leader that resumes and writes what the new leader wrote shows here."""
    seen: set[tuple[int, str]] = set()
    late: Counter[str] = Counter()
    for record in records:
        key = (record.partition, record.id)
        if key in seen:
            late[dict(record.headers).get(REPLICA_HEADER, b"?").decode()] += 1
        seen.add(key)
    return late


def replica_headers(options: Mapping[str, str]) -> Any:
    """Sink hook ``recordHeaders``: every record says which replica wrote it."""
    opts = {k.lower(): v for k, v in options.items()}
    return _ReplicaHeaders(opts.get("replicaid", "?"))


class _ReplicaHeaders:
    def __init__(self, replica: str) -> None:
        self.headers = [(REPLICA_HEADER, replica.encode())]

    def for_batch(self, batch_id: int) -> list[tuple[str, bytes]]:
        return self.headers


REPLICA_HEADERS_HOOK = f"{__name__}:replica_headers"
