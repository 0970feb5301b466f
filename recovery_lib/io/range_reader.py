"""Executor side of the source: read ``[start, end)`` of one partition into Arrow batches."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from recovery_lib.io.client_cache import cached
from recovery_lib.io.source import bad_record_error, offsets_unavailable
from recovery_lib.settings import get_settings

if TYPE_CHECKING:
    from recovery_lib.io.source import KafkaRange, SourceOptions

DEAD_LETTER_ID = "rl.id"


def _consumer(config: dict[str, str]) -> Consumer:
    return Consumer(
        {
            **config,
            "group.id": "recovery-range-reader",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "auto.offset.reset": "error",
        }
    )


def _producer(config: dict[str, str]) -> Producer:
    return Producer({**config, "enable.idempotence": "true", "linger.ms": "5"})


def read_range(options: SourceOptions, schema: StructType, rng: KafkaRange) -> Iterator[pa.RecordBatch]:
    settings = get_settings()
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    consumer = cached("consumer:range", options.kafka, _consumer)
    consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
    batch_rows = settings.source_arrow_batch_rows
    as_string = options.value_format == "string"
    keys: list[Any] = []
    values: list[Any] = []
    offsets: list[int] = []
    stamps: list[int] = []
    headers: list[Any] = []
    next_offset = rng.start
    last_progress = time.monotonic()
    try:
        while next_offset < rng.end:
            msgs = consumer.consume(num_messages=min(batch_rows, rng.end - next_offset), timeout=0.5)
            if not msgs:
                # Control records (transaction markers) occupy offsets but are never delivered.
                position = consumer.position([TopicPartition(rng.topic, rng.partition)])[0].offset
                if position >= rng.end:
                    break
                if time.monotonic() - last_progress > settings.source_poll_timeout_s:
                    raise offsets_unavailable(rng, next_offset, settings.source_poll_timeout_s)
                continue
            last_progress = time.monotonic()
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= rng.end:
                            next_offset = rng.end
                        continue
                    if err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                        raise offsets_unavailable(rng, next_offset, 0)
                    raise RuntimeError(f"Kafka error reading {rng.topic}/{rng.partition}: {err}")
                off = msg.offset()
                if off >= rng.end:
                    next_offset = rng.end
                    break
                next_offset = off + 1
                value = msg.value()
                if as_string and value is not None:
                    try:
                        value = value.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        _bad_record(options, rng.topic, rng.partition, off, msg, str(exc))
                        continue
                keys.append(msg.key())
                values.append(value)
                offsets.append(off)
                stamps.append(msg.timestamp()[1] * 1000)
                hdrs = msg.headers()
                headers.append([{"key": k, "value": v} for k, v in hdrs] if hdrs else None)
            if len(offsets) >= batch_rows:
                yield _record_batch(arrow_schema, rng, keys, values, offsets, stamps, headers)
                keys, values, offsets, stamps, headers = [], [], [], [], []
        if offsets:
            yield _record_batch(arrow_schema, rng, keys, values, offsets, stamps, headers)
    finally:
        consumer.unassign()


def _record_batch(
    arrow_schema: pa.Schema,
    rng: KafkaRange,
    keys: list[Any],
    values: list[Any],
    offsets: list[int],
    stamps: list[int],
    headers: list[Any],
) -> pa.RecordBatch:
    n = len(offsets)
    types = [f.type for f in arrow_schema]
    arrays = [
        pa.array(keys, types[0]),
        pa.array(values, types[1]),
        pa.array([rng.topic] * n, types[2]),
        pa.array([rng.partition] * n, types[3]),
        pa.array(offsets, types[4]),
        pa.array(stamps, pa.int64()).cast(types[5]),
        pa.array(headers, types[6]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


def _bad_record(options: SourceOptions, topic: str, partition: int, offset: int, msg: Any, reason: str) -> None:
    if options.on_bad_record == "fail":
        raise bad_record_error(topic, partition, offset, reason)
    producer = cached("producer:deadletter", options.kafka, _producer)
    position = f"{topic}/{partition}@{offset}"
    producer.produce(
        options.dead_letter_topic,
        key=msg.key(),
        value=msg.value(),
        headers=[
            (DEAD_LETTER_ID, f"dlq:{position}".encode()),
            ("rl.reason", f"not valid for valueFormat={options.value_format}: {reason}".encode()),
            ("rl.source", position.encode()),
        ],
    )
    producer.flush(get_settings().sink_flush_timeout_s)
