"""A one-partition topic that readers fold in offset order: the KaZoo order log, the LiveRobin
heartbeat index, the determinant log (recovery_lib/causal/log.py).

One partition gives every reader the same total order; the readers never talk to each other.
A reader keeps one consumer and one tail probe and reads only what is new since its last fold.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.assignment import assign, forget
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged, RecordsUnreadable
from recovery_lib.kafka.outage import ride_out
from recovery_lib.settings import Settings, get_settings

# Every control topic reader of this process, so that one at exit (or before a test's broker
# stops) closes its clients: a reader nobody closed would retry a stopped broker for ever.
_OPEN: weakref.WeakSet[ControlTopic] = weakref.WeakSet()


def close_open_topics() -> None:
    for topic in list(_OPEN):
        topic.close()


ApplyRecord = Callable[[bytes | None, dict[str, bytes]], None]
ApplyMessage = Callable[[Any], None]  # a confluent_kafka Message (key, value, offset, headers)


class ControlTopic:
    """One control topic, its writer and its folding reader.

    Args:
        topic: The one-partition topic.
        kafka: Client settings (the source's ``kafka.*`` options); the project's broker if
            they name none.
        settings: Where the timeouts come from (the environment's if None); only they are
            kept, so a pickled reader carries the driver's timeouts into Spark's workers.
    """

    def __init__(
        self, topic: str, kafka: Mapping[str, str] | None = None, settings: Settings | None = None
    ) -> None:
        settings = settings or get_settings()
        self._flush_timeout_s = settings.sink_flush_timeout_s
        self._request_timeout_s = settings.kafka_request_timeout_s
        self._read_timeout_s = settings.source_poll_timeout_s
        self.topic = topic
        self.kafka = dict(kafka or {})
        if "bootstrap.servers" not in self.kafka:  # a source's options usually name it
            from recovery_lib.kafka.clients import client_config

            self.kafka = {**client_config(), **self.kafka}
        self._consumer: Any = None
        self._producer: Any = None
        self._probe: Any = None
        self.position = 0  # next offset to fold
        _OPEN.add(self)

    def create(self) -> None:
        TopicAdmin(self.kafka).create(self.topic, partitions=1)

    def append(self, value: bytes, headers: list[tuple[str, bytes]] | None = None) -> int:
        """Write one record and wait for the broker's acknowledgement; returns its offset."""
        from confluent_kafka import KafkaException, Producer

        if self._producer is None:
            self._producer = Producer({**self.kafka, "enable.idempotence": "true"})
        result: dict[str, Any] = {}

        def delivered(err: Any, msg: Any) -> None:
            result["err"], result["offset"] = err, (msg.offset() if msg is not None else None)

        self._producer.produce(self.topic, value, None, 0, delivered, headers=headers or [])
        self._producer.flush(self._flush_timeout_s)
        if "err" not in result:
            raise RecordsNotAcknowledged(
                f"{self.topic}: a control record was not acknowledged in time; check the broker "
                "is up"
            )
        if result["err"] is not None:
            raise KafkaException(result["err"])
        return int(result["offset"])

    def low_watermark(self) -> int:
        """The first offset still in the topic (records below it were deleted)."""
        self.end()  # opens the probe
        return self._probe.first_offset(self.topic, 0)

    def end(self) -> int:
        """The true end offset (tansu's high watermark may lag within a record batch). A broker
        that stalls or restarts is waited for, up to the outage budget (kafka/outage.py):
        every replica of a set folds the same topic, so failing here took them all down."""
        if self._probe is None:
            from recovery_lib.kafka.tail_probe import TailProbe

            timeout = self._request_timeout_s
            self._probe = TailProbe(self.kafka, timeout, timeout)
        return ride_out(
            lambda: int(self._probe.ends([(self.topic, 0)])[(self.topic, 0)]),
            f"control topic {self.topic}: its end",
        )

    def fold(self, apply: ApplyRecord, until: int | None = None) -> int:
        """Apply every record from the last position up to ``until`` (default: the current
        end) in offset order; returns the new position."""

        def record(msg: Any) -> None:
            apply(msg.value(), {k: (v or b"") for k, v in msg.headers() or ()})

        return self.fold_messages(record, until)

    def fold_messages(self, apply: ApplyMessage, until: int | None = None) -> int:
        """As ``fold``, handing ``apply`` each whole message (its key too)."""
        from confluent_kafka import TopicPartition

        target = self.end() if until is None else until
        if target <= self.position:
            return self.position
        consumer = self._reader()
        assign(consumer, [TopicPartition(self.topic, 0, self.position)])
        deadline = time.monotonic() + self._read_timeout_s
        while self.position < target:
            msg = consumer.poll(0.05)
            if msg is None or msg.error() is not None:
                if time.monotonic() > deadline:
                    raise RecordsUnreadable(
                        f"{self.topic}: offsets {self.position}..{target} not readable; check "
                        "the broker is up and kept them"
                    )
                continue
            if msg.offset() < self.position:
                continue
            apply(msg)
            self.position = msg.offset() + 1
        consumer.unassign()
        return self.position

    def _reader(self) -> Any:
        from confluent_kafka import Consumer

        if self._consumer is None:
            self._consumer = Consumer(
                {
                    **self.kafka,
                    "group.id": f"rl-control-{self.topic}",
                    "enable.auto.commit": "false",
                    "enable.partition.eof": "false",
                    "fetch.wait.max.ms": "10",
                }
            )
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            forget(self._consumer)
            self._consumer.close()
            self._consumer = None
        if self._producer is not None:
            self._producer.flush(1.0)
            self._producer = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    def __getstate__(self) -> dict[str, Any]:  # Spark pickles the source reader
        state = dict(self.__dict__)
        state["_consumer"] = state["_producer"] = state["_probe"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        _OPEN.add(self)
