"""Experiment settings: several failure kinds taking turns, jitter, and the errors that say
what to fix (no Spark)."""

from __future__ import annotations

import pytest

from recovery_lib.experiment.runner import ExperimentConfig


def test_several_kinds_take_turns():
    cfg = ExperimentConfig(fail="driver-kill, mid-write,task-retry", repeat=4, duration_s=200)
    cfg.validate()
    assert cfg.kinds == ("driver-kill", "mid-write", "task-retry")
    assert ExperimentConfig(fail=None).kinds == ()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"fail": "driver-kill,meteor"}, "unknown failure kind 'meteor'"),
        ({"fail": "mid-write,executor-kill"}, "add --cluster"),
        ({"jitter_s": 25.0, "every_s": 20.0}, "--jitter"),
        ({"fail": "pause-mid-write", "cluster": True}, "leave out --cluster"),
        ({"repeat": 3, "every_s": 20.0, "jitter_s": 15.0, "duration_s": 70}, "do not fit"),
        ({"fail": "net-reset", "net_reset_api": "join"}, "--net-reset-api must be one of"),
        ({"fail": "net-blackhole", "cluster": True}, "drop --cluster"),
        ({"fail": "broker-pause", "replay": {"persons": "mine"}}, "record the input"),
        ({"fail": "net-latency", "pause_s": 0.0}, "--pause"),
        ({"fail": "poison", "repeat": 2, "every_s": 20.0}, "one poison per run"),
        ({"fail": "poison", "mode": "standby"}, "use --mode native"),
        ({"fail": "poison", "mode": "causal"}, "use --mode native"),
    ],
)
def test_bad_settings_are_refused_with_the_fix(changes, message):
    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**{"duration_s": 100, **changes}).validate()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sink": "dedup"}, "use --sink release"),
        ({"fail": "driver-kill,torn-write"}, "not torn-write"),
        ({"cluster": True}, "Leave out --cluster"),
        ({"victim": "c"}, "--victim 'c'"),
        ({"mode": "liverobin", "victim": "leader"}, "choose one of a, b"),
        ({"mode": "liverobin", "heartbeat_period_s": 0.0}, "--heartbeat-period"),
    ],
)
def test_replication_experiments_refuse_what_two_replicas_cannot_do(changes, message):
    settings = {"query": "q1", "mode": "kazoo", "sink": "release", "duration_s": 100}
    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**{**settings, **changes}).validate()


def test_a_nondeterministic_job_is_replicated_causally():
    from recovery_lib.job.spec import resolve_job
    from recovery_lib.modes import ModeRequest, get_mode
    from recovery_lib.runtime.launch import ProcessMode

    ExperimentConfig(query="prices", mode="liverobin", sink="release").validate()
    kazoo = get_mode("kazoo")
    assert kazoo.process_mode(ModeRequest(resolve_job("prices"))) is ProcessMode.CAUSAL
    assert kazoo.process_mode(ModeRequest(resolve_job("q3"))) is ProcessMode.NATIVE


def test_a_replication_experiment_hands_its_options_to_the_replica_set():
    cfg = ExperimentConfig(
        query="q3", mode="kazoo", sink="release", victim="follower", replace_after_s=5.0
    )
    cfg.validate()
    assert cfg.mode_options.victim == "follower"
    assert cfg.mode_options.replace_after_s == 5.0


def test_leader_kills_run_on_their_own_cluster_and_do_not_mix_with_the_proxys_faults():
    ExperimentConfig(query="q3", sink="transactional", fail="broker-kill").validate()
    with pytest.raises(ValueError, match="broker-kill runs on a private three-node Kafka"):
        ExperimentConfig(query="q3", fail="broker-kill,net-reset", repeat=2, every_s=10).validate()
    with pytest.raises(ValueError, match="drop --cluster"):
        ExperimentConfig(query="q3", fail="broker-kill", cluster=True).validate()
