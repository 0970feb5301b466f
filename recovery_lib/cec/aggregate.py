"""A whole CEC aggregate: one shard per output partition, keys routed by a stable hash, all
shards fed from the same input in input order."""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from functools import partial

from recovery_lib.cec.exceptions import CECError
from recovery_lib.cec.log import OutputLog
from recovery_lib.cec.operator import AggregateShard, InputTuple, ShardStats
from recovery_lib.cec.policy import CheckpointPolicy
from recovery_lib.cec.recovery import EventualCheckpoint, eventual_checkpoint
from recovery_lib.cec.windows import AGGREGATES, TimeWindows, WindowKind
from recovery_lib.errors import JobError


@dataclass(frozen=True)
class AggregateSpec:
    """Per ``key``, windows of ``kind`` over the field ``value``, reduced by ``aggregate``;
    ``event_time`` (epoch ms) is needed by time windows."""

    key: str
    value: str
    kind: WindowKind
    aggregate: str = "avg"
    event_time: str | None = None

    def __post_init__(self) -> None:
        if self.aggregate not in AGGREGATES:
            raise JobError(f"aggregate {self.aggregate!r}: one of {', '.join(AGGREGATES)}")
        if isinstance(self.kind, TimeWindows) and not self.event_time:
            raise JobError("time windows need event_time: the field with the event time (ms)")


@dataclass(frozen=True)
class RecoveryReport:
    """One recovery of an aggregate (what the dashboard and the benchmarks read)."""

    open_windows: int
    extent: int  # log records read back, all shards
    torn: int
    scanned_bytes: int
    ec_load_s: float  # backward scan and state load
    replay_from: dict[int, int]  # T per input partition (all shards)
    empty: bool


@dataclass
class CECAggregate:
    spec: AggregateSpec
    log: OutputLog
    shards: int
    input_partitions: tuple[int, ...]
    policy: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    _shards: list[AggregateShard] = field(default_factory=list)
    _route: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._shards = [
            AggregateShard(
                kind=self.spec.kind,
                aggregate=self.spec.aggregate,
                emit=partial(self.log.append, s),
                input_partitions=self.input_partitions,
                policy=self.policy,
            )
            for s in range(self.shards)
        ]

    def shard_of(self, key: str) -> int:
        shard = self._route.get(key)
        if shard is None:
            shard = self._route[key] = zlib.crc32(key.encode()) % self.shards
        return shard

    def recover(self) -> RecoveryReport:
        """Every shard's eventual checkpoint from its partition of the output log (recovery.py),
        loaded; returns where the input replay starts."""
        t0 = time.monotonic()
        bounds = self.log.bounds(list(range(self.shards)))
        if not self.policy.footprints and any(end > low for low, end in bounds.values()):
            raise CECError(
                f"{self.log.topic} holds results of an earlier run, and footprints are off "
                "(cec_footprints=false, the benchmarks' baseline): its open windows cannot be "
                "recovered. Use a fresh output topic, or turn footprints on."
            )
        checkpoints = shard_checkpoints(self.log, bounds)
        for shard, checkpoint in zip(self._shards, checkpoints, strict=True):
            shard.load(checkpoint)
        return RecoveryReport(
            open_windows=sum(len(c.footprints) for c in checkpoints),
            extent=sum(c.extent for c in checkpoints),
            torn=sum(c.torn for c in checkpoints),
            scanned_bytes=self.log.cost.bytes,
            ec_load_s=time.monotonic() - t0,
            replay_from=replay_start(checkpoints, self.input_partitions),
            empty=all(c.empty for c in checkpoints),
        )

    def process_batch(self, rows: list[InputTuple]) -> None:
        """Rows in input order (partition, then offset); each shard gets its own, in order."""
        per_shard: list[list[InputTuple]] = [[] for _ in self._shards]
        shard_of = self.shard_of
        for row in rows:
            per_shard[shard_of(row[2])].append(row)
        for shard, own in zip(self._shards, per_shard, strict=True):
            shard.process_batch(own)
        self.log.flush()

    def stats(self) -> dict[str, int]:
        total = ShardStats()
        for shard in self._shards:
            for name in vars(total):
                setattr(total, name, getattr(total, name) + getattr(shard.stats, name))
        return {
            **vars(total),
            "open_windows": sum(len(s.windows) for s in self._shards),
            "extent": max((s.extent() for s in self._shards), default=0),
            "replay_size": max((s.replay_size() for s in self._shards), default=0),
        }


def shard_checkpoints(
    log: OutputLog, bounds: dict[int, tuple[int, int]]
) -> list[EventualCheckpoint]:
    """Every shard's eventual checkpoint, read back from its partition (low, end) of the log."""
    return [
        eventual_checkpoint(log.newest_first(shard, low, end), end)
        for shard, (low, end) in sorted(bounds.items())
    ]


def replay_start(
    checkpoints: list[EventualCheckpoint], input_partitions: tuple[int, ...]
) -> dict[int, int]:
    """Where the input replay starts: per input partition the oldest T of all shards; from the
    start (0) when a shard has nothing in the log (its recovery reads the input from there)."""
    if any(c.empty for c in checkpoints):
        return dict.fromkeys(input_partitions, 0)
    start: dict[int, int] = {}
    for checkpoint in checkpoints:
        for p, o in checkpoint.replay_from.items():
            start[p] = min(start.get(p, o), o)
    return start


def replay_floor(log: OutputLog) -> dict[int, int]:
    """T of the output log's eventual checkpoint as of now, per input partition: a recovery
    never reads the input below it (T only moves forward: footprints are only ever added
    later in the log), so garbage collection may delete input records below it, not above
    ({}: nothing may be deleted, a shard would read the input from its start)."""
    return replay_start(shard_checkpoints(log, log.bounds(log.partitions())), ())
