"""The checkpoint graph of a pipeline: every stage's checkpoints with, per channel, how far it
had received and sent.

A stage is a Spark query; its checkpoint ``x`` is committed micro-batch ``x`` (Spark writes the
commit log after the sink acknowledged the batch). A channel is a Kafka topic written by one
stage (or by a source outside the pipeline) and read by others, so a message's position is its
(partition, offset): "received before checkpoint c" is ``offset < c.received[topic][p]`` (the
batch's end offset, from Spark's offset log) and "sent after checkpoint c" is
``offset >= c.sent[topic][p]`` (the topic's end when the batch committed, recorded by the
protocol's commit hook). Because every channel is a durable, replayable log, in-transit
messages are never lost; only orphans (received, but sent after the sender's checkpoint) make
a set of checkpoints inconsistent.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from recovery_lib.errors import ConfigurationError

Positions = dict[str, dict[int, int]]  # topic -> partition -> next offset

# The index of a stage's initial state: nothing received, nothing sent.
INITIAL = -1


@dataclass(frozen=True)
class StageCheckpoint:
    stage: str
    index: int  # the committed batch id; INITIAL for the state before the first batch
    received: Positions = field(default_factory=dict)
    sent: Positions = field(default_factory=dict)
    taken_ms: int = 0
    forced: bool = False  # CIC: cut before a record that would close a Z-cycle
    volatile: bool = False  # a live stage's current state, not a checkpoint

    def sent_at(self, topic: str, partition: int) -> int:
        return self.sent.get(topic, {}).get(partition, 0)


@dataclass(frozen=True)
class Stage:
    """A stage's place in the pipeline: the topics it reads and writes, and whether a re-run of
    its batches sends again exactly what it sent before (deterministic, or causal logging)."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    replays_outputs: bool = False


class CheckpointGraph:
    """Checkpoints per stage in index order, and the channels between stages."""

    def __init__(
        self,
        stages: Iterable[Stage],
        checkpoints: Mapping[str, Iterable[StageCheckpoint]],
    ) -> None:
        self.stages = {s.name: s for s in stages}
        self.writer: dict[str, str] = {}
        for stage in self.stages.values():
            for topic in stage.writes:
                if topic in self.writer:
                    raise ConfigurationError(
                        f"topic {topic} is written by stages {self.writer[topic]} and "
                        f"{stage.name}; give each stage its own output topic"
                    )
                self.writer[topic] = stage.name
        self.history: dict[str, list[StageCheckpoint]] = {}
        for name in self.stages:
            own = sorted(checkpoints.get(name, ()), key=lambda c: c.index)
            if any(c.stage != name for c in own):
                raise ValueError(f"checkpoints given for stage {name} belong to another stage")
            initial = [StageCheckpoint(name, INITIAL)] if not own or own[0].index != INITIAL else []
            self.history[name] = initial + own
        self._indices = {n: [c.index for c in h] for n, h in self.history.items()}

    def latest(self, stage: str) -> StageCheckpoint:
        return self.history[stage][-1]

    def at(self, stage: str, index: int) -> StageCheckpoint:
        """The checkpoint of ``stage`` with this index (ValueError if there is none)."""
        i = bisect.bisect_left(self._indices[stage], index)
        if i == len(self._indices[stage]) or self._indices[stage][i] != index:
            raise ValueError(f"stage {stage} has no checkpoint {index}")
        return self.history[stage][i]

    def checkpoints(self) -> Iterable[StageCheckpoint]:
        """Every real checkpoint (not the initial states)."""
        for history in self.history.values():
            yield from (c for c in history if c.index != INITIAL)

    def channels(self) -> Iterable[tuple[str, str, str]]:
        """(sender, topic, receiver) for every topic written by one stage and read by another
        (or the same one: a feedback loop)."""
        for receiver in self.stages.values():
            for topic in receiver.reads:
                if topic in self.writer:
                    yield self.writer[topic], topic, receiver.name

    def orphans(
        self, receiver: StageCheckpoint, topic: str, sender: StageCheckpoint
    ) -> dict[int, int]:
        """Per partition of ``topic``: how many messages ``receiver`` had received that
        ``sender`` had not yet sent (an empty dict: none)."""
        out = {}
        for part, got in receiver.received.get(topic, {}).items():
            extra = got - sender.sent_at(topic, part)
            if extra > 0:
                out[part] = extra
        return out

    def latest_without_orphans(
        self, receiver: str, before: StageCheckpoint, topic: str, sender: StageCheckpoint
    ) -> StageCheckpoint:
        """The newest checkpoint of ``receiver`` at or before ``before`` that received nothing
        ``sender`` had not sent (received positions only grow, so the first match going back
        is the newest)."""
        history = self.history[receiver]
        i = len(history) - 1 if before.volatile else self._indices[receiver].index(before.index)
        while i >= 0 and self.orphans(history[i], topic, sender):
            i -= 1
        return history[max(i, 0)]
