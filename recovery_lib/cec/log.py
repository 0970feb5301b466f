"""A CEC aggregate's output topic as its log: one partition per shard, appended in order by
one idempotent producer (so what survives a crash is a prefix), read backwards at recovery in
chunks (Kafka reads forwards only: each chunk is read forwards and walked in reverse)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from recovery_lib.cec.records import KIND_HEADER, LazyRecord, LogRecord
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.assignment import assign
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged, RecordsUnreadable
from recovery_lib.kafka.tail_probe import TailProbe
from recovery_lib.settings import get_settings


@dataclass
class ScanCost:
    """What a backward scan read: records and bytes (the EC-load's I/O)."""

    records: int = 0
    bytes: int = 0


@dataclass
class OutputLog:
    topic: str
    config: Mapping[str, str] = field(repr=False)  # holds SASL passwords: not shown
    chunk: int = field(default_factory=lambda: get_settings().cec_scan_chunk)
    cost: ScanCost = field(default_factory=ScanCost)
    _producer: Any = None
    _failed: list[str] = field(default_factory=list)
    # Experiments' faults for this batch (runtime/faults.py): kill after N records, or write
    # the next footprint torn and kill.
    _kill_after: Any = None
    _torn: Any = None
    _written: int = 0

    # -- recovery --------------------------------------------------------------------------
    def partitions(self) -> list[int]:
        """The log's partitions (one per shard)."""

        return TopicAdmin(dict(self.config)).partitions(self.topic)

    def bounds(self, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """(low, end) of each partition: where the log starts (after retention or GC) and ends."""
        probe = TailProbe.from_settings(dict(self.config))
        try:
            ends = probe.ends((self.topic, p) for p in partitions)
            return {
                p: (probe.first_offset(self.topic, p), ends[(self.topic, p)]) for p in partitions
            }
        finally:
            probe.close()

    def newest_first(self, partition: int, low: int, end: int) -> Iterator[LazyRecord]:
        """The partition's CEC records from ``end`` back to ``low``, newest first (messages
        that are no CEC record are skipped)."""
        consumer = Consumer(
            {
                **self.config,
                "group.id": "recovery-cec-scan",
                "enable.auto.commit": "false",
                "enable.partition.eof": "true",
                # The scan knows every offset it wants is there: a fetch at the log's end must
                # not wait for more (the default 500 ms per chunk and shard was most of the
                # EC-load time).
                "fetch.wait.max.ms": "5",
                # Read a chunk, not the log: librdkafka prefetches from the assigned offset
                # until its queue is full (64 MB by default), so every chunk further back
                # fetched everything after it again and the scan grew quadratically.
                "max.partition.fetch.bytes": "1048576",
                "queued.max.messages.kbytes": "2048",
            }
        )
        try:
            hi = end
            while hi > low:
                lo = max(low, hi - self.chunk)
                chunk = self._read(consumer, partition, lo, hi)
                yield from reversed(chunk)
                hi = lo
        finally:
            consumer.close()

    def _read(self, consumer: Any, partition: int, lo: int, hi: int) -> list[LazyRecord]:
        assign(consumer, [TopicPartition(self.topic, partition, lo)])
        out: list[LazyRecord] = []
        next_offset = lo
        deadline = time.monotonic() + get_settings().source_poll_timeout_s
        while next_offset < hi:
            # consume() waits its whole timeout when fewer records than asked for arrive: ask
            # often with a short one (1 s per chunk was most of a long scan).
            msgs = consumer.consume(num_messages=min(hi - next_offset, 10_000), timeout=0.05)
            if msgs:
                deadline = time.monotonic() + get_settings().source_poll_timeout_s
            elif time.monotonic() > deadline:
                raise RecordsUnreadable(
                    f"reading {self.topic}/{partition}: offsets {next_offset}..{hi} did not "
                    "arrive; is the broker up?"
                )
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() < hi:  # the partition ends early: nothing more
                            next_offset = hi
                        continue
                    raise RecordsUnreadable(
                        f"reading {self.topic}/{partition}: {err}; check the broker is up"
                    )
                if msg.offset() >= hi:
                    next_offset = hi
                    break
                next_offset = msg.offset() + 1
                value = msg.value() or b""
                headers = msg.headers() or []
                self.cost.records += 1
                self.cost.bytes += len(value) + sum(len(v or b"") for _, v in headers)
                record = LazyRecord(msg.key(), value, headers, msg.offset())
                if record.kind is not None or any(k == KIND_HEADER for k, _ in headers):
                    out.append(record)
        consumer.unassign()
        return out

    # -- appending -------------------------------------------------------------------------
    def begin_batch(self, kill_after: Any = None, torn: Any = None) -> None:
        self._kill_after, self._torn, self._written = kill_after, torn, 0

    def append(self, partition: int, record: LogRecord) -> None:
        self._written += 1
        if (
            self._torn is not None
            and record.is_control
            and self._torn.should_fire(None, self._written)
        ):
            # A torn write: the record's bytes damaged under its fingerprint, then the crash.
            self._produce(partition, replace(record, value=record.value + b"#torn"))
            self.flush()
            self._torn.fire()
        self._produce(partition, record)
        if self._kill_after is not None and self._kill_after.should_fire(None, self._written):
            self.flush()  # what was appended reaches the log; the rest of the batch does not
            self._kill_after.fire()

    def _produce(self, partition: int, record: LogRecord) -> None:
        if self._producer is None:
            self._producer = Producer(
                {**self.config, "enable.idempotence": "true", "acks": "all", "linger.ms": "5"}
            )
        while True:
            try:
                self._producer.produce(
                    self.topic,
                    record.value,
                    record.key.encode(),
                    partition,
                    headers=record.headers(),
                    on_delivery=self._delivered,
                )
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self._producer.poll(0.1)

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None and len(self._failed) < 5:
            self._failed.append(str(err))

    def flush(self, timeout_s: float = 60.0) -> None:
        """Wait until every appended record is in the log; raise if one is not (a gap would
        break the prefix the backward scan relies on, so the batch must fail)."""
        if self._producer is not None and self._producer.flush(timeout_s):
            raise RecordsNotAcknowledged(
                f"CEC records for {self.topic} were not acknowledged within {timeout_s} s; "
                "check the broker is up"
            )
        if self._failed:
            raise RecordsNotAcknowledged(
                f"CEC records for {self.topic} were refused: {self._failed}; the broker's log "
                "says why"
            )
