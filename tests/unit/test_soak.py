"""The soak's pieces that need no stack: the chaos endpoint and what each kind does to a real
process and a real directory (the network faults stand in by a recorder: their own tests are
tests/unit/test_fault_proxy.py and tests/test_faults_e2e.py), and the growth the report gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx
import pytest

from recovery_lib.ops.chaos import CHAOS_KINDS, ChaosControl, ChaosTarget, control_file
from recovery_lib.ops.soak import Sample, growth, tree_rss_mb


class RecordedNetwork:
    """Stands in for NetworkFaults: records what was injected; a fault lasts until the test
    ends it (one timed in seconds could end before a slow machine's next step)."""

    def __init__(self) -> None:
        self.injected: list[str] = []
        self.lasting = False

    def over(self) -> bool:
        return not self.lasting

    def inject(self, kind: str, failure) -> None:  # noqa: ANN001
        self.injected.append(kind)
        failure.pause_s = 0.5
        self.lasting = True


@pytest.fixture()
def victim():
    """A driver stand-in: a process group of its own."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def test_each_kind_hurts_what_it_names_and_a_fault_waits_for_the_last(
    tmp_path, victim, settings_env
):
    # A freeze far longer than the test: it ends when the test thaws it (its own timer is
    # tested in test_unwritable_tree.py), not while the test still expects it to last.
    settings_env(RECOVERY_HOME=tmp_path / "home", RECOVERY_CHAOS_FAULT_S=300)
    checkpoint = tmp_path / "ck"
    (checkpoint / "offsets").mkdir(parents=True)
    network = RecordedNetwork()
    target = ChaosTarget(network, lambda: checkpoint, lambda: victim.pid)  # type: ignore[arg-type]

    try:
        frozen = target.inject("checkpoint-unwritable")
        assert frozen.fired and frozen.detail["directories"] == 2
        with pytest.raises(OSError):
            (checkpoint / "offsets" / "7").write_text("x")
        assert target.inject("net-blackhole").detail == {
            "skipped": "the checkpoint still refuses writes"
        }
        target.disk.stop()  # the freeze ends (and its timer with it)
        (checkpoint / "offsets" / "7").write_text("x")  # thawed
    finally:
        target.disk.stop()  # never leave the tree frozen, even when an assertion failed

    assert target.inject("net-blackhole").fired and network.injected == ["net-blackhole"]
    assert "still lasts" in target.inject("driver-kill").detail["skipped"]
    network.lasting = False  # the network fault ends
    killed = target.inject("driver-kill")
    assert killed.fired and killed.detail == {"pid": victim.pid}
    assert victim.wait(timeout=10) == -9
    with pytest.raises(ValueError, match="unknown chaos kind 'meteor'"):
        target.inject("meteor")
    assert [e.fired for e in target.events] == [True, False, True, False, True]


def test_the_control_endpoint_serves_faults_and_says_where_it_is_while_it_runs(
    tmp_path, victim, settings_env
):
    settings_env(RECOVERY_HOME=tmp_path / "home")
    target = ChaosTarget(RecordedNetwork(), lambda: tmp_path, lambda: victim.pid)  # type: ignore[arg-type]
    control = ChaosControl(target)
    url = control.start()
    try:
        told = json.loads(control_file().read_text())
        assert told["url"] == url and told["kinds"] == list(CHAOS_KINDS)
        assert told["pid"] == os.getpid() and url.startswith("http://127.0.0.1:")
        answer = httpx.post(f"{url}/fault", json={"kind": "net-latency"}, timeout=10)
        assert answer.status_code == 200 and answer.json()["fired"] is True
        refused = httpx.post(f"{url}/fault", json={"kind": "flood"}, timeout=10)
        assert refused.status_code == 400 and "unknown chaos kind" in refused.json()["error"]
    finally:
        control.stop()
    assert not control_file().exists()


def test_growth_compares_the_last_sample_with_the_one_an_hour_before():
    samples = [
        Sample(t, {"job": 1000.0 + t / 36, "daemon": 80.0}, {"checkpoint_bytes": 5e6}, 0, "running")
        for t in range(0, 7201, 600)
    ]
    grown = growth(samples, 3600.0)
    assert grown["job"] == {"from": 1100.0, "to": 1200.0, "growth_pct": 9.1, "over_s": 3600}
    assert grown["daemon"]["growth_pct"] == 0.0
    assert grown["checkpoint_bytes"]["growth_pct"] == 0.0
    short = growth(samples[:3], 3600.0)  # a soak shorter than the window: from its start
    assert short["job"]["over_s"] == 1200
    assert growth(samples[:1], 3600.0) == {}


# An idle parent and its idle child: a tree whose memory stays put between two measures (the
# test process's own tree holds the session's Spark JVM, which grows meanwhile).
TREE = """
import subprocess, sys, time
kid = subprocess.Popen(
    [sys.executable, "-c", "import time; print(flush=True); time.sleep(120)"],
    stdout=subprocess.PIPE,
)
kid.stdout.readline()
print(kid.pid, flush=True)
time.sleep(120)
"""


def test_resident_memory_counts_a_process_tree_and_leaves_out_a_subtree():
    parent = subprocess.Popen(
        [sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        kid = int(parent.stdout.readline())  # both run, the child's interpreter loaded
        whole = tree_rss_mb(parent.pid)
        assert whole is not None and whole > 10
        without = tree_rss_mb(parent.pid, {kid})
        assert without is not None and without < whole
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
    assert tree_rss_mb(None) is None


def test_the_job_has_drained_when_its_own_inputs_are_consumed_not_every_topic(
    tmp_path, admin, topic_name
):
    """q3 reads persons and auctions; the bids the generator also writes never count."""
    from types import SimpleNamespace

    from confluent_kafka import Producer

    from recovery_lib.kafka.clients import client_config
    from recovery_lib.ops.soak import _drained

    read, unread = f"{topic_name}.read", f"{topic_name}.unread"
    producer = Producer(client_config())
    for topic in (read, unread):
        admin.create(topic, partitions=2)
        for p in (0, 1):
            for _ in range(3):
                producer.produce(topic, value=b"x", partition=p)
    producer.flush(10)
    checkpoint = tmp_path / "ck"
    job = SimpleNamespace(checkpoint=checkpoint, input_topics={"one": read})

    def commit(batch: int, offsets: dict[str, int]) -> None:
        for d in ("offsets", "commits"):
            (checkpoint / d).mkdir(parents=True, exist_ok=True)
        line = json.dumps({read: offsets})
        (checkpoint / "offsets" / str(batch)).write_text(f"v1\n{{}}\n{line}\n")
        (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")

    assert not _drained(job, 2)  # nothing committed yet
    commit(0, {"0": 3})
    assert not _drained(job, 2)  # partition 1 not in the batch: behind
    commit(1, {"0": 3, "1": 2})
    assert not _drained(job, 2)
    commit(2, {"0": 3, "1": 3})
    assert _drained(job, 2)  # the unread topic's records do not hold it back
