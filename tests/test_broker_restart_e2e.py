"""A supervised job whose broker restarts empty (tansu forgets every record; a Kafka node
restarted on a lost disk) refuses to go
on from nothing: its source sees the log end before the offsets its checkpoint already read
and fails the query with both offsets in the job's log (issue 37, item 4).

A batch in flight when the broker goes can fail first at the sink (its topic is gone too); the
supervisor's restart then meets the refusal: the job never runs on from nothing."""

from __future__ import annotations

import pytest

from recovery_lib.errors import JobFailed
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.kafka.broker import EmbeddedBroker
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.producer import ensure_topics, produce_events
from recovery_lib.processes import free_port
from recovery_lib.runtime.checkpoint import last_committed
from recovery_lib.runtime.launch import JobLaunch
from recovery_lib.runtime.supervisor import ProcessSpec, Supervisor
from recovery_lib.settings import Settings
from tests.helpers import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.long]


def test_a_job_refuses_to_run_on_a_restarted_empty_broker(tmp_path, settings_env):
    settings = Settings(home=tmp_path / "home")
    port = free_port()
    broker = EmbeddedBroker(settings, port=port)
    bootstrap = broker.start().bootstrap
    settings_env(KAFKA_BOOTSTRAP=bootstrap)  # this test's broker, for the producer and the job
    gen = GeneratorConfig(topic_prefix="restart", partitions=2)
    ensure_topics(gen)
    produce_events(gen, count=20_000)
    launch = JobLaunch(
        "jobs.nexmark.q1:JOB",
        name="q1",
        prefix=gen.topic_prefix,
        partitions=gen.partitions,
        checkpoints=str(tmp_path / "ck"),
        max_records=2_000,
    )
    sup = Supervisor(
        ProcessSpec.for_job(launch, env={"KAFKA_BOOTSTRAP": bootstrap}, max_restarts=1),
        tmp_path / "sup",
    )
    try:
        sup.start()
        sup.wait_ready(240)
        wait_for(lambda: (last_committed(tmp_path / "ck" / "q1") or -1) >= 2, 240, "3 batches")
        assert list(read_topic(f"{gen.topic_prefix}.out.q1"))  # it wrote before the restart
        broker.stop()
        # The same address, an empty log (Kafka's log dir is durable: a new one is empty).
        broker = EmbeddedBroker(settings, port=port, log_dir=tmp_path / "empty")
        broker.start()
        ensure_topics(gen)
        produce_events(gen, count=100)  # fewer records than the checkpoint already read
        wait_for(lambda: _gave_up(sup), 480, "the job to refuse and exit")
        log = " ".join((tmp_path / "sup" / "job.log").read_text().split())
        assert "the input is behind the query's checkpoint" in log, log[-3000:]
        assert "the log ends at" in log and "read up to" in log
    finally:
        sup.stop()
        broker.stop()


def _gave_up(sup: Supervisor) -> bool:
    """One supervision step; True once the job died with its restart budget spent."""
    try:
        sup.tick()
    except JobFailed:
        return True
    return False
