"""The faulty network with real Kafka clients: a private broker that advertises the fault
proxy, so that clients bootstrapped there talk to it through the proxy; a reset after a
produce reached the broker makes a non-idempotent producer write twice (the duplicates the
sinks must absorb); a paused broker stalls clients, which carry on once it resumes."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from recovery_lib.chaos.network import FaultyNetwork
from recovery_lib.chaos.proxy import Api
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.broker import running_state

pytestmark = pytest.mark.broker


@pytest.fixture()
def network(recovery_home):  # noqa: ANN201
    with FaultyNetwork(seed=7) as started:
        yield started


def read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(200):
            msgs = consumer.consume(1000, timeout=0.2)
            values += [m.value() for m in msgs if m.error() is None]
            if len(values) >= expected and not msgs:
                break
    finally:
        consumer.close()
    return values


def test_clients_reach_the_private_broker_only_through_the_proxy(network) -> None:
    recorded_before = running_state()
    with network.use() as bootstrap:
        topic = f"chaos-{uuid.uuid4().hex[:6]}"
        TopicAdmin().create(topic, 1)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(50):
            producer.produce(topic, value=str(i).encode())
        assert producer.flush(30) == 0
        assert read_all(bootstrap, topic, 50) == [str(i).encode() for i in range(50)]
    # Every request went through the proxy (the broker advertised it), and the machine's
    # recorded broker was neither replaced nor touched.
    assert network.proxy.stats.frames_up > 0 and network.proxy.stats.connections >= 2
    assert running_state() == recorded_before


def test_a_reset_after_a_produce_reached_the_broker_writes_it_twice(network) -> None:
    bootstrap = network.bootstrap
    topic = f"chaos-dup-{uuid.uuid4().hex[:6]}"
    admin = TopicAdmin({"bootstrap.servers": bootstrap})
    admin.create(topic, 1)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": "false",
            "acks": "all",
            "linger.ms": "0",
            "retry.backoff.ms": "50",
        }
    )
    producer.produce(topic, value=b"warm")  # the connection and metadata are there
    assert producer.flush(30) == 0
    network.proxy.reset_next(Api.PRODUCE, count=1)
    delivered: list[object] = []
    producer.produce(topic, value=b"once", on_delivery=lambda err, _m: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None]  # the producer thinks it wrote the record once
    assert [r.api for r in network.proxy.stats.resets] == ["produce"]
    values = read_all(bootstrap, topic, 3)
    assert values.count(b"once") == 2, values  # the retry wrote it again


def test_a_paused_broker_stalls_a_producer_that_carries_on_when_it_resumes(network) -> None:
    bootstrap = network.bootstrap
    topic = f"chaos-pause-{uuid.uuid4().hex[:6]}"
    TopicAdmin({"bootstrap.servers": bootstrap}).create(topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": "0"})
    producer.produce(topic, value=b"before")
    assert producer.flush(30) == 0
    pause = network.pause_broker(2.0)
    producer.produce(topic, value=b"during")
    assert producer.flush(0.5) == 1  # stalled: not delivered while the broker is stopped
    assert network.wait_resumed(10) and pause.resumed_ms is not None
    assert pause.resumed_ms - pause.stopped_ms >= 2000
    assert producer.flush(30) == 0
    assert read_all(bootstrap, topic, 2) == [b"before", b"during"]


def test_a_killed_broker_started_again_on_its_log_dir_keeps_every_acknowledged_record(
    network,
) -> None:
    from recovery_lib.settings import get_settings

    if get_settings().broker_kind != "kafka":
        pytest.skip("tansu keeps records in memory only: a restart loses them all")
    bootstrap = network.bootstrap
    topic = f"chaos-restart-{uuid.uuid4().hex[:6]}"
    TopicAdmin({"bootstrap.servers": bootstrap}).create(topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": "0"})
    for i in range(100):
        producer.produce(topic, value=f"before-{i}".encode())
    assert producer.flush(30) == 0
    killed_pid, port = network.broker.state.pid, network.broker.state.port
    restart = network.restart_broker(1.0)
    assert network.restarting()
    producer.produce(topic, value=b"during")  # held by the producer until the broker is back
    deadline = time.monotonic() + 60
    while network.restarting() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert restart.restarted_ms is not None and restart.error is None, restart
    assert restart.restarted_ms - restart.killed_ms >= 1000
    assert network.broker.state.pid != killed_pid
    assert network.broker.state.port == port  # the same address behind the proxy
    assert producer.flush(60) == 0
    expected = [f"before-{i}".encode() for i in range(100)] + [b"during"]
    assert read_all(bootstrap, topic, 101) == expected


def test_the_experiments_network_faults_say_whether_and_when_they_fired(tmp_path) -> None:
    from recovery_lib.experiment.failures import FailureStatus, InjectedFailure
    from recovery_lib.experiment.network_faults import NetworkFaultOptions, NetworkFaults

    faults = NetworkFaults(tmp_path, NetworkFaultOptions(seconds=1.0), seed=1)
    faults.start()
    try:
        with faults.use() as bootstrap:
            topic = f"chaos-exp-{uuid.uuid4().hex[:6]}"
            TopicAdmin().create(topic, 1)
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": "0"})
            producer.produce(topic, value=b"warm")
            assert producer.flush(30) == 0

            def injected(kind: str) -> InjectedFailure:
                failure = InjectedFailure(kind, 0.0, FailureStatus.FIRED)
                faults.inject(kind, failure)
                return failure

            reset = injected("net-reset")
            assert reset.status is FailureStatus.ARMED and not faults.over()
            reset.settle(0, rearm=True)
            assert reset.status is FailureStatus.NOT_FIRED  # no produce came yet
            reset = injected("net-reset")
            producer.produce(topic, value=b"x")
            assert producer.flush(30) == 0
            reset.settle(0, rearm=True)
            assert reset.status is FailureStatus.FIRED and reset.fired_ms and faults.over()
            armed = injected("net-reset")
            assert not faults.over()
            faults.disarm()  # a run's end: no produce may come any more
            assert faults.over() and armed.status is FailureStatus.ARMED

            hole = injected("net-blackhole")
            assert not faults.over()
            producer.produce(topic, value=b"y")
            producer.flush(0.3)  # sent into the blackhole
            assert producer.flush(30) == 0  # delivered after it, on a new connection
            assert faults.over()
            faults.refresh()
            assert hole.to_dict()["dropped_frames"] >= 1, hole.to_dict()

            pause = injected("broker-pause")
            assert pause.pause_s == 1.0 and faults.network.paused() and not faults.over()
            assert faults.network.wait_resumed(10) and faults.over()

            injected("net-latency")
            assert faults.proxy.latency_s == 0.2
            deadline = time.monotonic() + 5
            while faults.proxy.latency_s and time.monotonic() < deadline:
                time.sleep(0.05)
            assert faults.proxy.latency_s == 0 and faults.over()
    finally:
        faults.stop()


def test_a_killed_partition_leader_is_replaced_by_election_and_started_again(tmp_path) -> None:
    from recovery_lib.chaos.cluster import FaultyCluster
    from recovery_lib.processes import pid_alive

    with FaultyCluster(tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap
        assert bootstrap.count(",") == 2  # every node: a client follows the leaders it names
        topic = f"chaos-leader-{uuid.uuid4().hex[:6]}"
        TopicAdmin({"bootstrap.servers": bootstrap}).create(topic, 3)
        deadline = time.monotonic() + 30
        while sorted(cluster.leaders([topic]).values())[0] < 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        before = cluster.leaders([topic])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        meta = admin.list_topics(topic, timeout=10).topics[topic]
        assert all(len(p.replicas) == 3 for p in meta.partitions.values())
        configs = admin.describe_configs([ConfigResource("topic", topic)])
        described = next(iter(configs.values())).result(10)
        assert described["min.insync.replicas"].value == "2"
        assert described["unclean.leader.election.enable"].value == "false"
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": "0"})
        for i in range(300):
            producer.produce(topic, value=f"before-{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        victim_pid = {n.node_id: n.pid for n in cluster.broker.state.nodes}
        kill = cluster.kill_leader([topic], down_s=1.0)
        assert kill.led == sorted(tp for tp, n in before.items() if n == kill.node_id)
        assert kill.led
        for i in range(300):  # while a node is down: min.insync.replicas 2 of 3 still holds
            producer.produce(topic, value=f"during-{i}".encode(), partition=i % 3)
        assert producer.flush(60) == 0
        deadline = time.monotonic() + 90
        while cluster.restarting() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert kill.error is None and kill.restarted_ms is not None, kill
        assert kill.elected_ms is not None and kill.elected_ms < kill.restarted_ms, kill
        assert set(kill.new_leaders) == set(kill.led)
        assert kill.node_id not in kill.new_leaders.values()
        assert kill.restarted_ms - kill.killed_ms >= 1000
        deadline = time.monotonic() + 60
        while not cluster.in_sync([topic]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert cluster.in_sync([topic])  # the node started again caught up
        node = cluster.broker.state.node(kill.node_id)
        assert node.pid != victim_pid[kill.node_id] and pid_alive(node.pid)
        got = []
        for part in range(3):
            consumer = Consumer(
                {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}"}
            )
            consumer.assign([TopicPartition(topic, part, 0)])
            try:
                for _ in range(100):
                    msgs = [m for m in consumer.consume(1000, timeout=0.2) if m.error() is None]
                    got += [m.value() for m in msgs]
                    if len(got) >= 200 * (part + 1) and not msgs:
                        break
            finally:
                consumer.close()
        expected = [f"{w}-{i}".encode() for w in ("before", "during") for i in range(300)]
        assert sorted(got) == sorted(expected)
        pids = [n.pid for n in cluster.broker.state.nodes]
    assert not any(pid_alive(p) for p in pids)
    assert not list((tmp_path / "cluster").iterdir())  # its data went with it
