"""HMNR's promise, checked on random message patterns: with its forced checkpoints no
checkpoint is useless (none lies on a Z-cycle), where the same pattern without them (UNC)
can leave useless ones. Also the micro-batch mapping: the cut before a forcing record."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from recovery_lib.protocols.communication_induced import Clocks, decide
from recovery_lib.protocols.recovery_line import invalid_checkpoints
from tests.unit.test_recovery_line import Run, topic


@dataclass
class CicRun(Run):
    """Run with HMNR: messages carry the sender's clocks; a receive may force a checkpoint."""

    clocks: dict[int, Clocks] = field(default_factory=dict)
    queues: dict[str, list[bytes]] = field(default_factory=dict)
    forced: int = 0

    def clock(self, i: int) -> Clocks:
        return self.clocks.setdefault(i, Clocks.initial(i, self.n))

    def apply(self, event: tuple[str, int, int]) -> None:
        kind, i, j = event
        if kind == "send" and i != j:
            self.clock(i).send(j)
            self.queues.setdefault(topic(i, j), []).append(self.clock(i).piggyback())
        elif kind == "receive" and i != j:
            t = topic(j, i)
            got = self.received.get(t, 0)
            if got >= len(self.queues.get(t, [])):
                return
            m = Clocks.parse(self.queues[t][got])
            if self.clock(i).must_force(m):
                self.forced += 1
                self.apply(("checkpoint", i, i))
            self.clock(i).deliver(m)
        elif kind == "checkpoint":
            self.clock(i).checkpoint()
        super().apply(event)


events = st.lists(
    st.tuples(
        st.sampled_from(["send", "send", "receive", "receive", "checkpoint"]),
        st.integers(0, 2),
        st.integers(0, 2),
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(events)
def test_hmnr_leaves_no_useless_checkpoint(evs):
    run = CicRun(3)
    for event in evs:
        run.apply(event)
    final = {f"s{i}": run.state(i, 10_000, volatile=True) for i in range(3)}
    assert invalid_checkpoints(run.graph(), current=final) == []


def test_without_forced_checkpoints_the_same_pattern_has_useless_ones():
    pattern = [
        ("send", 1, 0),
        ("receive", 0, 1),
        ("checkpoint", 0, 0),
        ("send", 0, 1),
        ("receive", 1, 0),
        ("checkpoint", 1, 0),
    ]
    unc, cic = Run(2), CicRun(2)
    for event in pattern:
        unc.apply(event)
        cic.apply(event)
    final = {f"s{i}": unc.state(i, 99, volatile=True) for i in range(2)}
    # s0's checkpoint received m1 (sent by s1 before its checkpoint, so s1's initial state
    # orphans it) and s1's checkpoint received m2 (sent after s0's): on a Z-cycle.
    assert [(c.stage, c.index) for c in invalid_checkpoints(unc.graph(), current=final)] == [
        ("s0", 0)
    ]
    final = {f"s{i}": cic.state(i, 99, volatile=True) for i in range(2)}
    assert invalid_checkpoints(cic.graph(), current=final) == [] and cic.forced == 1


def test_piggyback_round_trips_and_is_small():
    clocks = Clocks.initial(1, 3)
    clocks.checkpoint()
    clocks.send(2)
    m = Clocks.parse(clocks.piggyback())
    assert m == (clocks.lc, clocks.ckpt, clocks.taken, clocks.greater)
    assert len(clocks.piggyback()) < 20


def _z_cycle_headers() -> tuple[Clocks, bytes]:
    """Stage 0 sent to stage 1 in its current interval; stage 1 checkpointed and answers:
    its record makes stage 0 force a checkpoint (C1)."""
    s0, s1 = Clocks.initial(0, 2), Clocks.initial(1, 2)
    s0.send(1)
    m = s0.piggyback()
    s1.deliver(Clocks.parse(m))
    s1.checkpoint()
    s1.send(0)
    answer = s1.piggyback()
    assert s0.must_force(Clocks.parse(answer))
    return s0, answer


def test_the_cut_ends_the_batch_before_the_forcing_record():
    s0, answer = _z_cycle_headers()
    plain = Clocks.initial(1, 2).piggyback()  # a record that forces nothing
    headers = {("a", 0): [(10, None), (11, answer), (12, None)], ("b", 0): [(5, plain)]}
    start = {"a": {"0": 10}, "b": {"0": 5}}
    end = {"a": {"0": 13}, "b": {"0": 6}}
    decided = decide(s0, headers, start, end)
    # a/0: the record at 10 is delivered, the batch ends before 11; b comes after a in the
    # delivery order, so it delivers nothing in this batch.
    assert end == {"a": {"0": 11}, "b": {"0": 5}}
    assert decided.forced and decided.delivered == 1 and not decided.force_previous


def test_a_forcing_first_record_makes_the_previous_batch_the_checkpoint():
    s0, answer = _z_cycle_headers()
    lc = s0.lc
    start, end = {"a": {"0": 11}}, {"a": {"0": 12}}
    decided = decide(s0, {("a", 0): [(11, answer)]}, start, end)
    assert decided.force_previous and not decided.forced and end == {"a": {"0": 12}}
    assert decided.clocks.ckpt[0] == 2 and decided.clocks.lc >= lc + 1


def test_a_stage_with_two_inputs_keeps_both_inputs_deliveries_in_its_clocks(tmp_path, monkeypatch):
    """A stage has one cut policy per input; each decides from the same clocks on its own
    records. The batch's clocks are the merge of both (before: the last writer's only)."""
    from recovery_lib.protocols.communication_induced import ForcedCut, batch_state

    s1, s2 = Clocks.initial(1, 3), Clocks.initial(2, 3)
    s1.checkpoint()
    s1.checkpoint()  # stage 1 is in its third interval, stage 2 in its first
    s2.lc = 7  # and stage 2's Lamport clock is ahead
    from_1, from_2 = s1.piggyback(), s2.piggyback()
    options = {"protocolDir": str(tmp_path / "p"), "protocolStage": "join",
               "stageCheckpoint": str(tmp_path / "ck"), "protocolStageIndex": "0",
               "protocolStages": "3"}  # fmt: skip
    for name, header in (("left", from_1), ("right", from_2)):
        cut = ForcedCut(options)
        monkeypatch.setattr(cut, "_headers", lambda s, e, h=header, t=name: {(t, 0): [(0, h)]})
        cut.cut({name: {"0": 0}}, {name: {"0": 1}}, None)
    state = batch_state(tmp_path / "p", "join", 0)
    assert state is not None and state.delivered == 2
    assert state.clocks.ckpt == [1, 3, 1] and state.clocks.lc == 7
