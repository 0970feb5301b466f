"""Read a sink topic and yield each output id once (first copy wins).

This is the consumer side of the ``dedup`` sink mode: a re-executed batch writes records with
the same ids, and the reader drops the later copies. It reads ``[low, end)`` of every
partition as of the moment it starts, using the broker-independent tail probe. Fencing
(standby takeover): fence records are not yielded, nor records of an older epoch written after
a fence (see recovery_lib/ha/fencing.py).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from recovery_lib.io.exceptions import BadFenceHeader
from recovery_lib.io.sinks.fences import FENCE_HEADER, FenceFilter
from recovery_lib.io.sinks.ids import CONTROL_HEADER, EPOCH_HEADER, ID_HEADER
from recovery_lib.kafka import block_consumer
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.block_consumer import BAD_FENCE, CONTROL, FENCE, Block, ColumnConsumer
from recovery_lib.kafka.clients import (
    BULK_READS,
    SLOW_BULK_READS,
    client_config,
)
from recovery_lib.kafka.exceptions import RecordsUnreadable
from recovery_lib.kafka.tail_probe import TailProbe
from recovery_lib.settings import Settings, get_settings


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
    settings: Settings | None = None,
) -> Iterator[SinkRecord]:
    """Every record of ``topic`` present when called, partition by partition (from the offsets
    in ``start`` where given, else from the log start), without fence records and fenced ones
    (counted in ``fence.dropped`` when a filter is passed), and without control records (CEC
    footprints) unless ``control``. ``settings``: the broker and its timeouts (the
    environment's if None)."""
    fence = fence if fence is not None else FenceFilter()
    config = dict(config) if config is not None else client_config(settings=settings)
    partitions, lows, ends = topic_bounds(topic, config, start, settings)
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
                        raise RecordsUnreadable(
                            f"reading {topic}/{part}: {err}; check the broker is up"
                        )
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


def topic_bounds(
    topic: str,
    config: dict[str, str],
    start: Mapping[int, int] | None,
    settings: Settings | None = None,
) -> tuple[list[int], dict[int, int], dict[int, int]]:
    """The topic's partitions and, per partition, the first offset to read and the end."""
    settings = settings or get_settings()
    partitions = TopicAdmin(config, settings).partitions(topic)
    probe = TailProbe.from_settings(config, settings)
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
        ("id", pa.binary()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
    ]
)


def read_topic_batches(
    topic: str,
    config: Mapping[str, str] | None = None,
    rows: int = 200_000,
    fence: FenceFilter | None = None,
    settings: Settings | None = None,
) -> Iterator[pa.RecordBatch]:
    """What ``read_topic`` yields, as Arrow record batches of about ``rows`` records
    (``SINK_BATCH_SCHEMA``; partitions interleaved, each in offset order), for readers of
    millions of records: with the block consumer (kafka/block_consumer.py) no record becomes a
    Python object; without it (no C compiler at install, or ``RECOVERY_KAFKA_BLOCK_READER``
    false) columns are taken from each block of confluent-kafka messages at once.
    ``settings``: the broker, its timeouts and the block reader's switch (the environment's if
    None)."""
    settings = settings or get_settings()
    fence = fence if fence is not None else FenceFilter()
    config = dict(config) if config is not None else client_config(settings=settings)
    partitions, lows, ends = topic_bounds(topic, config, None, settings)
    todo = {p for p in partitions if ends[p] > lows[p]}
    if not todo:
        return
    read = _TopicRead(
        topic, config, rows, fence, lows, ends, todo, settings.kafka_slow_fetch_after_s
    )
    if settings.kafka_block_reader and block_consumer.available():
        yield from _block_batches(read)
    else:
        yield from _message_batches(read)


class _TopicRead(NamedTuple):
    """One read of a topic's partitions from ``lows`` to ``ends``; ``todo``: those not done."""

    topic: str
    config: dict[str, str]
    rows: int  # records per batch
    fence: FenceFilter
    lows: dict[int, int]
    ends: dict[int, int]
    todo: set[int]
    slow_after_s: float  # nothing for this long under the short fetch wait: the usual one


_READER_CONFIG = {
    "group.id": "recovery-batch-reader",
    "enable.auto.commit": "false",
    "enable.partition.eof": "false",
}
_BLOCK_RECORDS = 20_000  # records per consume call of the block consumer


def _left(read: _TopicRead, reached: Mapping[int, int]) -> int:
    """Offsets still to read (at least 1): a consume call asks for no more than that, since
    it waits its whole timeout for a count that never comes (2 s per judgement of a small
    topic otherwise)."""
    return max(1, sum(read.ends[p] - max(reached.get(p, -1), read.lows[p]) for p in read.todo))


class _IdleWatch:
    """A bulk reader that got nothing: when to switch to the broker's usual fetch wait
    (kafka/clients.py), and when to give up on partitions short of their ends."""

    def __init__(self, topic: str, slow_after_s: float) -> None:
        self.topic = topic
        self.slow_after = slow_after_s
        self.slow = False
        self.since = time.monotonic()

    def got_records(self) -> None:
        self.since = time.monotonic()

    def switch_to_slow(self, todo: set[int]) -> bool:
        idle = time.monotonic() - self.since
        if idle > _STALL_S:
            raise RecordsUnreadable(
                f"reading {self.topic}: partitions {sorted(todo)} stopped short of their ends; "
                "check the broker is up and kept them"
            )
        if idle > self.slow_after and not self.slow:
            self.slow = True
            return True
        return False


def _block_batches(read: _TopicRead) -> Iterator[pa.RecordBatch]:
    topic, config, rows, fence, lows, ends, todo, slow_after_s = read

    def open_consumer(fetches: Mapping[str, str], starts: dict[int, int]) -> ColumnConsumer:
        consumer = ColumnConsumer({**config, **fetches, **_READER_CONFIG})
        consumer.assign(topic, starts)
        return consumer

    consumer = open_consumer(BULK_READS, {p: lows[p] for p in todo})
    watch = _IdleWatch(topic, slow_after_s)
    end_of = np.zeros(max(ends) + 1, np.int64)
    for part, end in ends.items():
        end_of[part] = end
    pending: list[Block] = []
    masks: list[np.ndarray | None] = []
    count = 0
    reached: dict[int, int] = {}
    try:
        while todo:
            block = consumer.consume(min(_BLOCK_RECORDS, _left(read, reached)), 1.0)
            if block is None:
                if watch.switch_to_slow(todo):
                    at = consumer.position(topic, todo)
                    consumer.close()
                    consumer = open_consumer(
                        SLOW_BULK_READS, {p: max(at.get(p, -1), lows[p]) for p in todo}
                    )
                continue
            watch.got_records()
            reached = consumer.position(topic, todo)
            done = [p for p, at in reached.items() if at >= ends[p]]
            if done:
                todo.difference_update(done)
                consumer.pause(topic, done)
            keep = _kept(topic, block, end_of, fence)
            pending.append(block)
            masks.append(keep)
            count += len(block) if keep is None else int(np.count_nonzero(keep))
            if count >= rows:
                yield _blocks_batch(pending, masks)
                pending, masks, count = [], [], 0
        if count:
            yield _blocks_batch(pending, masks)
    finally:
        consumer.close()


def _kept(topic: str, block: Block, end_of: np.ndarray, fence: FenceFilter) -> np.ndarray | None:
    """``read_topic``'s rule over a block: the records before the ends, no control records, no
    fence records, nothing fenced. None: every record is kept."""
    keep = (block.offset < end_of[block.partition]) & ((block.flags & CONTROL) == 0)
    if np.any(block.flags & (FENCE | BAD_FENCE)):  # record by record: a fence rules what follows
        for i in np.flatnonzero(keep):
            keep[i] = _accepted_in_block(topic, block, int(i), fence)
    elif fence.fences:
        floor = np.zeros_like(end_of)
        for (fenced_topic, part), epoch in fence.fences.items():
            if fenced_topic == topic and part < len(floor):
                floor[part] = epoch
        fenced = keep & block.epoch_valid & (block.epoch < floor[block.partition])
        fence.dropped += int(np.count_nonzero(fenced))
        keep &= ~fenced
    return None if keep.all() else keep


def _accepted_in_block(topic: str, block: Block, i: int, fence: FenceFilter) -> bool:
    part, flags = int(block.partition[i]), int(block.flags[i])
    if flags & BAD_FENCE:
        raise BadFenceHeader(
            f"{topic}/{part}@{block.offset[i]}: its {FENCE_HEADER} header is not an integer; "
            "only fencing (ha/fencing.py write_fences) may write that header"
        )
    headers = {FENCE_HEADER: str(block.fence[i]).encode()} if flags & FENCE else {}
    epoch = int(block.epoch[i]) if block.epoch_valid[i] else None
    return fence.accept(topic, part, epoch, headers)


def _blocks_batch(blocks: list[Block], masks: list[np.ndarray | None]) -> pa.RecordBatch:
    def column(get: Any) -> pa.Array:
        parts = [get(b) if m is None else get(b).filter(pa.array(m)) for b, m in zip(
            blocks, masks, strict=True)]  # fmt: skip
        return pa.concat_arrays(parts)

    def numbers(get: Any) -> np.ndarray:
        return np.concatenate([get(b) if m is None else get(b)[m] for b, m in zip(
            blocks, masks, strict=True)])  # fmt: skip

    return pa.RecordBatch.from_arrays(
        [
            column(lambda b: b.ids).cast(pa.binary()),
            column(lambda b: b.keys).cast(pa.binary()),
            column(lambda b: b.values).cast(pa.binary()),
            pa.array(numbers(lambda b: b.partition), pa.int32()),
            pa.array(numbers(lambda b: b.offset), pa.int64()),
        ],
        schema=SINK_BATCH_SCHEMA,
    )


def _message_batches(read: _TopicRead) -> Iterator[pa.RecordBatch]:
    """The batches from confluent-kafka messages: a message is looked at one by one only
    when its headers are not a plain output's (``rl.id`` first, no control header) or a fence
    was seen; ``partition`` and ``offset`` are null where nothing needed them."""
    topic, config, rows, fence, lows, ends, todo, slow_after_s = read

    def bulk_consumer(fetches: Mapping[str, str]) -> Consumer:
        return Consumer({**config, **fetches, **_READER_CONFIG})

    consumer = bulk_consumer(BULK_READS)
    watch = _IdleWatch(topic, slow_after_s)
    consumer.assign([TopicPartition(topic, p, lows[p]) for p in sorted(todo)])
    columns: tuple[list[Any], ...] = ([], [], [], [], [])  # id, key, value, partition, offset
    pending = 0
    reached: dict[int, int] = {}
    gc_was_enabled = gc.isenabled()
    gc.disable()  # header tuples would trigger a collection every few thousand messages
    try:
        while todo:
            msgs = consumer.consume(num_messages=min(10_000, _left(read, reached)), timeout=1.0)
            if not msgs:
                if watch.switch_to_slow(todo):  # the broker needs a longer wait
                    at = consumer.position([TopicPartition(topic, p) for p in sorted(todo)])
                    consumer.close()
                    consumer = bulk_consumer(SLOW_BULK_READS)
                    consumer.assign(
                        [TopicPartition(topic, tp.partition, max(tp.offset, lows[tp.partition]))
                         for tp in at]
                    )  # fmt: skip
                continue
            watch.got_records()
            errors = [e for e in map(Message.error, msgs) if e is not None]
            if errors:
                raise RecordsUnreadable(f"reading {topic}: {errors[0]}; check the broker is up")
            # Where each partition stands after this block (no per-message partition/offset).
            reached = {
                tp.partition: tp.offset
                for tp in consumer.position([TopicPartition(topic, p) for p in todo])
            }
            beyond = any(reached[p] > ends[p] for p in reached)
            for p, position in reached.items():
                if position >= ends[p]:
                    todo.discard(p)
                    consumer.pause([TopicPartition(topic, p)])
            headers = list(map(Message.headers, msgs))
            ids = _plain_ids(headers)
            keys = list(map(Message.key, msgs))
            values = list(map(Message.value, msgs))
            parts: list[int] | None = None
            offsets: list[int] | None = None
            if beyond or fence.fences or ids is None:  # one by one (see the docstring)
                parts = list(map(Message.partition, msgs))
                offsets = list(map(Message.offset, msgs))
                keep = [
                    i
                    for i, (p, o, h) in enumerate(zip(parts, offsets, headers, strict=True))
                    if o < ends[p] and _accepted(topic, p, h, fence)
                ]
                ids = [_id_of(headers[i]) for i in keep]
                keys, values = [keys[i] for i in keep], [values[i] for i in keep]
                parts, offsets = [parts[i] for i in keep], [offsets[i] for i in keep]
            if parts is None:  # positions of plain blocks are not kept (not needed to judge)
                parts = offsets = [None] * len(ids)  # type: ignore[list-item]
            for column, new in zip(columns, (ids, keys, values, parts, offsets), strict=True):
                column.extend(new)
            pending += len(ids)
            if pending >= rows:
                yield _sink_batch(columns)
                pending = 0
        if pending:
            yield _sink_batch(columns)
    finally:
        if gc_was_enabled:
            gc.enable()
        consumer.close()


_FIRST, _LAST, _NAME, _VALUE = itemgetter(0), itemgetter(-1), itemgetter(0), itemgetter(1)


def _plain_ids(headers: list[list[tuple[str, bytes]] | None]) -> list[bytes] | None:
    """The ids of a block of plain outputs (``rl.id`` first, no control header last), taken
    with C-level maps; None when a message of the block is not plain."""
    try:
        firsts = list(map(_FIRST, headers))
        last_names = set(map(_NAME, map(_LAST, headers)))
    except (TypeError, IndexError):  # a message without headers
        return None
    if set(map(_NAME, firsts)) != {ID_HEADER} or CONTROL_HEADER in last_names:
        return None
    return list(map(_VALUE, firsts))


_STALL_S = 60.0  # no message for this long while partitions are short of their ends: fail


def _accepted(
    topic: str, partition: int, headers: list[tuple[str, bytes]] | None, fence: FenceFilter
) -> bool:
    """``read_topic``'s rule: no control records, no fence records, nothing fenced."""
    hmap = dict(headers or ())
    if CONTROL_HEADER in hmap:
        return False
    epoch_raw = hmap.get(EPOCH_HEADER)
    return fence.accept(topic, partition, int(epoch_raw) if epoch_raw else None, hmap)


def _id_of(headers: list[tuple[str, bytes]] | None) -> bytes | None:
    return dict(headers or ()).get(ID_HEADER)


def _binary(items: list[bytes | None]) -> pa.Array:
    """A binary Arrow array of ``items``: from one joined buffer and the lengths' running sum
    (4x faster than converting bytes objects one by one), unless an item is None."""
    if None in items:
        return pa.array(items, pa.binary())
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = b"".join(items)  # type: ignore[arg-type]
    if offsets[-1] < 2**31:  # binary's 32-bit offsets suffice (a batch is ~30 MB)
        return pa.BinaryArray.from_buffers(
            pa.binary(),
            len(items),
            [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
        )
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(items), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    ).cast(pa.binary())


def _sink_batch(columns: tuple[list[Any], ...]) -> pa.RecordBatch:
    ids, keys, values, parts, offsets = columns
    batch = pa.RecordBatch.from_arrays(
        [
            _binary(ids),
            _binary(keys),
            _binary(values),
            pa.array(parts, pa.int32()),
            pa.array(offsets, pa.int64()),
        ],
        schema=SINK_BATCH_SCHEMA,
    )
    for column in columns:
        column.clear()
    return batch


class DedupReader:
    """Yields each output id once; records without an id pass through unchanged."""

    def __init__(
        self, topic: str, config: Mapping[str, str] | None = None, settings: Settings | None = None
    ) -> None:
        self.topic = topic
        self.config = config
        self.settings = settings
        self.duplicates = 0
        self.fence = FenceFilter()  # .dropped: zombie records refused
        self._seen: set[str] = set()

    def __iter__(self) -> Iterator[SinkRecord]:
        for record in read_topic(self.topic, self.config, fence=self.fence, settings=self.settings):
            if record.id is not None:
                if record.id in self._seen:
                    self.duplicates += 1
                    continue
                self._seen.add(record.id)
            yield record
