"""Executor side of the source: read ``[start, end)`` of one partition into Arrow batches."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from recovery_lib.io.client_cache import cached
from recovery_lib.io.exceptions import (
    IOLayerError,
    OffsetsUnavailable,
    SinkDeliveryError,
    bad_record_error,
    input_behind_checkpoint,
    offsets_unavailable,
)
from recovery_lib.io.parked import parked_in
from recovery_lib.kafka.assignment import assign
from recovery_lib.kafka.clients import RANGE_FETCHES, SLOW_FETCHES
from recovery_lib.kafka.headers import ID_HEADER, REASON_HEADER, SOURCE_POSITION_HEADER
from recovery_lib.settings import get_settings

if TYPE_CHECKING:
    from recovery_lib.io.source_options import KafkaRange, SourceOptions

log = logging.getLogger(__name__)


def _consumer(config: dict[str, str], fetches: dict[str, str] = RANGE_FETCHES) -> Consumer:
    return Consumer(
        {
            **config,
            "group.id": "recovery-range-reader",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "auto.offset.reset": "error",
            **fetches,
        }
    )


def _slow_consumer(config: dict[str, str]) -> Consumer:
    return _consumer(config, SLOW_FETCHES)


def _producer(config: dict[str, str]) -> Producer:
    return Producer({**config, "enable.idempotence": "true", "linger.ms": "5"})


def read_range(
    options: SourceOptions, schema: StructType, rng: KafkaRange
) -> Iterator[pa.RecordBatch]:
    settings = get_settings()
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    consumer = cached("consumer:range", options.kafka, _consumer)
    assign(consumer, [TopicPartition(rng.topic, rng.partition, rng.start)])
    batch_rows = settings.source_arrow_batch_rows
    as_string = options.value_format == "string"
    keys: list[Any] = []
    values: list[Any] = []
    offsets: list[int] = []
    stamps: list[int] = []
    headers: list[Any] = []
    next_offset = rng.start
    last_progress = time.monotonic()
    slow = False  # switched to the broker's usual fetch wait (kafka_slow_fetch_after_s)
    # Parked records (a poison record found by job/poison.py) go to the dead letters instead.
    parked = parked_in(options.parked, rng.topic, rng.partition, rng.start, rng.end)
    try:
        while next_offset < rng.end:
            msgs = consumer.consume(
                num_messages=min(batch_rows, rng.end - next_offset), timeout=0.5
            )
            if not msgs:
                # Control records (transaction markers) occupy offsets but are never delivered.
                position = consumer.position([TopicPartition(rng.topic, rng.partition)])[0].offset
                if position >= rng.end:
                    break
                # A broker that stalls is waited for up to the outage budget.
                patience = max(settings.source_poll_timeout_s, settings.kafka_outage_budget_s)
                waited = time.monotonic() - last_progress
                if waited > patience:
                    raise offsets_unavailable(rng, next_offset, patience)
                if waited > settings.kafka_slow_fetch_after_s and not slow:
                    log.warning(
                        "%s/%d: nothing from offset %d in %.1f s with short fetch waits; "
                        "reading on with the broker's usual wait",
                        rng.topic, rng.partition, next_offset, waited,
                    )  # fmt: skip
                    consumer.unassign()
                    consumer = cached("consumer:range-slow", options.kafka, _slow_consumer)
                    assign(consumer, [TopicPartition(rng.topic, rng.partition, next_offset)])
                    slow = True
                continue
            last_progress = time.monotonic()
            expected = next_offset
            if msgs[-1].offset() >= rng.end or any(m.error() is not None for m in msgs):
                try:
                    msgs, next_offset = _clean(msgs, rng, next_offset)
                except _OutOfRange as gone:
                    raise _lost(consumer, rng, gone.offset) from None
            else:
                next_offset = msgs[-1].offset() + 1
            msgs = _unread(msgs, expected, rng)
            if msgs:  # a rewound batch ends below what it read: the highest offset counts
                next_offset = max(next_offset, msgs[-1].offset() + 1)
            if parked and any(m.offset() in parked for m in msgs):
                msgs = _park(options, rng, msgs, parked)
            if not msgs:
                continue
            # Column-wise list comprehensions: ~2x faster than one loop with branches per record.
            batch_values = [m.value() for m in msgs]
            if as_string:
                batch_values, msgs = _decode(options, rng, msgs, batch_values)
            keys.extend([m.key() for m in msgs])
            values.extend(batch_values)
            offsets.extend([m.offset() for m in msgs])
            stamps.extend([m.timestamp()[1] for m in msgs])
            raw_headers = [m.headers() for m in msgs]
            if any(raw_headers):
                headers.extend([_headers(h) for h in raw_headers])
            else:
                headers.extend(raw_headers)
            if len(offsets) >= batch_rows:
                yield _record_batch(arrow_schema, rng, keys, values, offsets, stamps, headers)
                keys, values, offsets, stamps, headers = [], [], [], [], []
        if offsets:
            yield _record_batch(arrow_schema, rng, keys, values, offsets, stamps, headers)
    finally:
        consumer.unassign()


# A fetch of an offset the log no longer has (auto.offset.reset is "error": librdkafka says
# _AUTO_OFFSET_RESET, the broker OFFSET_OUT_OF_RANGE).
OUT_OF_RANGE = frozenset({KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET})


class _OutOfRange(IOLayerError):
    """A fetch of a planned offset the log no longer has (``_lost`` says why)."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"offset {offset} is out of range")
        self.offset = offset


def _lost(consumer: Consumer, rng: KafkaRange, offset: int) -> Exception:
    """Why ``offset`` of a planned range is gone: the log now ends before it (the broker lost
    records the query had planned: the driver's refusal, seen first by a task), or it was
    deleted below (retention)."""
    try:
        _low, high = consumer.get_watermark_offsets(
            TopicPartition(rng.topic, rng.partition), timeout=get_settings().kafka_request_timeout_s
        )
    except Exception:  # noqa: BLE001 - the broker that lost the records may be gone again
        return offsets_unavailable(rng, offset, 0)
    if high < offset:
        return input_behind_checkpoint({f"{rng.topic}/{rng.partition}": (offset, high)})
    return offsets_unavailable(rng, offset, 0)


def _clean(msgs: list[Any], rng: KafkaRange, next_offset: int) -> tuple[list[Any], int]:
    """Drop EOF events and records at or past the range end; raise on real errors."""
    kept = []
    for msg in msgs:
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                if msg.offset() >= rng.end:
                    next_offset = rng.end
                continue
            if err.code() in OUT_OF_RANGE:
                raise _OutOfRange(next_offset)
            raise OffsetsUnavailable(
                f"Kafka error reading {rng.topic}/{rng.partition}: {err}; check the broker is up"
            )
        if msg.offset() >= rng.end:
            return kept, rng.end
        kept.append(msg)
        next_offset = msg.offset() + 1
    return kept, next_offset


def _unread(msgs: list[Any], expected: int, rng: KafkaRange) -> list[Any]:
    """The records of ``msgs`` at offsets not read yet, in offset order. A consumer can hand
    records of an earlier fetch again (librdkafka after a re-assignment or a broker restart);
    a range that gave an offset twice would number its rows differently from a re-run of the
    same range, and the release barrier would then skip the wrong rows."""
    if not msgs:
        return msgs
    offsets = np.fromiter((m.offset() for m in msgs), dtype=np.int64, count=len(msgs))
    if offsets[0] >= expected and (len(offsets) == 1 or bool(np.all(np.diff(offsets) > 0))):
        return msgs
    kept = []
    for msg, offset in zip(msgs, offsets.tolist(), strict=True):
        if offset >= expected:
            kept.append(msg)
            expected = offset + 1
    log.warning(
        "%s/%d: the consumer gave %d records at offsets read already (from offset %d); "
        "each offset of [%d, %d) is kept once",
        rng.topic, rng.partition, len(msgs) - len(kept), int(offsets.min()), rng.start, rng.end,
    )  # fmt: skip
    return kept


def _decode(
    options: SourceOptions, rng: KafkaRange, msgs: list[Any], raw: list[Any]
) -> tuple[list[Any], list[Any]]:
    try:
        return [v.decode("utf-8") if v is not None else None for v in raw], msgs
    except UnicodeDecodeError:
        pass
    values, kept = [], []
    for msg, value in zip(msgs, raw, strict=True):
        if value is not None:
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as exc:
                _bad_record(options, rng.topic, rng.partition, msg.offset(), msg, str(exc))
                continue
        values.append(value)
        kept.append(msg)
    return values, kept


def _headers(hdrs: Any) -> Any:
    return [{"key": k, "value": v} for k, v in hdrs] if hdrs else None


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
        pa.compute.multiply(pa.array(stamps, pa.int64()), 1000).cast(types[5]),
        pa.array(headers, types[6]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


def _park(
    options: SourceOptions, rng: KafkaRange, msgs: list[Any], parked: dict[int, str]
) -> list[Any]:
    """The records of ``msgs`` not parked; the parked ones to the dead-letter topic."""
    kept = []
    for msg in msgs:
        reason = parked.get(msg.offset())
        if reason is None:
            kept.append(msg)
        else:
            _dead_letter(options, rng.topic, rng.partition, msg.offset(), msg, f"parked: {reason}")
    return kept


def _bad_record(
    options: SourceOptions, topic: str, partition: int, offset: int, msg: Any, reason: str
) -> None:
    if options.on_bad_record == "fail":
        raise bad_record_error(topic, partition, offset, reason)
    _dead_letter(
        options, topic, partition, offset, msg,
        f"not valid for valueFormat={options.value_format}: {reason}",
    )  # fmt: skip


def _dead_letter(
    options: SourceOptions, topic: str, partition: int, offset: int, msg: Any, reason: str
) -> None:
    """``msg`` to the dead-letter topic with ``reason`` and its position (id: the position, so
    a re-read dedups), acknowledged before the task goes on."""
    producer = cached("producer:deadletter", options.kafka, _producer)
    position = f"{topic}/{partition}@{offset}"
    producer.produce(
        options.dead_letter_topic,
        key=msg.key(),
        value=msg.value(),
        headers=[
            (ID_HEADER, f"dlq:{position}".encode()),
            (REASON_HEADER, reason.encode()),
            (SOURCE_POSITION_HEADER, position.encode()),
        ],
    )
    if producer.flush(get_settings().sink_flush_timeout_s):  # the task fails; Spark retries it
        raise SinkDeliveryError(
            f"the dead letter of {position} was not acknowledged by the broker "
            f"({options.dead_letter_topic}); is the broker up?"
        )
