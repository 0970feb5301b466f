"""Active replication's cut policies on the broker, without Spark: the KaZoo order log with a
leader, a follower, a lease that expires and a zombie leader; LiveRobin's heartbeats and index.
(The replicas' Spark runs with real kills are in test_replication_e2e.py.)"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import asdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from recovery_lib.ha.fencing import FencedError
from recovery_lib.ha.replication import leases
from recovery_lib.ha.replication.heartbeats import HEARTBEAT_HEADER, HeartbeatGenerator
from recovery_lib.ha.replication.kazoo import FOLLOWER_POLL_S, LeaderCut, kazoo_guard, role_path
from recovery_lib.ha.replication.leases import lease_path
from recovery_lib.ha.replication.liverobin import HeartbeatCut
from recovery_lib.ha.replication.order_log import OrderEntry, OrderFold
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.control_topic import ControlTopic
from recovery_lib.runtime.heartbeat import Heartbeat
from tests.helpers import produce


def beat(lease_dir: Path, replica: str, age_s: float = 0.0) -> None:
    """The replica driver's heartbeat file, ``age_s`` old, written from this process group
    (a driver and its cut policies share one: a lease counts only its holder's beats)."""
    ts_ms = int((time.time() - age_s) * 1000)
    path = lease_path(lease_dir, replica)
    path.parent.mkdir(parents=True, exist_ok=True)
    beat = Heartbeat(1, ts_ms, True, None, 0, 0, pgid=os.getpgid(0))
    path.write_text(json.dumps(asdict(beat)))


def ran(checkpoint: Path, batch: int, ends: int) -> None:
    """Spark wrote its offset-log entry for ``batch`` (one source, reading ``in``)."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    line = json.dumps({"in": {"0": ends}})
    (checkpoint / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{line}\n')


class LeaseClock:
    """The leases' clock, moved on by the test: a lease expires when the test says so, not
    when a loaded machine happens to be slower than the lease."""

    def __init__(self) -> None:
        self.ahead_s = 0.0

    def time(self) -> float:
        return time.time() + self.ahead_s


def test_kazoo_follower_runs_the_leaders_batches_takes_over_and_refuses_the_zombie(
    kafka_bootstrap, tmp_path, monkeypatch
):
    clock = LeaseClock()
    monkeypatch.setattr(leases, "time", clock)
    order = f"order-{uuid.uuid4().hex[:8]}"
    ControlTopic(order).create()
    common = {
        "epochStore": str(tmp_path / "epochs"),
        "leaseDir": str(tmp_path / "leases"),
        "orderTopic": order,
        "leaseTimeoutS": "30",
    }
    a = LeaderCut({**common, "replicaId": "a", "replicaCheckpoint": str(tmp_path / "a")})
    b = LeaderCut({**common, "replicaId": "b", "replicaCheckpoint": str(tmp_path / "b")})
    beat(tmp_path / "leases", "a")
    zero, one = {"in": {"0": 0}}, {"in": {"0": 100}}

    # Batch 0: a plans first and leads; once Spark logged it, a publishes it; b, which sees
    # more input, runs a's batch.
    assert a.cut(zero, {"in": {"0": 100}}, None) == one
    assert a.epoch == 1
    ran(tmp_path / "a", 0, 100)
    a.planned(zero, one)
    assert b.cut(zero, {"in": {"0": 150}}, None) == one and b.epoch == 0
    ran(tmp_path / "b", 0, 100)

    # Batch 1: a cuts it (to 400) but is paused before publishing; b waits inside its cut
    # until a's lease expires, then leads and cuts batch 1 itself.
    assert a.cut(one, {"in": {"0": 400}}, None) == {"in": {"0": 400}}
    ran(tmp_path / "a", 1, 400)
    result: dict = {}
    beat(tmp_path / "leases", "a")  # a's lease is fresh when b starts waiting
    waiting = threading.Thread(
        target=lambda: result.update(end=b.cut(one, {"in": {"0": 150}}, None))
    )
    waiting.start()
    # Ten looks at the order log and a's lease, each finding it held, before a stops beating.
    deadline = time.monotonic() + 30
    while waiting.is_alive() and b.waited_s < 10 * FOLLOWER_POLL_S:
        assert time.monotonic() < deadline, "the follower never looked at the lease"
        time.sleep(FOLLOWER_POLL_S)
    assert waiting.is_alive(), "the follower did not wait for the leader"
    clock.ahead_s = 60  # a stops beating: a minute passes on the leases' clock
    waiting.join(30)
    clock.ahead_s = 0  # b's beats below are fresh again
    assert result["end"] == {"in": {"0": 150}}
    assert b.epoch == 2 and b.takeovers[0]["cause"] == "leader's lease expired"
    assert json.loads(role_path(tmp_path / "leases", "b").read_text())["role"] == "leader"
    ran(tmp_path / "b", 1, 150)
    b.planned(one, result["end"])

    # a wakes up as a zombie: it sees b's batch 1 and publishes nothing; had it appended its
    # own before reading (the append racing b's fence), every reader drops it. Its sink tasks
    # are refused, b's are admitted.
    end = b.order.end()
    a.planned(one, {"in": {"0": 400}})
    assert b.order.end() == end
    ControlTopic(order).append(OrderEntry(1, [{"in": {"0": 400}}], 1).encode())
    b.order.fold(b.fold.apply)
    assert b.fold.dropped == 1 and b.fold.get(1).ends_for(["in"]) == {"in": {"0": 150}}
    guard = {"replicaCheckpoint": str(tmp_path / "a"), "orderTopic": order}
    with pytest.raises(FencedError, match="not the one the leader published"):
        kazoo_guard(guard).check("sink write", 1)
    kazoo_guard({**guard, "replicaCheckpoint": str(tmp_path / "b")}).check("sink write", 1)
    kazoo_guard(guard).check("sink write", 0)  # batch 0 was a's own, published by a
    beat(tmp_path / "leases", "b")  # b's driver beats: a stays a follower
    assert not a.leading() and a.epoch == 0
    a.order.close()
    b.order.close()


def test_heartbeats_reach_every_partition_and_their_index_cuts_batches(kafka_bootstrap):
    topic, index = f"in-{uuid.uuid4().hex[:8]}", f"hb-{uuid.uuid4().hex[:8]}"
    TopicAdmin().create(topic, partitions=3)
    generator = HeartbeatGenerator([topic], index, period_s=0.1)
    generator.index.create()
    try:
        produce(topic, 9, partitions=3)
        first = generator.beat()
        produce(topic, 6, partitions=3, start=9)
        slow = HeartbeatGenerator([topic], index, 0.1, slow=(topic, 2), slow_delay_s=0.5)
        began = time.monotonic()
        second = slow.beat()
        assert time.monotonic() - began >= 0.5  # the slow partition held the index entry back
        slow.close()
    finally:
        generator.close()
    assert first.at == {topic: {"0": 3, "1": 3, "2": 3}}
    assert second.at == {topic: {"0": 6, "1": 6, "2": 6}}
    assert second.seq > first.seq

    consumer = Consumer({**client_config(), "group.id": "t", "enable.auto.commit": "false"})
    consumer.assign([TopicPartition(topic, 1, 3)])
    msg = consumer.poll(10)
    consumer.close()
    headers = dict(msg.headers())
    assert headers["rl.control"] == b"heartbeat"
    assert int(headers[HEARTBEAT_HEADER]) == first.seq

    # Two replicas' policies cut the same batches, each right after a heartbeat.
    for _ in range(2):
        policy = HeartbeatCut({"heartbeatIndex": index})
        start = {topic: {"0": 0, "1": 0, "2": 0}}
        available = {topic: {"0": 7, "1": 7, "2": 7}}
        end = policy.cut(start, available, None)
        assert end == {topic: {"0": 4, "1": 4, "2": 4}}
        end = policy.cut(end, available, None)
        assert end == {topic: {"0": 7, "1": 7, "2": 7}}
        policy.index_topic.close()
    # The next batch waits for its heartbeat.
    result: dict = {}
    waiting = threading.Thread(target=lambda: result.update(end=policy.cut(end, end, None)))
    waiting.start()
    time.sleep(0.5)
    assert waiting.is_alive(), "the cut did not wait for the next heartbeat"
    third = HeartbeatGenerator([topic], index, period_s=0.1)
    third.beat()
    third.close()
    waiting.join(10)
    assert result["end"] == {topic: {"0": 8, "1": 8, "2": 8}}
    policy.index_topic.close()


def test_the_gate_forwards_each_id_once_and_resumes_from_its_own_output(kafka_bootstrap):
    from confluent_kafka import Producer

    from recovery_lib.ha.replication.gate import REPLICA_HEADER, ReplicaGate, raw_topic
    from recovery_lib.io.sinks.dedup_reader import read_topic
    from recovery_lib.io.sinks.ids import ID_HEADER, output_id

    out = f"out-{uuid.uuid4().hex[:8]}"
    for topic in (out, raw_topic(out)):
        TopicAdmin().create(topic, partitions=2)
    producer = Producer(client_config())

    def write(replica: str, batch: int, part: int, seqs) -> None:
        for seq in seqs:
            headers = [
                (ID_HEADER, output_id(batch, part, seq).encode()),
                (REPLICA_HEADER, replica.encode()),
            ]
            producer.produce(raw_topic(out), f"{batch}/{seq}".encode(), None, part, headers=headers)
        producer.flush(10)

    # Replica a ahead on partition 0, b racing past its barrier with copies; partition 1
    # written by b alone (a died there mid-batch after two rows).
    write("a", 0, 0, range(3))
    write("b", 0, 0, range(2))
    write("a", 1, 0, range(2))
    write("b", 0, 0, [2])
    write("a", 0, 1, range(2))
    write("b", 0, 1, range(4))

    def drain(gate: ReplicaGate, records: int) -> None:
        gate.start()
        read, deadline = 0, time.monotonic() + 30
        while read < records and time.monotonic() < deadline:
            read += gate.step(timeout_s=0.2)
        assert gate.step(timeout_s=1.0) == 0  # nothing beyond what was written
        gate.close()

    first = ReplicaGate(out)
    drain(first, 3 + 2 + 2 + 1 + 2 + 4)
    assert first.forwarded == 3 + 2 + 4
    assert first.dropped == {"b": 3 + 2}
    # A new gate (the old one stopped, or crashed after its last forward) picks up where the
    # output ends: the zombie-late copies of b are dropped, new ids forwarded.
    write("b", 1, 0, range(3))
    write("a", 1, 1, range(1))
    second = ReplicaGate(out)
    drain(second, 1 + 3 + 1)  # from the raw record after the last forwarded one
    assert second.forwarded == 1 + 1 and second.dropped == {"b": 1 + 2}
    got = sorted((r.partition, r.value) for r in read_topic(out))
    assert got == sorted(
        [(0, f"0/{s}".encode()) for s in range(3)]
        + [(0, f"1/{s}".encode()) for s in range(3)]
        + [(1, f"0/{s}".encode()) for s in range(4)]
        + [(1, b"1/0")]
    )


def test_no_heartbeat_is_written_while_the_input_is_idle(kafka_bootstrap):
    """A heartbeat with no input since the last one would only make both replicas run an
    empty batch; the generator skips it, and beats again once records arrive."""
    topic, index = f"in-{uuid.uuid4().hex[:8]}", f"hb-{uuid.uuid4().hex[:8]}"
    TopicAdmin().create(topic, partitions=2)
    generator = HeartbeatGenerator([topic], index, period_s=0.1)
    generator.index.create()
    try:
        assert not generator.idle()  # no heartbeat yet: the first one is always written
        produce(topic, 4, partitions=2)
        first = generator.beat()
        assert generator.idle()  # only the heartbeat itself since
        produce(topic, 1, partitions=2, start=4)  # one record, in one partition
        assert not generator.idle()
        second = generator.beat()
        assert generator.idle() and second.seq > first.seq
    finally:
        generator.close()


def test_a_batch_without_new_input_is_published_by_the_guard_of_whichever_replica_runs_it(
    kafka_bootstrap, tmp_path
):
    """A watermark moving makes Spark run a batch with no new input and no source read, so
    the leader's `planned` never publishes it; without an entry every sink would wait and
    fail (q8 under KaZoo). Its entry is the previous batch's ends, the same from either
    replica; a batch with new input stays the leader's to publish."""
    order = f"order-{uuid.uuid4().hex[:8]}"
    ControlTopic(order).create()
    ControlTopic(order).append(OrderEntry(0, [{"in": {"0": 100}}], 1).encode())
    for replica in ("a", "b"):
        ran(tmp_path / replica, 0, 100)
        ran(tmp_path / replica, 1, 100)  # no new input: the watermark's batch
        ran(tmp_path / replica, 2, 180)  # new input, not published by the leader
    options = {"orderTopic": order, "publishTimeoutS": "1"}
    kazoo_guard({**options, "replicaCheckpoint": str(tmp_path / "b")}).check("sink write", 1)
    kazoo_guard({**options, "replicaCheckpoint": str(tmp_path / "a")}).check("sink write", 1)
    entries = OrderFold()
    ControlTopic(order).fold(entries.apply)
    assert entries.get(1).ends_for(["in"]) == {"in": {"0": 100}} and entries.ignored <= 1
    with pytest.raises(FencedError, match="no batch 2"):
        kazoo_guard({**options, "replicaCheckpoint": str(tmp_path / "a")}).check("sink write", 2)
