"""The recovery line: the newest consistent set of checkpoints after failures, found by
rollback propagation over the checkpoint graph (CheckMate section III-B; Elnozahy et al.).

Start: a failed stage at its latest checkpoint, a live stage at its current (volatile) state.
Repeat until nothing moves: if a receiver's line point received a message of some channel
that the sender's line point had not sent (an orphan), move the receiver back to its newest
checkpoint without such messages.

A sender whose re-run sends exactly what it sent before (deterministic, or causal logging of
its nondeterminism) creates no orphans when it rolls back: its re-sent messages are the ones
already received, with the same ids, and the release barrier / dedup drops the copies. Such
senders are skipped, which is what keeps recovery local (``Stage.replays_outputs``). With
``strict=True`` every sender counts, as in the paper's protocols.

A checkpoint is invalid (useless) when no consistent set of checkpoints contains it: then it
lies on a Z-cycle. It is found by fixing its stage at it, every other stage at its latest
checkpoint, and propagating: the set of consistent cuts is closed under the component-wise
maximum, so propagation reaches the newest consistent cut below that start, which keeps the
checkpoint exactly when some consistent cut contains it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from recovery_lib.errors import ConfigurationError
from recovery_lib.protocols.checkpoints import INITIAL, CheckpointGraph, StageCheckpoint


@dataclass
class RecoveryLine:
    points: dict[str, StageCheckpoint]
    failed: frozenset[str]
    # Stages that must roll back: the failed ones, and live ones the propagation moved.
    rolled_back: dict[str, int] = field(default_factory=dict)  # stage -> checkpoint index
    steps: int = 0  # propagation steps (orphan channels resolved)

    @property
    def local(self) -> bool:
        """Only failed stages roll back."""
        return set(self.rolled_back) <= set(self.failed)


def propagate(
    graph: CheckpointGraph,
    start: Mapping[str, StageCheckpoint],
    strict: bool = False,
    pinned: tuple[str, int] | None = None,
) -> tuple[dict[str, StageCheckpoint], int]:
    """Roll ``start`` back until no orphans remain; returns the points and the steps taken.
    With ``pinned=(stage, index)`` stop as soon as that stage would go below ``index``."""
    line = dict(start)
    steps = 0
    changed = True
    while changed:
        changed = False
        for sender, topic, receiver in graph.channels():
            if not strict and graph.stages[sender].replays_outputs:
                continue
            point = line[receiver]
            if not graph.orphans(point, topic, line[sender]):
                continue
            line[receiver] = graph.latest_without_orphans(receiver, point, topic, line[sender])
            steps += 1
            changed = True
            if pinned is not None and receiver == pinned[0] and line[receiver].index < pinned[1]:
                return line, steps
    return line, steps


def recovery_line(
    graph: CheckpointGraph,
    failed: Iterable[str],
    current: Mapping[str, StageCheckpoint] | None = None,
    strict: bool = False,
) -> RecoveryLine:
    """The line after ``failed`` stages lost their volatile state. ``current``: the live
    stages' present positions (volatile points); a live stage not in it starts at its latest
    checkpoint."""
    failed = frozenset(failed)
    unknown = failed - set(graph.stages)
    if unknown:
        raise ConfigurationError(
            f"unknown stages {sorted(unknown)}; stages: {sorted(graph.stages)}"
        )
    current = current or {}
    start = {
        name: (current[name] if name in current and name not in failed else graph.latest(name))
        for name in graph.stages
    }
    points, steps = propagate(graph, start, strict)
    rolled = {
        name: point.index
        for name, point in points.items()
        if name in failed or point is not start[name]
    }
    return RecoveryLine(points, failed, rolled, steps)


def invalid_checkpoints(
    graph: CheckpointGraph,
    strict: bool = True,
    current: Mapping[str, StageCheckpoint] | None = None,
) -> list[StageCheckpoint]:
    """Checkpoints no consistent set of checkpoints contains (on a Z-cycle). ``current``:
    live stages' present states, which count as their next checkpoint (without them, a
    checkpoint that only a stage's future checkpoint would make consistent counts as
    invalid)."""
    current = current or {}
    latest = {name: current.get(name) or graph.latest(name) for name in graph.stages}
    out = []
    for checkpoint in graph.checkpoints():
        start = {**latest, checkpoint.stage: checkpoint}
        points, _ = propagate(graph, start, strict, (checkpoint.stage, checkpoint.index))
        if points[checkpoint.stage].index < checkpoint.index:
            out.append(checkpoint)
    return out


def invalid_share(
    graph: CheckpointGraph,
    strict: bool = True,
    current: Mapping[str, StageCheckpoint] | None = None,
) -> float:
    """Invalid checkpoints as a share of all checkpoints taken (CheckMate's "% invalid")."""
    total = sum(1 for c in graph.checkpoints() if c.index != INITIAL)
    return len(invalid_checkpoints(graph, strict, current)) / total if total else 0.0
