"""A range whose records the broker does not gather within the short fetch wait is read on
with the broker's usual wait (seen in a 2-hour soak on tansu), not failed after the outage
budget: fake consumers stand for the two fetch settings."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from recovery_lib.io import range_reader
from recovery_lib.io.source_options import KafkaRange, SourceOptions
from recovery_lib.settings import reload_settings

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("headers", ArrayType(HEADER)),
    ]
)


class FakeMessage:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset

    def error(self) -> None:
        return None

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v"

    def timestamp(self) -> tuple[int, int]:
        return (1, 1000)

    def headers(self) -> None:
        return None


class FakeConsumer:
    def __init__(self, delivers: bool) -> None:
        self.delivers = delivers
        self.at: int | None = None
        self.calls = 0

    def assign(self, parts: list[TopicPartition]) -> None:
        self.at = parts[0].offset

    def unassign(self) -> None:
        self.at = None

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        self.calls += 1
        if not self.delivers or self.at is None:
            return []
        out = [FakeMessage(self.at + i) for i in range(num_messages)]
        self.at += num_messages
        return out

    def position(self, parts: list[TopicPartition]) -> list[SimpleNamespace]:
        return [SimpleNamespace(offset=self.at or 0)]


@pytest.fixture
def short_fallback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Readers give the short fetch wait 0.05 s (a setting) instead of half a second."""
    monkeypatch.setenv("RECOVERY_KAFKA_SLOW_FETCH_AFTER_S", "0.05")
    reload_settings()
    yield
    monkeypatch.delenv("RECOVERY_KAFKA_SLOW_FETCH_AFTER_S")
    reload_settings()


def test_a_range_the_short_wait_never_gets_is_read_with_the_usual_wait(
    monkeypatch: pytest.MonkeyPatch, short_fallback: None
) -> None:
    fast, slow = FakeConsumer(delivers=False), FakeConsumer(delivers=True)
    consumers = {"consumer:range": fast, "consumer:range-slow": slow}
    monkeypatch.setattr(range_reader, "cached", lambda name, _cfg, _make: consumers[name])
    options = SourceOptions.parse({"kafka.bootstrap.servers": "x:1", "subscribe": "t"})
    batches = list(range_reader.read_range(options, SCHEMA, KafkaRange("t", 1, 7158, 7162)))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [7158, 7159, 7160, 7161]
    assert fast.calls >= 1 and slow.calls >= 1  # tried short, then read with the usual wait
    assert range_reader.SLOW_FETCHES["fetch.wait.max.ms"] == "500"


class RewindingConsumer(FakeConsumer):
    """Hands out its fetches as scripted: [(first offset, count), ...], e.g. a stale fetch of
    an earlier assignment followed by the fresh one (librdkafka after a broker restart)."""

    def __init__(self, script: list[tuple[int, int]]) -> None:
        super().__init__(delivers=True)
        self.script = list(script)

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        self.calls += 1
        if not self.script:
            return []
        first, count = self.script.pop(0)
        return [FakeMessage(first + i) for i in range(count)]


@pytest.mark.parametrize(
    "script",
    [
        [(100, 30), (100, 50)],  # a fetch handed out twice
        [(100, 10), (105, 10), (115, 35)],  # a rewind overlapping what was read
        [(100, 20), (110, 5), (120, 30)],  # an older span inside one consume: dropped whole
    ],
    ids=["repeated-fetch", "overlap", "inside"],
)
def test_a_range_gives_each_offset_once_whatever_the_consumer_hands_out(
    monkeypatch: pytest.MonkeyPatch, script: list[tuple[int, int]]
) -> None:
    """Rows of a range are numbered by the release sink (output ids): a record read twice
    would shift every later row's id, and a re-run would skip the wrong rows (issue 54's
    prices standby run on Apache Kafka: 6,393 outputs lost and as many duplicated)."""
    consumer = RewindingConsumer(script)
    monkeypatch.setattr(range_reader, "cached", lambda name, _cfg, _make: consumer)
    options = SourceOptions.parse({"kafka.bootstrap.servers": "x:1", "subscribe": "t"})
    batches = list(range_reader.read_range(options, SCHEMA, KafkaRange("t", 0, 100, 150)))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == sorted(set(offsets)), "an offset twice, or out of order"
    assert offsets == list(range(100, 150))
