"""The Kafka sink's modes, and what a consumer of each mode's topic reads.

| mode | a record is visible | the consumer that sees each output once |
|---|---|---|
| at_least_once | when the task writes it | none (replays write copies) |
| dedup | when the task writes it | ``DedupReader`` (first copy of an id) |
| release | when the task writes it | any plain consumer (release barrier) |
| two_phase | when its batch's commit record is written | ``CommittedReader`` (commit_gate.py) |
| transactional | when the task's Kafka transaction commits | a read_committed consumer |

two_phase: the driver writes a batch's commit record after all its tasks succeeded.
transactional: on brokers whose transactions hide aborted records (Apache Kafka).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from recovery_lib.io.exceptions import InvalidSinkOption
from recovery_lib.io.sinks.commit_gate import CommitGate, CommittedReader
from recovery_lib.io.sinks.dedup_reader import SinkRecord, read_topic

__all__ = [
    "SINK_MODES",
    "consumer_dedups",
    "consumer_records",
    "sink_flag",
    "sink_mode",
]

SINK_MODES = ("at_least_once", "dedup", "release", "two_phase", "transactional")
"""The Kafka sink's modes (``JobOptions.sink_mode``; the sink's ``mode`` option), as the
module's table describes them. The command line spells them with ``-`` (``sink_flag``)."""
# Modes whose consumer relies on the broker hiding aborted transactions (tansu does not).
NEEDS_BROKER_TRANSACTIONS = frozenset({"transactional"})
# Modes that drop a re-run's outputs by id (the release barrier): a re-run must recompute
# what the first attempt wrote, in the same order.
REPLAY_BY_ID = frozenset({"release", "transactional"})
# Modes whose writer can be held (option holdUntil: a hot standby, a rehearsal): it computes its
# rows and writes nothing, which a commit record or a transaction of its own would contradict.
HOLDABLE_MODES = ("at_least_once", "dedup", "release")


def sink_flag(mode: str) -> str:
    """How the command line spells a mode.

    Args:
        mode: A mode of ``SINK_MODES``.

    Returns:
        The mode with ``-`` for ``_`` (``two-phase``).
    """
    return mode.replace("_", "-")


def sink_mode(name: str) -> str:
    """The canonical name of a mode.

    Args:
        name: A mode as given: ``two_phase``, ``two-phase``, any case.

    Returns:
        Its name in ``SINK_MODES``.

    Raises:
        InvalidSinkOption: No such mode.
    """
    mode = name.strip().lower().replace("-", "_")
    if mode not in SINK_MODES:
        raise InvalidSinkOption(
            f"sink mode {name!r} is unknown; choose one of "
            f"{', '.join(m.replace('_', '-') for m in SINK_MODES)}"
        )
    return mode


def output_partitions(mode: str, partitions: int) -> int:
    """Partitions to create an output topic with. release and transactional write task p to
    Kafka partition p, and a stateful job's output tasks are its shuffle partitions. (An
    existing topic keeps its count; the sink names the fix if too few.)"""
    if sink_mode(mode) in REPLAY_BY_ID:
        from recovery_lib.settings import get_settings

        return max(partitions, get_settings().spark_shuffle_partitions)
    return partitions


def consumer_dedups(mode: str) -> bool:
    """Whether the mode's consumer drops copies of an id (the ``dedup`` mode's reader); the
    oracle's ``dedup`` argument.

    Args:
        mode: A sink mode.

    Returns:
        True for ``dedup``.

    Raises:
        InvalidSinkOption: No such mode.
    """
    return sink_mode(mode) == "dedup"


def consumer_records(
    topic: str, mode: str, config: Mapping[str, str] | None = None
) -> Iterator[SinkRecord]:
    """Every record a consumer of ``mode`` receives, before any dedup (``consumer_dedups``):
    what the oracle's ``judge`` takes.

    Args:
        topic: The sink's output topic.
        mode: The sink mode it was written in (``two_phase``: only committed batches).
        config: Kafka client properties (default: the settings').

    Returns:
        The records present when called (``SinkRecord``: id, epoch, key, value, position,
        headers), partition by partition, fenced ones left out; ``timestamp_ms`` is when
        each became visible.

    Raises:
        InvalidSinkOption: No such mode.
    """
    if sink_mode(mode) == "two_phase":
        return iter(CommittedReader(topic, config))
    return read_topic(topic, config)


def visibility_gate(mode: str) -> CommitGate | None:
    """For a live consumer: the gate records pass before they are visible (two_phase)."""
    return CommitGate() if sink_mode(mode) == "two_phase" else None
