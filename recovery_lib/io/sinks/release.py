"""The release barrier of sink mode ``release`` (FlameStream, paper 004 section V).

Outputs leave as soon as a task has computed them, before the micro-batch commits, and a plain
consumer still sees each exactly once: after a failure the re-computed outputs are dropped up
to the last one released. That needs ids that increase monotonically per output partition, so
that the last record of a partition says everything released there:

* Spark task partition p writes only Kafka partition p (one writer per output partition; the
  sink refuses a task whose partition the topic lacks and a ``partition`` column);
* micro-batches run one after another, and a task numbers its rows in an order that a re-run
  reproduces (``stableOrder``, or the causal carrier's order);
* so ids ``(batch, p, seq)`` grow along partition p.

A task of batch b then reads the last id of its partition (after flushing what this process
still queues): ``(b, p, s)`` means its first s + 1 rows were released already (a task retry,
a mid-write kill, a driver restart); an id of an older batch means nothing of b was; a newer
batch means b was released whole. The replay must recompute the same rows, which holds for a
deterministic job (or a nondeterministic one under causal logging): the job runtime refuses
the mode otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from recovery_lib.io.sinks.fences import FENCE_HEADER
from recovery_lib.io.sinks.ids import ID_HEADER, parse_output_id
from recovery_lib.kafka.assignment import assign
from recovery_lib.kafka.exceptions import RecordsUnreadable
from recovery_lib.kafka.tail_probe import TailProbe

# Records read back per step when looking for the last id (another writer's records, fences).
SCAN_STEP = 64


@dataclass(frozen=True)
class Released:
    """The last output released in a partition: its batch and sequence number, and the record
    itself (a re-run checks that its row at that number is the same one)."""

    batch: int
    seq: int
    key: bytes | None = field(default=None, compare=False, repr=False)
    value: bytes | None = field(default=None, compare=False, repr=False)

    def skip_for(self, batch_id: int) -> int | None:
        """How many rows of batch ``batch_id`` (numbered from 0) were released already; None:
        all of them."""
        if self.batch > batch_id:
            return None
        if self.batch == batch_id:
            return self.seq + 1
        return 0


class ReleaseBarrier:
    """Reads the last released id of a partition from the topic itself (one per process)."""

    def __init__(self, config: Mapping[str, str], request_timeout_s: float) -> None:
        self._config = dict(config)
        self._timeout_s = request_timeout_s
        self._probe = TailProbe(config, request_timeout_s, request_timeout_s)
        self._consumer = Consumer(
            {
                **self._config,
                "group.id": "recovery-release-barrier",
                "enable.auto.commit": "false",
                "enable.partition.eof": "true",
                "fetch.wait.max.ms": "20",
            }
        )

    def last_released(self, topic: str, partition: int, prefix: str = "") -> Released | None:
        # The scan walks back from the end and stops at the first id it meets, so the log's
        # true start (an extra fetch when the low watermark is above 0) matters only if the
        # scan reaches the watermark without one.
        low = max(self._probe.watermarks(topic, partition)[0], 0)
        end = self._probe.ends([(topic, partition)])[(topic, partition)]
        found = self._scan_back(topic, partition, low, end, prefix)
        if found is None and low > 0:
            first = self._probe.first_offset(topic, partition)
            if first < low:  # tansu's low watermark lay above records still in the log
                found = self._scan_back(topic, partition, first, low, prefix)
        return found

    def _scan_back(
        self, topic: str, partition: int, low: int, upto: int, prefix: str
    ) -> Released | None:
        """The last id of ``prefix`` in [low, upto), read in growing steps from the end."""
        step = SCAN_STEP
        while upto > low:
            start = max(low, upto - step)
            found = self._last_in(topic, partition, start, upto, prefix)
            if found is not None:
                return found
            upto = start
            step *= 4
        return None

    def _last_in(
        self, topic: str, partition: int, start: int, end: int, prefix: str
    ) -> Released | None:
        """The last id of ``prefix`` among offsets [start, end)."""
        assign(self._consumer, [TopicPartition(topic, partition, start)])
        last: Released | None = None
        try:
            position = start
            deadline = time.monotonic() + self._timeout_s
            while position < end:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"release barrier: no answer within {self._timeout_s:.0f} s reading "
                        f"{topic}/{partition} at offset {position}; the broker is overloaded "
                        "or unreachable"
                    )
                # poll(), not consume(n): consume waits for n records or its whole timeout,
                # and a task must not wait for records that are not there.
                msg = self._consumer.poll(0.05)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        position = max(position, msg.offset(), end)
                        continue
                    raise RecordsUnreadable(
                        f"release barrier reading {topic}/{partition}: {err}; check the broker "
                        "is up"
                    )
                if msg.offset() >= end:
                    break
                position = msg.offset() + 1
                released = _released(dict(msg.headers() or ()), prefix)
                if released is not None:
                    last = replace(released, key=msg.key(), value=msg.value())
        finally:
            self._consumer.unassign()
        return last

    def close(self) -> None:
        self._probe.close()
        self._consumer.close()


def _released(headers: Mapping[str, Any], prefix: str) -> Released | None:
    rid = headers.get(ID_HEADER)
    if rid is None or FENCE_HEADER in headers:
        return None
    try:
        rprefix, batch, _, seq = parse_output_id(rid.decode())
    except ValueError:
        return None
    return Released(batch, seq) if rprefix == prefix else None
