"""Rollback propagation and invalid checkpoints against brute force on random message
patterns: stages exchanging messages over topics, checkpointing at random moments."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery_lib.protocols.checkpoints import CheckpointGraph, Stage, StageCheckpoint
from recovery_lib.protocols.recovery_line import (
    invalid_checkpoints,
    invalid_share,
    recovery_line,
)


def topic(i: int, j: int) -> str:
    return f"c{i}{j}"


@dataclass
class Run:
    """A simulated execution: ``n`` stages, FIFO channels between every pair."""

    n: int
    sent: dict[str, int] = field(default_factory=dict)
    received: dict[str, int] = field(default_factory=dict)
    taken: dict[int, list[StageCheckpoint]] = field(default_factory=dict)

    def stages(self, replaying: frozenset[int] = frozenset()) -> list[Stage]:
        others = range(self.n)
        return [
            Stage(
                f"s{i}",
                reads=tuple(topic(j, i) for j in others if j != i),
                writes=tuple(topic(i, j) for j in others if j != i),
                replays_outputs=i in replaying,
            )
            for i in others
        ]

    def state(self, i: int, index: int, volatile: bool = False) -> StageCheckpoint:
        reads = [topic(j, i) for j in range(self.n) if j != i]
        writes = [topic(i, j) for j in range(self.n) if j != i]
        return StageCheckpoint(
            f"s{i}",
            index,
            received={t: {0: self.received.get(t, 0)} for t in reads},
            sent={t: {0: self.sent.get(t, 0)} for t in writes},
            volatile=volatile,
        )

    def apply(self, event: tuple[str, int, int]) -> None:
        kind, i, j = event
        if kind == "send" and i != j:
            self.sent[topic(i, j)] = self.sent.get(topic(i, j), 0) + 1
        elif kind == "receive" and i != j:
            t = topic(j, i)
            if self.received.get(t, 0) < self.sent.get(t, 0):
                self.received[t] = self.received.get(t, 0) + 1
        elif kind == "checkpoint":
            own = self.taken.setdefault(i, [])
            own.append(self.state(i, len(own)))

    def graph(self, replaying: frozenset[int] = frozenset()) -> CheckpointGraph:
        return CheckpointGraph(self.stages(replaying), {f"s{i}": c for i, c in self.taken.items()})


def consistent(graph: CheckpointGraph, points: dict[str, StageCheckpoint], strict: bool) -> bool:
    return not any(
        graph.orphans(points[receiver], t, points[sender])
        for sender, t, receiver in graph.channels()
        if strict or not graph.stages[sender].replays_outputs
    )


def cuts(graph: CheckpointGraph, tops: dict[str, StageCheckpoint]):
    """Every combination of checkpoints at or below ``tops`` (a volatile top included)."""
    names = sorted(graph.stages)
    options = []
    for name in names:
        top = tops[name]
        below = [c for c in graph.history[name] if top.volatile or c.index <= top.index]
        options.append(below + ([top] if top.volatile else []))
    for combo in itertools.product(*options):
        yield dict(zip(names, combo, strict=True))


events = st.lists(
    st.tuples(
        st.sampled_from(["send", "send", "receive", "receive", "checkpoint"]),
        st.integers(0, 2),
        st.integers(0, 2),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(events, st.sets(st.integers(0, 2), max_size=1), st.frozensets(st.integers(0, 2)))
def test_the_line_is_the_newest_consistent_cut(evs, failed_ids, replaying):
    run = Run(3)
    for event in evs:
        run.apply(event)
    graph = run.graph(replaying)
    failed = {f"s{i}" for i in failed_ids}
    current = {f"s{i}": run.state(i, 10_000, volatile=True) for i in range(3)}
    for strict in (True, False):
        line = recovery_line(graph, failed, current, strict=strict)
        assert consistent(graph, line.points, strict)
        tops = {n: graph.latest(n) if n in failed else current[n] for n in graph.stages}
        best = [c for c in cuts(graph, tops) if consistent(graph, c, strict)]
        # The newest consistent cut below the start dominates every other one.
        for other in best:
            for name, point in other.items():
                ours = line.points[name]
                assert ours.volatile or (not point.volatile and point.index <= ours.index)
        assert set(line.rolled_back) >= failed


@settings(max_examples=300, deadline=None)
@given(events)
def test_invalid_checkpoints_are_those_no_consistent_cut_contains(evs):
    run = Run(3)
    for event in evs:
        run.apply(event)
    graph = run.graph()
    latest = {n: graph.latest(n) for n in graph.stages}
    useful = set()
    for cut in cuts(graph, latest):
        if consistent(graph, cut, strict=True):
            useful.update((c.stage, c.index) for c in cut.values())
    expected = {(c.stage, c.index) for c in graph.checkpoints() if (c.stage, c.index) not in useful}
    assert {(c.stage, c.index) for c in invalid_checkpoints(graph)} == expected


def test_a_z_cycle_makes_a_checkpoint_invalid():
    """s1 sends m1; s0 receives it and checkpoints (c0,0), then sends m2; s1 receives m2 and
    checkpoints (c1,0). c0,0 with s1's initial state orphans m1, with c1,0 it orphans m2;
    c1,0 with s0's initial state orphans m2 too: a Z-cycle through both, the domino effect."""
    run = Run(2)
    for event in [
        ("send", 1, 0),  # m1
        ("receive", 0, 1),
        ("checkpoint", 0, 0),  # c0,0
        ("send", 0, 1),  # m2, after c0,0
        ("receive", 1, 0),
        ("checkpoint", 1, 0),  # c1,0, after receiving m2
    ]:
        run.apply(event)
    graph = run.graph()
    assert {(c.stage, c.index) for c in invalid_checkpoints(graph)} == {("s0", 0), ("s1", 0)}
    assert invalid_share(graph) == 1.0
    line = recovery_line(graph, {"s0"})
    # s0 falls back past its useless checkpoint to its initial state; s1 follows (m2 orphan).
    assert line.rolled_back == {"s0": -1, "s1": -1}
    # A deterministic s0 re-sends m2 as it was: s1 keeps its checkpoint, the rest is replay.
    assert recovery_line(run.graph(frozenset({0, 1})), {"s0"}).rolled_back == {"s0": 0}


def test_a_deterministic_sender_keeps_recovery_local():
    run = Run(2)
    for event in [("send", 0, 1), ("receive", 1, 0), ("checkpoint", 0, 0), ("send", 0, 1)]:
        run.apply(event)
    run.apply(("receive", 1, 0))  # s1 received what s0 sent after its checkpoint
    current = {"s1": run.state(1, 99, volatile=True)}
    strict = recovery_line(run.graph(), {"s0"}, current)
    assert strict.rolled_back == {"s0": 0, "s1": -1} and not strict.local
    local = recovery_line(run.graph(frozenset({0})), {"s0"}, current)
    assert local.rolled_back == {"s0": 0} and local.local
    assert recovery_line(run.graph(frozenset({0})), {"s0"}, current, strict=True).rolled_back == (
        strict.rolled_back
    )


def test_one_writer_per_topic_and_known_stages():
    with pytest.raises(ValueError, match="its own output topic"):
        CheckpointGraph([Stage("a", (), ("t",)), Stage("b", (), ("t",))], {})
    graph = CheckpointGraph([Stage("a", (), ("t",))], {})
    with pytest.raises(ValueError, match="unknown stages"):
        recovery_line(graph, {"x"})
