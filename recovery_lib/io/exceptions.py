"""Errors of the source and sinks; each message names the fix."""

from __future__ import annotations

from typing import Any

from recovery_lib.errors import RecoveryError


class IOLayerError(RecoveryError, RuntimeError):
    pass


class InvalidSourceOption(IOLayerError, ValueError):
    pass


class InvalidSinkOption(IOLayerError, ValueError):
    pass


class OffsetsUnavailable(IOLayerError):
    """A planned offset range could not be read back (retention, broker restart)."""


class InputBehindCheckpoint(IOLayerError):
    """The broker's log ends before the offsets the query's checkpoint already read."""


class BadRecord(IOLayerError):
    """A record does not match the declared format and the policy is to fail."""


class BadFenceHeader(BadRecord, ValueError):
    """A record's fence header (``rl.fence``) is not an epoch number; a ``ValueError`` as
    before, for readers that caught one."""


class SinkDeliveryError(IOLayerError):
    """The broker did not acknowledge every record of a sink task."""


class WriterFenced(IOLayerError):
    """A write guard refused: a newer writer took over (this one is a zombie and must stop)."""


def bad_record_error(topic: str, partition: int, offset: int, reason: str) -> BadRecord:
    return BadRecord(
        f"record {topic}/{partition}@{offset} is not valid for valueFormat: {reason}; "
        "read it with valueFormat=binary, or set onBadRecord=deadletter to route such records "
        "to the dead-letter topic and keep going"
    )


def offsets_unavailable(rng: Any, reached: int, waited_s: float) -> OffsetsUnavailable:
    """``rng``: the planned range (topic, partition, end)."""
    return OffsetsUnavailable(
        f"{rng.topic}/{rng.partition}: offsets [{reached}, {rng.end}) of a planned batch were not "
        f"returned within {waited_s:.0f} s; the broker lost or deleted them (retention, or a "
        "restart of the memory-only embedded broker). Restore the topic or start the query "
        "with a new checkpoint"
    )


def input_behind_checkpoint(behind: dict[str, tuple[int, int]]) -> InputBehindCheckpoint:
    """``behind``: per ``topic/partition``, (the checkpoint's offset, the log's end)."""
    where = ", ".join(
        f"{tp} read up to {mine}, the log ends at {end}" for tp, (mine, end) in behind.items()
    )
    return InputBehindCheckpoint(
        f"the input is behind the query's checkpoint ({where}): the broker lost records the "
        "query already read (the embedded broker keeps data in memory only, and a restart "
        "empties it). Going on would skip every record up to the checkpoint's offsets. Restore "
        "the topics, or start the job on a new checkpoint (and point KAFKA_BOOTSTRAP at a "
        "durable Kafka cluster for long-lived jobs)"
    )


def checkpoint_of_other_topics(read: list[str], reads_now: list[str]) -> InputBehindCheckpoint:
    """The query's checkpoint read other topics than the ones its input names now."""
    return InputBehindCheckpoint(
        f"the query's checkpoint read topics {read}, and this input now reads {reads_now}: "
        "the checkpoint (and the state in it) belongs to other input. Going on would read the "
        "new topics from their beginning into the old state (a join would match old rows "
        "again). Start the job on a new checkpoint, or give it back its topics"
    )
