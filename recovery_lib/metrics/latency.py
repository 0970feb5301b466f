"""Latency and output throughput, measured at the sink.

A consumer thread follows a query's output topic. For every record: visible_ms = the record's
timestamp at the sink (set when the sink produced it; for a two_phase sink, its batch's commit
record's), ingest_ms = the ``rl.ingest_ms`` header
(ingest time of the newest input it depends on), latency = visible - ingest. Every record is
counted in ``throughput``; up to ``max_samples_per_s`` per second go to ``latency_samples``.
A long-lived follower (a daemon's /metrics) gives ``window_s``: it keeps only that many seconds
of samples, counts and ids, so that its memory does not grow with the job's age.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any, Self

from confluent_kafka import Consumer, TopicPartition

from recovery_lib.io.sinks.commit_gate import CommitGate
from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.io.sinks.fences import FENCE_HEADER
from recovery_lib.io.sinks.ids import CONTROL_HEADER, ID_HEADER
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.headers import INGEST_HEADER
from recovery_lib.metrics.store import MetricsStore


class OutputFollower:
    """A daemon thread that follows a job's output until stopped (``_run`` checks
    ``_stop``); ``samples`` and ``per_second`` are what the followers share."""

    samples: list[tuple[int, int]]  # (visible_ms, latency_ms)
    per_second: dict[int, int]  # outputs per second of visibility

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def stop(self) -> None:
        """Safe to call when never started."""
        self._stop.set()
        if self.started:
            self._thread.join(timeout=15)

    def _run(self) -> None:
        raise NotImplementedError


class LatencyCollector(OutputFollower):
    def __init__(
        self,
        topic: str,
        run_id: str,
        store: MetricsStore | None,
        config: Mapping[str, str] | None = None,
        max_samples_per_s: int = 500,
        from_beginning: bool = True,
        gate: CommitGate | None = None,
        window_s: float | None = None,
    ) -> None:
        self.topic = topic
        self.run_id = run_id
        self.store = store
        self.config = dict(config) if config is not None else client_config()
        self.max_samples_per_s = max_samples_per_s
        self.from_beginning = from_beginning
        # two_phase sinks: records count when their batch's commit record makes them visible.
        self.gate = gate
        self.samples: list[tuple[int, int]] = []  # (visible_ms, latency_ms), all of them
        self.per_second: dict[int, int] = defaultdict(int)
        self.seen_ids: dict[bytes, int] = {}  # id -> the second it was seen
        self.duplicates = 0
        self.window_s = window_s
        self._trimmed_s = 0
        self._newest_ms = 0
        super().__init__(f"latency-{topic}")

    def _run(self) -> None:
        partitions = TopicAdmin(self.config).partitions(self.topic)
        consumer = Consumer(
            {
                **self.config,
                "group.id": f"latency-{self.run_id}",
                "enable.auto.commit": "false",
                "fetch.wait.max.ms": "50",
            }
        )
        start = 0 if self.from_beginning else -1  # OFFSET_END
        consumer.assign([TopicPartition(self.topic, p, start) for p in partitions])
        pending_samples: list[tuple] = []
        pending_counts: dict[int, int] = defaultdict(int)
        sampled_in_second: dict[int, int] = defaultdict(int)
        try:
            while not self._stop.is_set():
                msgs = consumer.consume(num_messages=5000, timeout=0.2)
                for headers, visible in self._visible(msgs):
                    if FENCE_HEADER in headers or CONTROL_HEADER in headers:  # not outputs
                        continue
                    rid = headers.get(ID_HEADER)
                    if rid is not None:
                        if rid in self.seen_ids:  # a replayed copy: not a new output
                            self.duplicates += 1
                            continue
                        self.seen_ids[rid] = visible // 1000
                    ingest = headers.get(INGEST_HEADER)
                    second = visible // 1000
                    self._newest_ms = max(self._newest_ms, visible)
                    pending_counts[second] += 1
                    self.per_second[second] += 1
                    if ingest is None:
                        continue
                    latency = visible - int(ingest)
                    self.samples.append((visible, latency))
                    if sampled_in_second[second] < self.max_samples_per_s:
                        sampled_in_second[second] += 1
                        pending_samples.append(
                            (
                                self.run_id,
                                visible,
                                int(ingest),
                                latency,
                                rid.decode() if rid else None,
                            )
                        )
                self._trim()
                if self.store is not None and (pending_samples or pending_counts):
                    self.store.add("latency_samples", pending_samples)
                    self.store.add(
                        "throughput", [(self.run_id, s, 0, n) for s, n in pending_counts.items()]
                    )
                    pending_samples, pending_counts = [], defaultdict(int)
        finally:
            consumer.close()

    def _trim(self) -> None:
        """Forget what is older than ``window_s`` (at most once a second)."""
        if self.window_s is None:
            return
        newest_s = self._newest_ms // 1000
        if newest_s <= self._trimmed_s:
            return
        self._trimmed_s = newest_s
        oldest_ms = (newest_s - self.window_s) * 1000
        keep = next((i for i, s in enumerate(self.samples) if s[0] >= oldest_ms), len(self.samples))
        del self.samples[:keep]
        for second in [s for s in self.per_second if s * 1000 < oldest_ms]:
            del self.per_second[second]
        stale = []  # ids arrive in about time order: the old ones are at the dict's front
        for rid, second in self.seen_ids.items():
            if second * 1000 >= oldest_ms:
                break
            stale.append(rid)
        for rid in stale:
            del self.seen_ids[rid]

    def _visible(self, msgs: list[Any]) -> Iterator[tuple[dict[str, bytes], int]]:
        """(headers, visible_ms) of the records that became visible with ``msgs``."""
        for msg in msgs:
            if msg.error() is not None:
                continue
            if self.gate is None:
                yield dict(msg.headers() or ()), msg.timestamp()[1]
                continue
            headers = tuple(msg.headers() or ())
            rid = dict(headers).get(ID_HEADER)
            record = SinkRecord(
                id=rid.decode() if rid is not None else None,
                epoch=None,
                key=None,
                value=msg.value(),
                topic=msg.topic(),
                partition=msg.partition(),
                offset=msg.offset(),
                headers=headers,
                timestamp_ms=msg.timestamp()[1],
            )
            for released in self.gate.offer(record):
                yield dict(released.headers), released.timestamp_ms
