"""Blocks of Kafka records as Arrow columns, without a Python object per record.

confluent-kafka's ``consume`` returns a ``Message`` per record, with its key, value and header
tuples as Python objects; a reader of 10^7 sink records (the oracle) spends more time making
and unpacking those than librdkafka spends fetching the records. ``_block_consumer.c`` drives
the librdkafka that confluent-kafka ships (the same library, loaded by path) and hands over a
block of records as column buffers; ``ColumnConsumer`` turns them into Arrow arrays and numpy
columns. It is compiled at install (``pyproject.toml``'s ext-modules, optional: without a
compiler the readers use confluent-kafka's messages, see ``available``).
"""

from __future__ import annotations

import ctypes.util
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from recovery_lib.kafka.exceptions import KafkaLayerError
from recovery_lib.kafka.headers import CONTROL_HEADER, EPOCH_HEADER, FENCE_HEADER, ID_HEADER

log = logging.getLogger(__name__)

# flags of a record (as _block_consumer.c sets them)
CONTROL, FENCE, BAD_EPOCH, BAD_FENCE = 1, 2, 4, 8


@cache
def _module() -> Any | None:
    """The compiled module with librdkafka loaded, or None (said once in the log)."""
    try:
        from recovery_lib.kafka import _block_consumer  # type: ignore[attr-defined]
    except ImportError as exc:
        log.info("block consumer not built (%s): readers use confluent-kafka's messages", exc)
        return None
    path = librdkafka_path()
    if path is None:
        log.info("no librdkafka found: readers use confluent-kafka's messages")
        return None
    try:
        _block_consumer.load(str(path))
    except ImportError as exc:
        log.warning("block consumer unusable (%s): readers use confluent-kafka's messages", exc)
        return None
    return _block_consumer


def librdkafka_path() -> Path | None:
    """The librdkafka confluent-kafka runs on: the copy in its wheel, else the system's."""
    import confluent_kafka

    package = Path(confluent_kafka.__file__).parent
    for libs in (package.parent / "confluent_kafka.libs", package / ".libs"):
        found = sorted(libs.glob("librdkafka*.so*")) if libs.is_dir() else []
        if found:
            return found[0]
    name = ctypes.util.find_library("rdkafka")
    return Path(name) if name else None


def available() -> bool:
    """True when the block consumer is built and librdkafka found."""
    return _module() is not None


@dataclass(frozen=True)
class Block:
    """One block of records in arrival order (partitions interleaved, each in offset order).
    ``epoch`` is meaningful where ``epoch_valid``; ``fence`` where ``flags & FENCE``."""

    ids: pa.Array  # large_binary; null: no id header
    keys: pa.Array
    values: pa.Array
    partition: np.ndarray  # int32
    offset: np.ndarray  # int64
    epoch: np.ndarray  # int64
    epoch_valid: np.ndarray  # bool
    fence: np.ndarray  # int64
    flags: np.ndarray  # uint8

    def __len__(self) -> int:
        return len(self.offset)


def _binary(offsets: bytes, data: bytes, valid: bytes, n: int) -> pa.Array:
    present = np.frombuffer(valid, np.uint8)
    nulls = n - int(np.count_nonzero(present))
    bitmap = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], nulls
    )


class ColumnConsumer:
    """A consumer of assigned partitions of one topic whose ``consume`` returns a ``Block``.
    Raises RuntimeError when the block consumer is not available (check ``available``)."""

    def __init__(self, config: Mapping[str, str]) -> None:
        module = _module()
        if module is None:
            raise KafkaLayerError("the block consumer is not built; reinstall with a C compiler")
        self._consumer = module.BlockConsumer({k: str(v) for k, v in config.items()})

    def assign(self, topic: str, starts: Mapping[int, int]) -> None:
        self._consumer.assign(topic, sorted(starts.items()))

    def pause(self, topic: str, partitions: Iterable[int]) -> None:
        self._consumer.pause(topic, sorted(partitions))

    def position(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """Per partition, the next offset to consume (negative: nothing consumed yet)."""
        return dict(self._consumer.position(topic, sorted(partitions)))

    def consume(self, max_records: int, timeout_s: float) -> Block | None:
        """Up to ``max_records`` records, waiting up to ``timeout_s`` for them; None when
        none came. A record in error raises RuntimeError."""
        raw = self._consumer.consume(
            max_records,
            int(timeout_s * 1000),
            ID_HEADER,
            EPOCH_HEADER,
            CONTROL_HEADER,
            FENCE_HEADER,
        )
        if raw is None:
            return None
        n = raw["n"]
        return Block(
            ids=_binary(raw["id_offsets"], raw["id_data"], raw["id_valid"], n),
            keys=_binary(raw["key_offsets"], raw["key_data"], raw["key_valid"], n),
            values=_binary(raw["value_offsets"], raw["value_data"], raw["value_valid"], n),
            partition=np.frombuffer(raw["partition"], np.int32),
            offset=np.frombuffer(raw["offset"], np.int64),
            epoch=np.frombuffer(raw["epoch"], np.int64),
            epoch_valid=np.frombuffer(raw["epoch_valid"], np.uint8).astype(bool),
            fence=np.frombuffer(raw["fence"], np.int64),
            flags=np.frombuffer(raw["flags"], np.uint8),
        )

    def close(self) -> None:
        self._consumer.close()
