"""Apache Kafka as the project's broker: jars from Maven Central (make install), a durable log
dir that survives a restart, transactions that hold, a three-node cluster that rides out the
loss of a node, and start-up faults that say what to do."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from recovery_lib.kafka import apache
from recovery_lib.kafka.broker import EmbeddedBroker, running_state
from recovery_lib.kafka.capabilities import hides_aborted_records
from recovery_lib.kafka.exceptions import BrokerBinaryNotFound, BrokerStartError
from recovery_lib.processes import free_port, pid_alive
from recovery_lib.settings import Settings

pytestmark = pytest.mark.broker


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", broker_kind="kafka")


def produce(bootstrap: str, topic: str, values: list[bytes], **config: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **config})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0, "records left undelivered"


def read_all(bootstrap: str, topic: str, partitions: int = 1, expect: int = 0) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": "false",
        }
    )
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        idle = 0
        while time.monotonic() < deadline and (idle < 3 or len(got) < expect):
            msgs = [m for m in consumer.consume(1000, timeout=1.0) if m.error() is None]
            got += [m.value() for m in msgs]
            idle = 0 if msgs else idle + 1
    finally:
        consumer.close()
    return got


def wait_for_leaders(admin: AdminClient, topic: str, partitions: int, timeout_s: float = 30):
    """The topic's metadata once every partition has a leader (a created topic reaches the
    other nodes' metadata a moment later)."""
    deadline = time.monotonic() + timeout_s
    while True:
        meta = admin.list_topics(topic, timeout=10).topics[topic]
        ready = [p for p in meta.partitions.values() if p.leader >= 0 and p.error is None]
        if len(ready) == partitions:
            return meta
        assert time.monotonic() < deadline, f"{topic}: {len(ready)} of {partitions} have leaders"
        time.sleep(0.2)


@pytest.mark.long  # the default tier's test_chaos restarts a killed Kafka on its log dir too
def test_committed_records_survive_a_sigkill_and_restart_on_the_same_log_dir(settings):
    broker = EmbeddedBroker(settings)
    state = broker.start()
    try:
        assert state.kind == "kafka" and state.host == "127.0.0.1"
        assert running_state(settings).pid == state.pid
        produce(state.bootstrap, "durable", [f"r{i}".encode() for i in range(100)])
        os.kill(state.pid, signal.SIGKILL)  # no clean shutdown: what a crash leaves
        broker.stop()
        restarted = EmbeddedBroker(settings)
        again = restarted.start()
        try:
            assert again.bootstrap == state.bootstrap  # the same address: clients reconnect
            assert read_all(again.bootstrap, "durable", expect=100) == [
                f"r{i}".encode() for i in range(100)
            ]
        finally:
            restarted.stop()
    finally:
        broker.stop()
    assert not pid_alive(state.pid)
    assert running_state(settings) is None


def test_read_committed_consumers_see_no_aborted_record(settings):
    with EmbeddedBroker(settings) as broker:
        assert hides_aborted_records({"bootstrap.servers": broker.bootstrap}) is True


@pytest.mark.long  # the default tier's test_chaos kills a 3-node cluster's leader
def test_a_three_node_cluster_keeps_every_acknowledged_record_when_a_leader_is_killed(settings):
    broker = EmbeddedBroker(settings, nodes=3)
    state = broker.start()
    try:
        assert len(state.nodes) == 3 and len(set(state.pids)) == 3
        admin = AdminClient({"bootstrap.servers": state.bootstrap})
        admin.create_topics([NewTopic("replicated", 3)])["replicated"].result(30)
        meta = wait_for_leaders(admin, "replicated", 3)
        assert all(len(p.replicas) == 3 for p in meta.partitions.values())
        configs = admin.describe_configs([ConfigResource("topic", "replicated")])
        described = next(iter(configs.values())).result(10)
        assert described["min.insync.replicas"].value == "2"
        assert described["unclean.leader.election.enable"].value == "false"
        produce(state.bootstrap, "replicated", [f"a{i}".encode() for i in range(300)])
        leader = meta.partitions[0].leader
        os.kill(state.node(leader).pid, signal.SIGKILL)
        # acks=all with min.insync.replicas 2: two nodes left still take writes.
        produce(state.bootstrap, "replicated", [f"b{i}".encode() for i in range(300)])
        got = read_all(state.bootstrap, "replicated", partitions=3, expect=600)
        assert sorted(got) == sorted(
            [f"a{i}".encode() for i in range(300)] + [f"b{i}".encode() for i in range(300)]
        )
    finally:
        broker.stop()
    assert not any(pid_alive(p) for p in state.pids)


def test_a_half_formatted_log_dir_is_refused_with_the_fix(settings):
    root = settings.home / "kafka"
    (root / "node-1").mkdir(parents=True)  # a start that died before recording its layout
    with pytest.raises(BrokerStartError, match=r"no layout.json.*Remove"):
        EmbeddedBroker(settings).start()
    layout = apache.KafkaLayout(
        apache.new_cluster_id(), (apache.KafkaNodeLayout(1, free_port(), free_port()),)
    )
    layout.save(root / "layout.json")
    (root / "node-1" / "data").mkdir()
    (root / "node-1" / "data" / "bootstrap.checkpoint").write_bytes(b"x")  # format cut short
    with pytest.raises(BrokerStartError, match=r"half-formatted.*Remove"):
        EmbeddedBroker(settings).start()


def test_a_taken_port_and_missing_jars_fail_with_what_to_do(settings, tmp_path):
    with EmbeddedBroker(settings) as broker:
        port = broker.state.port
        other = Settings(home=tmp_path / "other", broker_kind="kafka")
        with pytest.raises(BrokerStartError, match=rf"port 127.0.0.1:{port} .* is taken"):
            EmbeddedBroker(other, port=port).start()
    missing = Settings(home=tmp_path / "h2", broker_kind="kafka", kafka_libs_dir=tmp_path / "no")
    with pytest.raises(BrokerBinaryNotFound, match=r"make install"):
        EmbeddedBroker(missing).start()
