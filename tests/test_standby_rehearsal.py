"""A standby's rehearsal in real Spark on the broker: one batch of the job's own query through
its own sink, held, writes nothing to the output topic, and a protocol's commit hook in the
job's sink options is not run; the warm loop's held write leaves the topic empty too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer

from jobs.keyed_state import build
from recovery_lib.ha.standby.rehearsal import keep_sink_warm, rehearsal_options
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.job.frames import OUTPUT, write_output
from recovery_lib.job.options import JobOptions
from recovery_lib.kafka.clients import client_config

pytestmark = [pytest.mark.spark, pytest.mark.broker]

EVENTS = 200


def _standby_opts(tmp_path: Path, events: str, out: str) -> JobOptions:
    """A keyed_state standby as the standby process holds it: epoch store, sink mode dedup,
    and a commit hook that would fail the batch if the rehearsal ran it."""
    return JobOptions(
        query="keyed_state",
        prefix="",
        inputs={"events": events},
        output_topic=out,
        dead_letter_topic=f"{out}.dlq",
        checkpoint_dir=str(tmp_path / "live"),
        output_mode="update",
        sink_mode="dedup",
        epoch=1,
        epoch_store=str(tmp_path / "epochs"),
        sink_options={"commitHook": "no_such_module:Hook"},
    )


def test_a_rehearsal_runs_one_held_batch_of_the_job_and_writes_nothing(
    spark, admin, topic_name: str, tmp_path: Path
) -> None:
    events, out = f"{topic_name}.events", f"{topic_name}.out"
    admin.create(events, partitions=2)
    admin.create(out, partitions=2)
    producer = Producer(client_config())
    for i in range(EVENTS):
        account = f"a{i % 20:03d}"
        producer.produce(events, json.dumps({"account": account, "amount": i}), account)
    assert producer.flush(30) == 0

    scratch = tmp_path / "rehearsal"
    standby = _standby_opts(tmp_path, events, out)
    # A standby reads through the follow policy; past the primary's shipped offset-log tail
    # (empty here) it cuts freely, so the rehearsal has a batch to run.
    standby.follow_log = str(tmp_path / "ship" / "tail" / "offsets")
    Path(standby.follow_log).mkdir(parents=True)
    opts = rehearsal_options(standby, scratch)
    query = write_output(build(spark, opts), opts, once=True)
    assert query.awaitTermination(180), "the rehearsal's one batch did not finish"
    assert query.exception() is None, query.exception()

    progress = query.lastProgress
    assert progress is not None and progress["numInputRows"] == EVENTS
    assert progress["stateOperators"][0]["numRowsTotal"] == 20  # every account in state
    assert (scratch / "keyed_state" / "commits" / "0").exists()  # the batch committed
    assert list(read_topic(out)) == [], "a rehearsal wrote outputs"


def test_the_warm_loops_held_write_leaves_the_output_empty(
    spark, admin, topic_name: str, tmp_path: Path
) -> None:
    out = f"{topic_name}.out"
    admin.create(out, partitions=2)
    opts = _standby_opts(tmp_path, f"{topic_name}.events", out)
    assert keep_sink_warm(spark, opts, tmp_path / "standby", OUTPUT)
    assert keep_sink_warm(spark, opts, tmp_path / "standby", OUTPUT)  # the workers are reused
    assert list(read_topic(out)) == []


def test_the_held_write_works_from_a_thread_of_its_own(
    spark, admin, topic_name: str, tmp_path: Path
) -> None:
    """PySpark pins a Python thread to a JVM thread of its own, where Spark finds no Python
    data source until the session is made active there (the standby's warm loop is one)."""
    import threading

    out = f"{topic_name}.out"
    admin.create(out, partitions=2)
    opts = _standby_opts(tmp_path, f"{topic_name}.events", out)
    errors: list[BaseException] = []

    def warm() -> None:
        try:
            keep_sink_warm(spark, opts, tmp_path / "standby", OUTPUT)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=warm)
    thread.start()
    thread.join(120)
    assert not thread.is_alive() and errors == []
    assert list(read_topic(out)) == []
