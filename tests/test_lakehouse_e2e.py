"""Lakehouse table sinks end to end: q1 writes a Delta or Iceberg table through foreachBatch,
its driver is SIGKILLed, and then killed again between the table's commit and Spark's (the
mid-write kill of a driver-side sink). The oracle reads the table's rows (every copy) against a
failure-free reference run; the table itself shows one commit per batch and no batch twice. A
plain append, the foreachBatch a user writes without the guard, lands the re-run batch again."""

from __future__ import annotations

import pytest

from recovery_lib.experiment.runner import Experiment, ExperimentConfig

pytestmark = [pytest.mark.slow, pytest.mark.broker]


def run(**overrides) -> dict:
    cfg = ExperimentConfig(
        **{
            "query": "q1",
            "rate": 1_000.0,
            "duration_s": 28.0,
            "fail": "driver-kill,mid-write",
            "repeat": 2,
            "fail_at_s": 6.0,
            "every_s": 12.0,
            # A slow restart on a busy machine must not leave the second kill out (the run
            # would be inconclusive): the input goes on until it is in.
            "inject_grace_s": 120.0,
            **overrides,
        }
    )
    return Experiment(cfg).run()


def assert_fired(report: dict, kinds: list[str]) -> None:
    assert [f["kind"] for f in report["failures"]] == kinds, report["failures"]
    assert all(f["fired"] is True for f in report["failures"]), report["failures"]


def assert_one_commit_per_batch(table: dict) -> None:
    assert table["batch_commits"] == table["batches"] > 0, table
    assert all(not twice for twice in table["batches_twice"].values()), table
    assert table["zombie_commits"] == [], table


# Iceberg's run is in the long tier (CI time); the causal Iceberg test there covers it too.
@pytest.mark.parametrize("kind", ["delta", pytest.param("iceberg", marks=pytest.mark.long)])
def test_a_table_sink_is_exactly_once_through_a_driver_kill_and_a_kill_between_commits(
    kafka_bootstrap, kind
):
    report = run(sink=kind)
    assert_fired(report, ["driver-kill", "mid-write"])
    assert len(report["restarts"]) == 2, report["restarts"]
    c = report["consistency"]
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c
    assert c["outputs"] == c["reference_outputs"] > 0, c
    assert report["table"]["kind"] == kind
    assert_one_commit_per_batch(report["table"])
    assert report["output_records"] > 0  # the latency follower read the table's commits
    # What the consistency DAG runs for a job that writes a table: the oracle and the job's GX
    # suite on the table's rows, against the reference run's topic.
    from recovery_lib.ops.reports import consistency_report

    again = consistency_report(
        "q1", "", report["out_topics"]["reference"], table=report["table"]["table"]
    )
    assert again["verdict"] == "consistent" and again["ok"], again
    assert again["expectations"]["success"] and again["outputs"] == c["outputs"], again


@pytest.mark.long
@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_plain_append_lands_the_rerun_batch_twice_and_the_oracle_says_so(kafka_bootstrap, kind):
    # The same kill between the table's commit and Spark's: Spark re-runs the batch, and an
    # append without the guard writes it again. The oracle must see the copies.
    report = run(sink=f"{kind}-append", fail="mid-write", repeat=1, duration_s=20.0)
    assert_fired(report, ["mid-write"])
    c = report["consistency"]
    assert c["verdict"] == "inconsistent" and c["duplicated"] > 0, c
    assert c["guarantee"] == "at-least-once", c
    twice = [b for per_app in report["table"]["batches_twice"].values() for b in per_app]
    assert twice, report["table"]


@pytest.mark.long
def test_a_standby_takes_over_a_delta_table_and_the_old_epoch_never_commits_again(
    kafka_bootstrap,
):
    report = run(
        sink="delta", mode="standby", fail="driver-kill", repeat=1, fail_at_s=14.0, duration_s=30.0
    )
    assert_fired(report, ["driver-kill"])
    assert report["takeovers"], report["restarts"]
    c = report["consistency"]
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c
    table = report["table"]
    assert_one_commit_per_batch(table)
    assert len(table["epochs"]) >= 2, table  # the new primary commits in its own epoch


@pytest.mark.long
def test_a_causal_job_replays_its_random_and_service_calls_into_an_iceberg_table(
    kafka_bootstrap,
):
    # prices draws random numbers and calls an HTTP service: the re-run batch after the kill
    # between commits is skipped, and after the driver kill the replay recomputes the same
    # values (the oracle compares values, not only ids).
    report = run(query="prices", sink="iceberg", mode="causal", rate=500.0)
    assert_fired(report, ["driver-kill", "mid-write"])
    c = report["consistency"]
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c
    assert_one_commit_per_batch(report["table"])
