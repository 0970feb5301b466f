"""True end offsets of partitions, also on brokers whose high watermark is per record batch.

tansu reports the high watermark as the first offset of the last record batch + 1. Fetching
from ``high - 1`` and taking the last offset returned + 1 gives the true end; the answer for a
given high watermark never changes, so it is cached and a quiet partition costs one
ListOffsets request. On a broker with exact watermarks (Apache Kafka) the fetch returns the
record at ``high - 1`` and the result equals ``high``.

The start of the log has the opposite problem: tansu's memory storage answers
ListOffsets(earliest) with the record batch stored first in wall-clock time, and two producers
writing a partition at once can store a later batch first; a reader starting there skips the
records below it without an error. ``first_offset`` checks a low watermark above 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer, KafkaError, TopicPartition

from recovery_lib.kafka.assignment import assign, forget
from recovery_lib.kafka.clients import SLOW_FETCHES
from recovery_lib.settings import Settings, get_settings


class TailProbe:
    def __init__(
        self,
        config: Mapping[str, str],
        request_timeout_s: float,
        cap_s: float,
        exact_wait_s: float | None = None,
        settings: Settings | None = None,
    ) -> None:
        # An exact probe's short-wait try lasts as long as a range reader's (kafka/clients.py).
        self._slow_fetch_after_s = (settings or get_settings()).kafka_slow_fetch_after_s
        self._config = {
            **config,
            "group.id": "recovery-tail-probe",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "fetch.wait.max.ms": "20",
            # first_offset's fetch from 0 must fail when 0 is gone, not jump to the end.
            "auto.offset.reset": "error",
        }
        self._consumer = Consumer(self._config)
        # An exact probe a short fetch wait cannot answer asks again with the broker's usual
        # wait (tansu may need longer to gather older records: kafka/clients.py).
        self._slow: Consumer | None = None
        self._timeout_s = request_timeout_s
        self._cap_s = cap_s
        # How long an exact answer may take: by default a request timeout, at least the cap.
        self._exact_wait_s = max(cap_s, request_timeout_s) if exact_wait_s is None else exact_wait_s
        self._cache: dict[tuple[str, int], tuple[int, int]] = {}  # (topic, part) -> (high, end)

    @classmethod
    def from_settings(
        cls, config: Mapping[str, str], settings: Settings | None = None
    ) -> TailProbe:
        """A probe with the settings' request timeout and end-probe cap (the environment's
        settings if None): what the source, the readers and the supervisors ask with."""
        settings = settings or get_settings()
        return cls(
            config,
            settings.kafka_request_timeout_s,
            settings.source_end_probe_cap_s,
            settings=settings,
        )

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return self._consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=self._timeout_s, cached=False
        )

    def first_offset(self, topic: str, partition: int) -> int:
        """The first offset in the log. A low watermark above 0 is checked by a fetch from 0:
        the log's first record comes back (the watermark was wrong, see the module docstring),
        or the fetch is out of range (retention deleted the records below it)."""
        low, high = self.watermarks(topic, partition)
        if low <= 0 or high <= low:
            return max(low, 0)
        assign(self._consumer, [TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + self._exact_wait_s
        try:
            while time.monotonic() < deadline:
                msg = self._consumer.poll(0.05)
                if msg is None:
                    continue
                err = msg.error()
                if err is None:
                    return min(msg.offset(), low)
                if err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError._PARTITION_EOF):
                    return low
        finally:
            self._consumer.unassign()
        raise TimeoutError(
            f"no answer within {self._exact_wait_s:.0f} s when reading the start of "
            f"{topic}/{partition}: the broker is overloaded or unreachable (raise "
            "RECOVERY_KAFKA_REQUEST_TIMEOUT_S if it is only slow)"
        )

    def ends(
        self, partitions: Iterable[tuple[str, int]], exact: bool = True
    ) -> dict[tuple[str, int], int]:
        """End offset per partition. ``exact``: wait up to ``exact_wait_s`` for every
        partition's answer and raise if one does not come (readers that must see every
        record, the available-now target); otherwise give up after the probe cap with the
        high watermark, a lower bound (a streaming batch that must not stall: the next
        batch picks up the rest)."""
        result: dict[tuple[str, int], int] = {}
        to_probe: dict[tuple[str, int], int] = {}
        for tp in partitions:
            _, high = self.watermarks(*tp)
            cached = self._cache.get(tp)
            if high <= 0:
                result[tp] = 0
            elif cached is not None and cached[0] == high:
                result[tp] = cached[1]
            else:
                to_probe[tp] = high
        if to_probe:
            result.update(self._probe(to_probe, exact))
        return result

    def _probe(self, highs: dict[tuple[str, int], int], exact: bool) -> dict[tuple[str, int], int]:
        ends = dict(highs)  # a safe lower bound if a partition does not answer in time
        pending = set(highs)
        wait_s = self._exact_wait_s if exact else self._cap_s
        first_s = min(wait_s, self._slow_fetch_after_s) if exact else wait_s
        self._probe_with(self._consumer, highs, ends, pending, first_s)
        if exact and pending:
            if self._slow is None:
                self._slow = Consumer({**self._config, **SLOW_FETCHES})
            self._probe_with(self._slow, {tp: highs[tp] for tp in pending}, ends, pending, wait_s)
        if exact and pending:
            names = ", ".join(f"{t}/{p}" for t, p in sorted(pending))
            raise TimeoutError(
                f"no answer within {wait_s:.0f} s when reading the end of {names}: the broker "
                "is overloaded or unreachable (raise RECOVERY_KAFKA_REQUEST_TIMEOUT_S if it "
                "is only slow)"
            )
        for tp, high in highs.items():
            if tp not in pending:
                self._cache[tp] = (high, ends[tp])
        return ends

    @staticmethod
    def _probe_with(
        consumer: Consumer,
        highs: dict[tuple[str, int], int],
        ends: dict[tuple[str, int], int],
        pending: set[tuple[str, int]],
        wait_s: float,
    ) -> None:
        """Read each partition's last record(s) with ``consumer``: ``ends`` raised to what
        answered, the answered partitions removed from ``pending``."""
        assign(consumer, [TopicPartition(t, p, high - 1) for (t, p), high in highs.items()])
        deadline = time.monotonic() + wait_s
        try:
            answered: set[tuple[str, int]] = set()
            while pending and time.monotonic() < deadline:
                # poll() returns as soon as one event is there; consume(n) would wait for n.
                # A fetched record batch is queued whole, so once a partition answered, draining
                # the local queue (timeout 0) yields the rest of its batch.
                msg = consumer.poll(0 if answered else 0.05)
                if msg is None:
                    pending -= answered
                    answered.clear()
                    continue
                tp = (msg.topic(), msg.partition())
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        # The EOF offset is where the fetch position stopped: the true end,
                        # past any transaction control records.
                        ends[tp] = max(ends[tp], msg.offset())
                        pending.discard(tp)
                    continue
                ends[tp] = max(ends[tp], msg.offset() + 1)
                answered.add(tp)
        finally:
            consumer.unassign()

    def oldest_timestamp(self, positions: Mapping[tuple[str, int], int]) -> int | None:
        """The earliest timestamp (ms) of the records at these positions (a reader's next
        offset per partition): how old the input waiting to be read is. Partitions that do not
        answer within the probe cap are left out; None when none answered."""
        if not positions:
            return None
        assign(self._consumer, [TopicPartition(t, p, off) for (t, p), off in positions.items()])
        pending = set(positions)
        stamps: list[int] = []
        deadline = time.monotonic() + self._cap_s
        try:
            while pending and time.monotonic() < deadline:
                msg = self._consumer.poll(0.05)
                if msg is None:
                    continue
                tp = (msg.topic(), msg.partition())
                if tp not in pending:
                    continue
                pending.discard(tp)  # its first answer: the record at the position, or EOF
                if msg.error() is None:
                    stamps.append(msg.timestamp()[1])
        finally:
            self._consumer.unassign()
        return min(stamps) if stamps else None

    def close(self) -> None:
        forget(self._consumer)
        self._consumer.close()
        if self._slow is not None:
            forget(self._slow)
            self._slow.close()
