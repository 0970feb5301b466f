"""LiveRobin's heartbeats: sequence-numbered control records in every input partition.

The generator writes heartbeat h (header ``rl.control`` so jobs drop it, ``rl.hb`` = h) into
every partition of the job's input topics, waits for the broker to acknowledge all of them,
and then appends h's *index entry* (the offset of h in every partition) to a one-partition
index topic. An entry therefore exists only once h is durable everywhere, and the index is in
h order; a heartbeat that failed somewhere is never indexed, and every replica skips it alike.

The replicas never talk to each other or to the generator: each reads the same index and the
same input, and ends every batch at the next indexed heartbeat (liverobin.py). The index saves
each replica from scanning every record's headers to find the heartbeats, and makes a batch of
a job with several sources end at the same heartbeat on all of them.

Sequence numbers are the generator's clock in milliseconds (strictly increasing), so a
restarted generator never reuses one.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recovery_lib.io.offsets import Offsets
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.control_topic import ControlTopic
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged
from recovery_lib.kafka.headers import CONTROL_HEADER, HEARTBEAT_HEADER
from recovery_lib.kafka.tail_probe import TailProbe
from recovery_lib.settings import Settings, get_settings

HELD_POLL_S = 0.05  # how often a generator holding a heartbeat looks at the replicas again


@dataclass(frozen=True)
class HeartbeatEntry:
    seq: int
    at: Offsets  # the heartbeat record's offset in every partition

    def encode(self) -> bytes:
        return json.dumps({"hb": self.seq, "at": self.at}).encode()

    @classmethod
    def decode(cls, value: bytes) -> HeartbeatEntry:
        raw = json.loads(value)
        at = {t: {str(p): int(o) for p, o in parts.items()} for t, parts in raw["at"].items()}
        return cls(int(raw["hb"]), at)


def passed(entry: HeartbeatEntry, ends: Offsets | None) -> bool:
    """Whether a replica whose committed batch ended at ``ends`` ran past heartbeat
    ``entry``: a batch ends right after its heartbeat, in every partition."""
    if ends is None:
        return False
    return all(
        ends.get(topic, {}).get(part, -1) > offset
        for topic, parts in entry.at.items()
        for part, offset in parts.items()
    )


@dataclass
class HeartbeatIndex:
    """The index entries read so far, in heartbeat order."""

    entries: list[HeartbeatEntry] = field(default_factory=list)

    def apply(self, value: bytes | None, headers: Mapping[str, bytes]) -> None:
        if not value:
            return
        entry = HeartbeatEntry.decode(value)
        if not self.entries or entry.seq > self.entries[-1].seq:
            self.entries.append(entry)


class HeartbeatGenerator:
    """Writes a heartbeat every ``period_s`` into every partition of ``topics`` and indexes
    it. ``slow`` (topic, partition) gets its heartbeats ``slow_delay_s`` late: one slow input
    partition (paper 002, Fig. 13) holds every batch back by that much."""

    def __init__(
        self,
        topics: list[str],
        index_topic: str,
        period_s: float,
        kafka: Mapping[str, str] | None = None,
        slow: tuple[str, int] | None = None,
        slow_delay_s: float = 0.0,
        settings: Settings | None = None,
    ) -> None:
        settings = settings or get_settings()
        self._flush_timeout_s = settings.sink_flush_timeout_s
        self._request_timeout_s = settings.kafka_request_timeout_s
        self.topics = topics
        self.index = ControlTopic(index_topic, kafka, settings)
        self.kafka = {**client_config(), **dict(kafka or {})}
        self.period_s = period_s
        self.slow, self.slow_delay_s = slow, slow_delay_s
        self.seq = 0
        self.beats = 0
        self.skipped = 0  # heartbeats not written: no input since the last one
        self.last: HeartbeatEntry | None = None
        # Indexed heartbeats the slowest replica may have to go before the next is written.
        self.ahead = settings.replication_heartbeats_ahead
        # The heartbeats indexed last, oldest first: enough to count the unfinished ones.
        self._recent: deque[HeartbeatEntry] = deque(maxlen=self.ahead + 1)
        self._producer: Any = None
        self._probe: Any = None  # a TailProbe, made on the first idle check
        self._partitions: dict[str, list[int]] | None = None

    def partitions(self) -> dict[str, list[int]]:
        if self._partitions is None:
            from recovery_lib.kafka.admin import TopicAdmin

            admin = TopicAdmin(self.kafka)
            self._partitions = {t: sorted(admin.partitions(t)) for t in self.topics}
        return self._partitions

    def beat(self) -> HeartbeatEntry:
        """One heartbeat into every partition, then its index entry."""
        from confluent_kafka import Producer

        if self._producer is None:
            self._producer = Producer(
                {**self.kafka, "enable.idempotence": "true", "linger.ms": "0"}
            )
        self.seq = max(self.seq + 1, int(time.time() * 1000))
        headers = [(CONTROL_HEADER, b"heartbeat"), (HEARTBEAT_HEADER, str(self.seq).encode())]
        at: Offsets = {}
        errors: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                at.setdefault(msg.topic(), {})[str(msg.partition())] = msg.offset()

        late: list[tuple[str, int]] = []
        for topic, parts in self.partitions().items():
            for part in parts:
                if (topic, part) == self.slow and self.slow_delay_s > 0:
                    late.append((topic, part))
                    continue
                self._producer.produce(topic, b"", None, part, delivered, headers=headers)
        self._producer.flush(self._flush_timeout_s)
        if late:
            time.sleep(self.slow_delay_s)
            for topic, part in late:
                self._producer.produce(topic, b"", None, part, delivered, headers=headers)
            self._producer.flush(self._flush_timeout_s)
        expected = sum(len(p) for p in self.partitions().values())
        if errors or sum(len(p) for p in at.values()) != expected:
            # Not indexed: every replica skips this heartbeat alike.
            raise RecordsNotAcknowledged(
                f"heartbeat {self.seq} not written everywhere: {errors[:3]}; check the broker is up"
            )
        entry = HeartbeatEntry(self.seq, at)
        self.index.append(entry.encode())
        self.indexed(entry)
        return entry

    def indexed(self, entry: HeartbeatEntry) -> None:
        """Count ``entry`` as the newest heartbeat in the index."""
        self.beats += 1
        self.last = entry
        self._recent.append(entry)

    def idle(self) -> bool:
        """Nothing was written to any input partition since the last heartbeat: the next one
        would make both replicas run an empty batch (a few seconds each for a stateful query
        here), and replicas whose empty batch takes longer than a period would never drain.
        A heartbeat is a record batch of its own, so the high watermark is exactly its offset
        + 1 while nothing follows it (tansu's watermark is per record batch, Kafka's exact)."""

        if self.last is None:
            return False
        if self._probe is None:
            timeout = self._request_timeout_s
            self._probe = TailProbe(self.kafka, timeout, timeout)
        try:
            for topic, parts in self.partitions().items():
                for part in parts:
                    at = self.last.at.get(topic, {}).get(str(part))
                    _low, high = self._probe.watermarks(topic, part)
                    if at is None or high != at + 1:
                        return False
        except Exception:  # noqa: BLE001 - when in doubt, beat
            return False
        return True

    def unfinished(self, committed: Sequence[Offsets | None]) -> int:
        """How many of the heartbeats this generator indexed the slowest of ``committed``
        (each replica's committed end offsets; None: it committed nothing) has not passed.
        A batch ends right after its heartbeat, so a replica passed heartbeat h once its
        committed offsets lie past h's in every partition."""
        if not committed:
            return 0
        return max(
            sum(1 for entry in self._recent if not passed(entry, ends)) for ends in committed
        )

    def run(
        self,
        stop: threading.Event,
        on_error: Callable[[Exception], None] | None = None,
        committed: Callable[[], Sequence[Offsets | None]] | None = None,
    ) -> None:
        """Beat every period until ``stop`` is set (a failed beat is reported and skipped).

        With ``committed`` (the committed end offsets of the replicas that should keep up),
        a heartbeat waits until the slowest of them has at most ``ahead - 1`` indexed
        heartbeats to go: every indexed heartbeat ends a batch on both replicas, and a
        micro-batch costs seconds whatever it holds, so replicas whose batch takes longer
        than the period would fall a batch further behind every period and never catch up
        (a fresh query's first batch takes tens of seconds: the replicas of q3 never caught
        up from a 67 s one). Held, the next batch covers the whole wait: batches grow to
        what the replicas can run, and shrink back to one period when they are quick."""
        self.index.create()
        next_at = time.monotonic()
        while not stop.is_set():
            if committed is not None:
                while self.unfinished(committed()) >= self.ahead and not stop.wait(HELD_POLL_S):
                    pass
                if stop.is_set():
                    break
            try:
                if self.idle():
                    self.skipped += 1
                else:
                    self.beat()
            except Exception as exc:  # noqa: BLE001 - the next heartbeat may succeed
                if on_error is not None:
                    on_error(exc)
            next_at = max(next_at + self.period_s, time.monotonic())
            stop.wait(max(0.0, next_at - time.monotonic()))

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5.0)
            self._producer = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None
        self.index.close()
