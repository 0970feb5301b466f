"""Header values of ranges of records: what a checkpoint protocol piggybacked on a stage's
output (communication-induced clocks), read back by offset range."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from recovery_lib.io.client_cache import cached, evict
from recovery_lib.kafka.assignment import assign
from recovery_lib.kafka.clients import RANGE_FETCHES
from recovery_lib.kafka.exceptions import RecordsUnreadable
from recovery_lib.kafka.tail_probe import TailProbe
from recovery_lib.settings import get_settings

log = logging.getLogger(__name__)


def tail_probe(config: dict[str, str]) -> Any:
    return TailProbe.from_settings(config)


def _consumer(config: dict[str, str]) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            **config,
            "group.id": "recovery-protocol-headers",
            "enable.auto.commit": "false",
            "fetch.wait.max.ms": "5",
            # An offset outside the log must be an error, not a silent jump to its end.
            "auto.offset.reset": "error",
            **RANGE_FETCHES,
        }
    )


def _log_bounds(kafka: dict[str, str], topic: str, part: int) -> str:
    """The partition's first and end offsets, for an error message (both from the probe:
    the embedded broker's watermarks are not the log's bounds)."""
    from confluent_kafka import KafkaException

    found = cached("probe:protocol", kafka, tail_probe)
    try:
        low = found.first_offset(topic, part)
        end = found.ends([(topic, part)], exact=True)
    except (KafkaException, RuntimeError, TimeoutError) as exc:
        return f"unknown offsets ({exc})"
    return f"offsets {low}..{end[(topic, part)]}"


def read_headers(
    kafka: dict[str, str], ranges: Mapping[tuple[str, int], tuple[int, int]], header: str
) -> dict[tuple[str, int], list[tuple[int, bytes | None]]]:
    """(offset, value of ``header`` or None) of every record in each [start, end) range."""

    if "bootstrap.servers" not in kafka:
        from recovery_lib.kafka.clients import client_config

        kafka = {**client_config(), **kafka}
    timeout = get_settings().source_poll_timeout_s
    return {
        (topic, part): _read_header_range(kafka, topic, part, begin, end, header, timeout)
        for (topic, part), (begin, end) in ranges.items()
    }


def _read_header_range(
    kafka: dict[str, str], topic: str, part: int, begin: int, end: int, header: str, timeout: float
) -> list[tuple[int, bytes | None]]:
    """One range's headers. The deadline is for progress, not for the range: a long range
    from a loaded broker may take longer than ``timeout`` while its records keep coming.
    Half-way to it a stalled read is retried once on a new consumer: a cached consumer was
    seen to get no record of a range the log held (CIC, 20 % hot keys at 80 % of the MST)."""
    from confluent_kafka import TopicPartition

    found: list[tuple[int, bytes | None]] = []
    consumer = cached("consumer:protocol", kafka, _consumer)
    assign(consumer, [TopicPartition(topic, part, begin)])
    position = begin
    progress_at = time.monotonic()
    renewed = False
    last_error = None
    try:
        while position < end:
            msg = consumer.poll(0.2)
            ours = msg is not None and msg.error() is None
            if ours and (msg.topic(), msg.partition()) == (topic, part):
                if msg.offset() >= end:
                    break
                value = next((v for k, v in msg.headers() or () if k == header), None)
                found.append((msg.offset(), value))
                position = msg.offset() + 1
                progress_at, renewed = time.monotonic(), False
                continue
            last_error = msg.error() if msg is not None else last_error
            # Control records (transaction markers) occupy offsets but are never delivered.
            if consumer.position([TopicPartition(topic, part)])[0].offset >= end:
                break
            stalled = time.monotonic() - progress_at
            if stalled > timeout:
                raise RecordsUnreadable(
                    f"{topic}/{part}: offsets {position}..{end} not readable: no record came "
                    f"for {timeout} s on two consumers (last error: {last_error}; the log "
                    f"holds {_log_bounds(kafka, topic, part)}); check the broker is up and kept "
                    "them"
                )
            if stalled > timeout / 2 and not renewed:
                log.warning(
                    "%s/%d gave no record at %d for %.0f s; reading on a new consumer",
                    topic,
                    part,
                    position,
                    stalled,
                )
                consumer = _renewed_consumer(kafka, consumer)
                assign(consumer, [TopicPartition(topic, part, position)])
                renewed = True
    finally:
        consumer.unassign()
    return found


def _renewed_consumer(kafka: dict[str, str], stale: Any) -> Any:
    evict("consumer:protocol", kafka)
    try:
        stale.close()
    except Exception as exc:  # noqa: BLE001 - a stuck consumer may fail to close; go on
        log.warning("closing a stalled consumer: %r", exc)
    return cached("consumer:protocol", kafka, _consumer)
