"""TailProbe.first_offset: a low watermark above 0 is checked before a reader trusts it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from confluent_kafka import KafkaError

from recovery_lib.kafka.tail_probe import TailProbe


@dataclass
class FakeError:
    value: int

    def code(self) -> int:
        return self.value


@dataclass
class FakeMessage:
    at: int
    err: FakeError | None = None

    def offset(self) -> int:
        return self.at

    def error(self) -> FakeError | None:
        return self.err


@dataclass
class FakeConsumer:
    """Answers ListOffsets with ``low``/``high`` and a fetch with the queued events."""

    low: int
    high: int
    events: list[FakeMessage | None] = field(default_factory=list)
    assigned: list[int] = field(default_factory=list)

    def get_watermark_offsets(self, *_args: object, **_kwargs: object) -> tuple[int, int]:
        return self.low, self.high

    def assign(self, partitions: list) -> None:
        self.assigned.extend(p.offset for p in partitions)

    def unassign(self) -> None:
        pass

    def poll(self, _timeout: float) -> FakeMessage | None:
        return self.events.pop(0) if self.events else None


def probe_with(consumer: FakeConsumer, wait_s: float = 1.0) -> TailProbe:
    probe = TailProbe({"bootstrap.servers": "127.0.0.1:9"}, 1, 1, exact_wait_s=wait_s)
    probe._consumer.close()
    probe._consumer = consumer
    return probe


def test_a_low_watermark_of_zero_is_taken_without_a_fetch() -> None:
    consumer = FakeConsumer(0, 10)
    assert probe_with(consumer).first_offset("t", 0) == 0
    assert consumer.assigned == []


def test_a_wrong_low_watermark_gives_way_to_the_first_record_of_the_log() -> None:
    # tansu answered the batch stored first (offset 120), but the log starts at 0
    consumer = FakeConsumer(120, 400, [None, FakeMessage(0)])
    assert probe_with(consumer).first_offset("t", 0) == 0
    assert consumer.assigned == [0]


def test_records_deleted_below_the_low_watermark_keep_it() -> None:
    gone = FakeMessage(0, FakeError(KafkaError._AUTO_OFFSET_RESET))
    consumer = FakeConsumer(120, 400, [gone])
    assert probe_with(consumer).first_offset("t", 0) == 120


def test_no_answer_is_an_error_naming_the_partition() -> None:
    consumer = FakeConsumer(120, 400, [FakeMessage(0, FakeError(KafkaError._TRANSPORT))])
    with pytest.raises(TimeoutError, match="start of t/3"):
        probe_with(consumer, wait_s=0.2).first_offset("t", 3)
