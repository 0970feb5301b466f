"""The replica set's wiring, without processes: what each replica runs (its own checkpoint,
the raw topic through the release sink, the mode's cut policy and guard), which replica a
failure hits, and the refusals that say what to fix."""

from __future__ import annotations

import json

import pytest

from recovery_lib.ha.replication.gate import raw_topic
from recovery_lib.ha.replication.kazoo import KAZOO_GUARD, KAZOO_POLICY, role_path
from recovery_lib.ha.replication.liverobin import LIVEROBIN_POLICY
from recovery_lib.ha.replication.replica_set import (
    Replacement,
    ReplacementOutOfOrder,
    ReplacementStatus,
    ReplicaState,
    ReplicationState,
)
from recovery_lib.ha.replication.shared_determinants import SHARED_SOURCE
from recovery_lib.modes.replication import replica_set_for_job
from recovery_lib.runtime.launch import JobLaunch, parse_pairs


@pytest.fixture(autouse=True)
def _broker_address(settings_env):
    """Jobs read their broker's address when they parse their arguments; nothing connects."""
    settings_env(KAFKA_BOOTSTRAP="127.0.0.1:9")


def _options(args: list[str], flag: str) -> dict[str, str]:
    return parse_pairs([args[i + 1] for i, a in enumerate(args) if a == flag], flag)


def _value(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, (flag, args)
    return args[args.index(flag) + 1]


def test_each_kazoo_replica_writes_the_raw_topic_from_its_own_checkpoint(tmp_path):
    rs = replica_set_for_job("q3", "kazoo", tmp_path, "px", "px.out", partitions=2)
    assert rs.output_topic == "px.out"
    assert rs.input_topics == ["px.persons", "px.auctions"]
    a, b = rs.args("a"), rs.args("b")
    assert _value(a, "--checkpoints") != _value(b, "--checkpoints")
    for replica, args in (("a", a), ("b", b)):
        assert _value(args, "--output-topic") == raw_topic("px.out")
        assert _value(args, "--sink-mode") == "release"
        source, sink = _options(args, "--source-option"), _options(args, "--sink-option")
        assert source["cutPolicy"] == KAZOO_POLICY and source["replicaId"] == replica
        assert source["replicaCheckpoint"] == str(rs.checkpoint(replica))
        assert sink["writeGuard"] == KAZOO_GUARD
        assert sink["replicaCheckpoint"] == source["replicaCheckpoint"]
        assert sink["orderTopic"] == source["orderTopic"] == "px.out.order"


def test_liverobin_replicas_cut_at_the_heartbeat_index_and_have_no_guard(tmp_path):
    rs = replica_set_for_job("q1", "liverobin", tmp_path, "px", "px.out")
    source, sink = (
        _options(rs.args("a"), "--source-option"),
        _options(rs.args("a"), "--sink-option"),
    )
    assert source == {"cutPolicy": LIVEROBIN_POLICY, "heartbeatIndex": "px.out.heartbeats"}
    assert "writeGuard" not in sink and sink["replicaId"] == "a"


def test_an_experiments_job_arguments_are_kept_and_its_topics_read_as_the_job_reads_them(
    tmp_path,
):
    rs = replica_set_for_job(
        "q1",
        "kazoo",
        tmp_path,
        "px",
        "exp.out",
        inputs={"bids": "recorded.bids"},
        base=JobLaunch("q1", checkpoints="/elsewhere", sink_mode="dedup", run_id="r1"),
    )
    args = rs.args("b")
    assert _value(args, "--checkpoints") == str(tmp_path / "replicas" / "b" / "checkpoints")
    assert _value(args, "--sink-mode") == "release"
    assert _value(args, "--run-id") == "r1"
    assert rs.input_topics == ["recorded.bids"]


def test_a_failure_hits_the_leader_or_the_follower_as_kazoo_last_decided(tmp_path):
    def decided(replica: str, role: str, epoch: int) -> None:
        path = role_path(tmp_path / "replicas", replica)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"role": role, "epoch": epoch}))

    leader = replica_set_for_job("q1", "kazoo", tmp_path, "px", "px.out")
    follower = replica_set_for_job("q1", "kazoo", tmp_path, "px", "px.out", victim="follower")
    assert leader.victim_replica() is None  # nobody leads yet: nothing to aim at
    decided("a", "follower", 1)
    decided("b", "leader", 1)
    assert leader.victim_replica() == "b" and follower.victim_replica() == "a"
    decided("a", "leader", 2)  # a took over; b's file is stale (a zombie's last word)
    assert leader.victim_replica() == "a" and follower.victim_replica() == "b"
    leader.replicas["a"].dead = True
    assert leader.victim_replica() == "b"  # the only live replica claiming to lead
    assert follower.victim_replica() is None or follower.victim_replica() != "a"


@pytest.mark.parametrize(
    ("mode", "kw", "message"),
    [
        ("zookeeper", {}, "choose one of"),
        ("liverobin", {"victim": "leader"}, "LiveRobin has no leader"),
        ("kazoo", {"victim": "c"}, "victim 'c'"),
    ],
)
def test_bad_replica_sets_are_refused_with_the_fix(tmp_path, mode, kw, message):
    with pytest.raises(ValueError, match=message):
        replica_set_for_job("q1", mode, tmp_path, "px", "px.out", **kw)


def test_causal_replicas_share_their_determinant_streams(tmp_path):
    rs = replica_set_for_job(
        "prices",
        "liverobin",
        tmp_path,
        "px",
        "px.out",
        base=JobLaunch("prices", causal=True, params={"price_url": "http://127.0.0.1:9"}),
    )
    for replica in ("a", "b"):
        causal = _options(rs.args(replica), "--causal-option")
        assert causal["streamSource"] == SHARED_SOURCE and causal["replicaId"] == replica
        assert causal["leaseDir"] == str(tmp_path / "replicas")
    assert "--causal-option" not in replica_set_for_job("q1", "kazoo", tmp_path, "p", "o").args("a")


def test_a_job_missing_its_parameters_is_refused_before_any_process_starts(tmp_path):
    with pytest.raises(ValueError, match="job prices needs --param price_url"):
        replica_set_for_job("prices", "kazoo", tmp_path, "px", "px.out")


def test_the_replication_state_a_set_reports_reads_back_as_written():
    state = ReplicationState(
        job="q3",
        output_topic="px.out",
        mode="kazoo",
        replicas={
            "a": ReplicaState(True, 1, 41, 17, "follower", 2),
            "b": ReplicaState(True, 0, 42, 18, "leader", 2),
        },
        lag_batches=1,
        gate_forwarded=1200,
        gate_dropped={"a": 3},
        heartbeats=None,
        replacements=(
            Replacement(
                "a",
                "exit -9",
                1000,
                "b",
                started_ms=31_000,
                copy_batch=12,
                joined_ms=52_000,
                status=ReplacementStatus.JOINED,
            ),
        ),  # fmt: skip
    )
    encoded = json.loads(json.dumps(state.to_dict()))
    assert encoded["replacements"][0]["kind"] == "replacement"
    assert encoded["replacements"][0]["status"] == "joined"
    assert ReplicationState.from_dict(encoded) == state
    del encoded["replacements"][0]["status"]  # written before the status was: from the times
    assert ReplicationState.from_dict(encoded) == state


def test_a_replacement_takes_its_steps_in_order():
    r = Replacement("a", "exit -9", 1000, "b")
    assert r.pending and r.status is ReplacementStatus.WAITING
    with pytest.raises(ReplacementOutOfOrder, match="waiting: it cannot become joined"):
        r.join(2000)
    r.start("b", 12, 1500)
    assert r.pending and r.status is ReplacementStatus.CATCHING_UP
    r.join(2000)
    assert not r.pending and r.joined_ms == 2000
    with pytest.raises(ReplacementOutOfOrder, match="joined: it cannot become died"):
        r.die(3000)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sink_mode": "dedup"}, "set sink_mode: release"),
        ({"placement": "cluster"}, "placement: local"),
        ({"job": "prices", "params": {"price_url": "x"}, "process": "native"}, "process: causal"),
        ({"mode": "kazo"}, "mode 'kazo': choose one of native, causal"),
    ],
)
def test_jobs_file_replication_says_what_to_fix(changes, message):
    from pydantic import ValidationError

    from recovery_lib.ops.config import StreamJob

    entry = {"name": "q3r", "job": "q3", "mode": "kazoo", "sink_mode": "release"}
    job = StreamJob(**entry)
    assert [p.parts[-2] for p in job.replica_checkpoint_dirs] == ["a", "b"]
    assert job.checkpoint_dir == job.replica_checkpoint_dirs[0]
    with pytest.raises(ValidationError, match=message):
        StreamJob(**{**entry, **changes})


def test_a_nondeterministic_replicated_job_runs_causal_unless_told_otherwise():
    from recovery_lib.ops.config import StreamJob

    entry = {"name": "p", "job": "prices", "params": {"price_url": "x"}, "sink_mode": "release"}
    assert StreamJob(**entry, mode="kazoo").process_mode.causal
    assert StreamJob(**entry, mode="liverobin", process="causal").process_mode.causal


@pytest.mark.parametrize(
    ("legacy", "mode", "process"),
    [
        ({"standby": True}, "standby", "native"),
        ({"standby": True, "mode": "causal"}, "standby", "causal"),
        ({"replication": "kazoo", "sink_mode": "release"}, "kazoo", "native"),
        ({"replication": "none", "mode": "causal"}, "causal", None),
        ({"standby": "false", "mode": "causal"}, "causal", None),
        ({"standby": True, "mode": "standby"}, "standby", None),  # half migrated
    ],
)
def test_entries_with_the_old_standby_and_replication_keys_load_as_they_ran(legacy, mode, process):
    from recovery_lib.ops.config import StreamJob

    job = StreamJob(name="j", job="q3", **legacy)
    assert (job.mode, job.process and job.process.value) == (mode, process)


def test_the_old_keys_cannot_ask_for_both_a_standby_and_replicas():
    from pydantic import ValidationError

    from recovery_lib.ops.config import StreamJob

    with pytest.raises(ValidationError, match="standby off"):
        StreamJob(name="j", job="q3", standby=True, replication="kazoo", sink_mode="release")


def test_a_process_the_mode_does_not_run_is_refused():
    from pydantic import ValidationError

    from recovery_lib.ops.config import StreamJob

    with pytest.raises(ValidationError, match="mode causal runs its processes causal; leave"):
        StreamJob(name="j", job="q3", mode="causal", process="native")


# -- supervision: death, replacement from the survivor's state, joining ---------------------------


class FakeReplica:
    """A replica process as the set sees it: alive or dead, ready, and a checkpoint it commits."""

    def __init__(self, checkpoint) -> None:  # noqa: ANN001
        self.checkpoint, self.cause, self.ready = checkpoint, None, True
        self.started = self.killed = self.stopped = 0
        self.pid = 100

    def commit(self, upto: int) -> None:
        for log in ("offsets", "commits"):
            (self.checkpoint / log).mkdir(parents=True, exist_ok=True)
            for b in range(upto + 1):
                (self.checkpoint / log / str(b)).write_text(f'v1\n{{}}\n{{"in": {{"0": {b}}}}}')
        (self.checkpoint / "state" / "0" / "0").mkdir(parents=True, exist_ok=True)
        (self.checkpoint / "state" / "0" / "0" / f"{upto + 1}.delta").write_text("s")

    def start(self) -> None:
        self.started += 1

    def check(self):  # noqa: ANN201
        return self.cause

    def kill_group(self, sig=None) -> None:  # noqa: ANN001
        self.killed += 1

    def is_ready(self) -> bool:
        return self.ready

    def stop(self, timeout_s: float = 30.0) -> None:
        self.stopped += 1


def test_a_dead_replica_is_replaced_from_the_survivors_state_and_joins(tmp_path, monkeypatch):
    rs = replica_set_for_job("q1", "liverobin", tmp_path, "px", "px.out", replace_after_s=0)
    rs.join_lag_batches = 1
    made: list[FakeReplica] = []

    def fake(replica: str) -> FakeReplica:
        made.append(FakeReplica(rs.checkpoint(replica)))
        return made[-1]

    monkeypatch.setattr(rs, "_supervisor", fake)
    rs.replicas = {r: type(rep)(r, fake(r)) for r, rep in rs.replicas.items()}
    a, b = rs.replicas["a"].sup, rs.replicas["b"].sup
    b.commit(7)
    a.commit(5)
    assert rs.tick() == ["a", "b"] and rs.ready_for_next_failure()
    a.pid, b.pid = 1, 2
    assert rs.front() == "b" and rs.pid == 2  # the one that committed most speaks for the set
    assert rs.live_checkpoints == rs.replica_dir("b") / "checkpoints"
    a.cause = "exit -9"
    rs.replace_after_s = 3600  # first: the death alone
    assert rs.tick() == ["b"] and a.killed == 1
    assert set(rs.failed) == {"a"} and not rs.ready_for_next_failure()
    assert rs.live_checkpoints == rs.replica_dir("b") / "checkpoints"
    rs.replace_after_s = 0
    assert rs.tick() == ["a", "b"]  # replaced: a new incarnation from b's copy
    new = rs.replicas["a"].sup
    assert new is not a and new.started == 1 and rs.replicas["a"].incarnation == 1
    assert (tmp_path / "replicas" / "a.dead-1").is_dir()  # the dead one's directory, kept
    (replacement,) = rs.replacements
    assert replacement.survivor == "b" and replacement.copy_batch == 7
    assert sorted(p.name for p in (rs.checkpoint("a") / "commits").iterdir()) == [
        str(i) for i in range(8)
    ]  # b's logs up to its last commit, not a's old ones
    new.ready = False
    rs.tick()
    assert replacement.joined_ms is None  # not serving yet
    new.ready = True
    b.commit(9)  # b went on; a's copy ends at 7: two batches behind
    rs.tick()
    assert replacement.joined_ms is None
    rs.join_lag_batches = 2
    rs.tick()
    assert replacement.joined_ms is None  # within the lag, but it never ran a batch of its own
    rs.join_lag_batches = 1
    new.commit(8)
    rs.tick()
    assert replacement.joined_ms is not None and not rs.failed and rs.ready_for_next_failure()
    assert [t["kind"] for t in rs.takeovers] == ["replacement"]
    state = rs.status()
    assert state.replicas["a"].incarnation == 1 and state.lag_batches == 1
    assert state.problems(replacement.joined_ms + 10**9, 30, 300) == []
    rs.stop()
    assert a.stopped == 1 and new.stopped == 1 and b.stopped == 1


def test_a_replacement_that_dies_before_joining_is_replaced_again(tmp_path, monkeypatch):
    rs = replica_set_for_job("q1", "liverobin", tmp_path, "px", "px.out", replace_after_s=0)
    monkeypatch.setattr(rs, "_supervisor", lambda r: FakeReplica(rs.checkpoint(r)))
    rs.replicas = {r: type(rep)(r, rs._supervisor(r)) for r, rep in rs.replicas.items()}
    rs.replicas["b"].sup.commit(3)
    rs.replicas["a"].sup.cause = "exit -9"
    rs.tick()  # dead, and replaced at once
    rs.replicas["a"].sup.ready = False  # the replacement's query is not up yet
    rs.tick()
    rs.replicas["a"].sup.cause = "no heartbeat for 10 s"  # and it dies too
    rs.tick()
    first, second = rs.replacements
    assert first.died_ms is not None and first.joined_ms is None
    assert second.cause == "no heartbeat for 10 s" and rs.replicas["a"].incarnation == 2
    assert rs.status().problems(second.started_ms, 0, 300) == []  # the second is on its way
    later = second.started_ms + 301_000
    assert "has not caught up" in rs.status().problems(later, 0, 300)[0]


def test_when_both_replicas_are_dead_the_set_says_so(tmp_path, monkeypatch):
    rs = replica_set_for_job("q1", "liverobin", tmp_path, "px", "px.out", replace_after_s=3600)
    rs.replicas = {r: type(rep)(r, FakeReplica(rs.checkpoint(r))) for r, rep in rs.replicas.items()}
    for rep in rs.replicas.values():
        rep.sup.cause = "exit -9"
    with pytest.raises(RuntimeError, match="both replicas of q1 died"):
        rs.tick()
