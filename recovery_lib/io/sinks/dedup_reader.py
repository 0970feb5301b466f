"""Read a sink topic and yield each output id once (first copy wins).

This is the consumer side of the ``dedup`` sink mode: a re-executed batch writes records with
the same ids, and the reader drops the later copies. It reads ``[low, end)`` of every
partition as of the moment it starts, using the broker-independent tail probe. Fencing
(standby takeover): fence records are not yielded, nor records of an older epoch written after
a fence (see recovery_lib/ha/fencing.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition

from recovery_lib.io.sinks.fences import FENCE_HEADER, FenceFilter
from recovery_lib.io.sinks.ids import CONTROL_HEADER, EPOCH_HEADER, ID_HEADER
from recovery_lib.io.tail_probe import TailProbe
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import RANGE_FETCHES, client_config
from recovery_lib.settings import get_settings


@dataclass(frozen=True)
class SinkRecord:
    id: str | None
    epoch: int | None
    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int = 0


def read_topic(
    topic: str,
    config: Mapping[str, str] | None = None,
    start: Mapping[int, int] | None = None,
    fence: FenceFilter | None = None,
    control: bool = False,
) -> Iterator[SinkRecord]:
    """Every record of ``topic`` present when called, partition by partition (from the offsets
    in ``start`` where given, else from the log start), without fence records and fenced ones
    (counted in ``fence.dropped`` when a filter is passed), and without control records (CEC
    footprints) unless ``control``."""
    fence = fence if fence is not None else FenceFilter()
    config = dict(config) if config is not None else client_config()
    partitions, lows, ends = _bounds(topic, config, start)
    consumer = Consumer(
        {
            **config,
            "group.id": "recovery-dedup-reader",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
        }
    )
    try:
        for part in partitions:
            end = ends[part]
            if end <= lows[part]:
                continue
            consumer.assign([TopicPartition(topic, part, lows[part])])
            done = False
            while not done:
                for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            done = done or msg.offset() >= end
                            continue
                        raise RuntimeError(f"reading {topic}/{part}: {err}")
                    if msg.offset() >= end:
                        done = True
                        break
                    headers = tuple(msg.headers() or ())
                    hmap = dict(headers)
                    rid = hmap.get(ID_HEADER)
                    epoch_raw = hmap.get(EPOCH_HEADER)
                    epoch = int(epoch_raw) if epoch_raw is not None else None
                    if not fence.accept(topic, part, epoch, hmap) or (
                        not control and CONTROL_HEADER in hmap
                    ):
                        if msg.offset() + 1 >= end:
                            done = True
                        continue
                    yield SinkRecord(
                        id=rid.decode() if rid is not None else None,
                        epoch=epoch,
                        key=msg.key(),
                        value=msg.value(),
                        topic=topic,
                        partition=part,
                        offset=msg.offset(),
                        headers=headers,
                        timestamp_ms=msg.timestamp()[1],
                    )
                    if msg.offset() + 1 >= end:
                        done = True
            consumer.unassign()
    finally:
        consumer.close()


def _bounds(
    topic: str, config: dict[str, str], start: Mapping[int, int] | None
) -> tuple[list[int], dict[int, int], dict[int, int]]:
    """The topic's partitions and, per partition, the first offset to read and the end."""
    settings = get_settings()
    partitions = TopicAdmin(config).partitions(topic)
    probe = TailProbe(config, settings.kafka_request_timeout_s, settings.source_end_probe_cap_s)
    try:
        ends = probe.ends((topic, p) for p in partitions)
        lows = {p: probe.first_offset(topic, p) for p in partitions}
        for part, offset in (start or {}).items():
            if part in lows:
                lows[part] = max(lows[part], offset)
    finally:
        probe.close()
    return partitions, lows, {p: ends[(topic, p)] for p in partitions}


# The columns of ``read_topic_batches``: what the oracle keeps of a sink record.
SINK_BATCH_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
    ]
)


def read_topic_batches(
    topic: str,
    config: Mapping[str, str] | None = None,
    rows: int = 100_000,
    fence: FenceFilter | None = None,
) -> Iterator[pa.RecordBatch]:
    """What ``read_topic`` yields, as Arrow record batches of at most ``rows`` records
    (``SINK_BATCH_SCHEMA``), for readers of millions of records: no object per record."""
    fence = fence if fence is not None else FenceFilter()
    config = dict(config) if config is not None else client_config()
    partitions, lows, ends = _bounds(topic, config, None)
    consumer = Consumer(
        {
            **config,
            **RANGE_FETCHES,
            "group.id": "recovery-batch-reader",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
        }
    )
    ids: list[str | None] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    parts: list[int] = []
    offsets: list[int] = []

    def batch() -> pa.RecordBatch:
        out = pa.RecordBatch.from_arrays(
            [
                pa.array(ids, pa.string()),
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array(parts, pa.int32()),
                pa.array(offsets, pa.int64()),
            ],
            schema=SINK_BATCH_SCHEMA,
        )
        for column in (ids, keys, values, parts, offsets):
            column.clear()
        return out

    try:
        for part in partitions:
            end = ends[part]
            if end <= lows[part]:
                continue
            consumer.assign([TopicPartition(topic, part, lows[part])])
            position = lows[part]
            while position < end:
                for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                    if msg.error() is not None:
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            if msg.offset() >= end:
                                position = end
                            continue
                        raise RuntimeError(f"reading {topic}/{part}: {msg.error()}")
                    offset = msg.offset()
                    if offset >= end:
                        position = end
                        break
                    position = offset + 1
                    rid = None
                    headers = msg.headers()
                    if headers:
                        hmap = dict(headers)
                        if CONTROL_HEADER in hmap:
                            continue
                        if FENCE_HEADER in hmap or EPOCH_HEADER in hmap:
                            epoch_raw = hmap.get(EPOCH_HEADER)
                            epoch = int(epoch_raw) if epoch_raw is not None else None
                            if not fence.accept(topic, part, epoch, hmap):
                                continue
                        raw_id = hmap.get(ID_HEADER)
                        rid = raw_id.decode() if raw_id is not None else None
                    ids.append(rid)
                    keys.append(msg.key())
                    values.append(msg.value())
                    parts.append(part)
                    offsets.append(offset)
                    if len(ids) >= rows:
                        yield batch()
            consumer.unassign()
        if ids:
            yield batch()
    finally:
        consumer.close()


class DedupReader:
    """Yields each output id once; records without an id pass through unchanged."""

    def __init__(self, topic: str, config: Mapping[str, str] | None = None) -> None:
        self.topic = topic
        self.config = config
        self.duplicates = 0
        self.fence = FenceFilter()  # .dropped: zombie records refused
        self._seen: set[str] = set()

    def __iter__(self) -> Iterator[SinkRecord]:
        for record in read_topic(self.topic, self.config, fence=self.fence):
            if record.id is not None:
                if record.id in self._seen:
                    self.duplicates += 1
                    continue
                self._seen.add(record.id)
            yield record
