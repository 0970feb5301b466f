"""Active replication's decisions, offline: the order log's fold (KaZoo) and the heartbeat cut
(LiveRobin). Both must decide a batch once and never differently on a longer log, whatever
either replica has read so far."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recovery_lib.ha.replication.heartbeats import HeartbeatEntry, HeartbeatIndex
from recovery_lib.ha.replication.liverobin import HeartbeatCut, heartbeat_cut
from recovery_lib.ha.replication.order_log import OrderEntry, OrderFold, offset_log_sources
from recovery_lib.io.exceptions import InvalidSourceOption
from recovery_lib.io.sinks.fences import FENCE_HEADER


def fold(records) -> OrderFold:
    result = OrderFold()
    for record in records:
        if isinstance(record, int):
            result.apply(b"", {FENCE_HEADER: str(record).encode()})
        else:
            result.apply(record.encode(), {})
    return result


def entry(batch: int, end: int, epoch: int) -> OrderEntry:
    """The leader's batch: persons and auctions (two sources) up to ``end``."""
    return OrderEntry(batch, [{"persons": {"0": end}}, {"auctions": {"0": end + 1}}], epoch)


def test_a_zombie_leaders_entry_after_the_fence_is_dropped_and_the_first_entry_wins():
    records = [entry(0, 10, 1), entry(1, 20, 1), 2, entry(2, 25, 1), entry(2, 30, 2)]
    result = fold(records)
    assert result.get(0).ends_for(["persons"]) == {"persons": {"0": 10}}
    assert result.get(2).ends_for(["auctions"]) == {"auctions": {"0": 31}}  # not the zombie's
    assert result.dropped == 1
    # The new leader publishing a batch its predecessor already published is ignored.
    result.apply(entry(1, 99, 2).encode(), {})
    assert result.get(1).ends_for(["persons"]) == {"persons": {"0": 20}} and result.ignored == 1
    # A reader that moved past a batch does not take it up again.
    result.forget_before(2)
    result.apply(entry(1, 98, 2).encode(), {})
    assert result.get(1) is None and result.ignored == 2


def test_an_entry_is_the_whole_offset_log_entry_of_a_batch(tmp_path):
    log = tmp_path / "7"
    log.write_text('v1\n{"batchWatermarkMs":0}\n{"persons":{"0":5}}\n{"auctions":{"1":7}}\n')
    sources = offset_log_sources(log)
    published = OrderEntry(7, sources, 1)
    assert published.ends_for(["auctions"]) == {"auctions": {"1": 7}}
    assert published.ends_for(["bids"]) is None
    assert published.same_batch(list(reversed(sources)))
    assert not published.same_batch([{"persons": {"0": 5}}, {"auctions": {"1": 8}}])
    assert offset_log_sources(tmp_path / "8") is None


order_logs = st.lists(
    st.one_of(
        st.integers(1, 4),  # a fence of that epoch
        st.builds(entry, st.integers(0, 5), st.integers(0, 100), st.integers(1, 4)),
    ),
    max_size=30,
)


@given(order_logs, st.data())
def test_a_decision_read_from_a_prefix_never_changes_as_the_log_grows(records, data):
    """A follower that ran batch b on what it had read must agree with every later reader."""
    cut = data.draw(st.integers(0, len(records)))
    early, full = fold(records[:cut]), fold(records)
    for key, decided in early.entries.items():
        assert full.entries[key] == decided


def beats(*offsets: dict[str, int]) -> list[HeartbeatEntry]:
    return [HeartbeatEntry(i + 1, {"in": dict(o)}) for i, o in enumerate(offsets)]


def test_a_batch_ends_right_after_the_next_heartbeat_of_every_partition():
    index = beats({"0": 4, "1": 2}, {"0": 9, "1": 6}, {"0": 15, "1": 6 + 5})
    assert heartbeat_cut({"in": {"0": 0, "1": 0}}, index) == {"in": {"0": 5, "1": 3}}
    assert heartbeat_cut({"in": {"0": 5, "1": 3}}, index) == {"in": {"0": 10, "1": 7}}
    assert heartbeat_cut({"in": {"0": 5, "1": 3}}, index, per_batch=2) == {"in": {"0": 16, "1": 12}}
    assert heartbeat_cut({"in": {"0": 16, "1": 12}}, index) is None  # not indexed yet


@st.composite
def heartbeat_logs(draw):
    """Random data between heartbeats in two partitions: the index of every heartbeat."""
    positions = {"0": 0, "1": 0}
    index = []
    for seq in range(draw(st.integers(1, 12))):
        at = {}
        for part in positions:
            positions[part] += draw(st.integers(0, 6))  # data records before the heartbeat
            at[part] = positions[part]
            positions[part] += 1
        index.append(HeartbeatEntry(seq + 1, {"in": at}))
    return index


@given(heartbeat_logs(), st.integers(1, 3), st.data())
def test_replicas_reading_different_prefixes_of_the_index_cut_the_same_batches(index, k, data):
    """Replica A has read the whole index, replica B a growing prefix, retrying when its next
    heartbeat is not indexed yet: B runs exactly A's batches, covering the input without gaps."""
    start = {"in": {"0": 0, "1": 0}}
    a_batches, end = [], heartbeat_cut(start, index, k)
    while end is not None:
        a_batches.append((start, end))
        start, end = end, heartbeat_cut(end, index, k)
    b_batches, start, seen = [], {"in": {"0": 0, "1": 0}}, 0
    while True:
        end = heartbeat_cut(start, index[:seen], k)
        if end is None:
            if seen == len(index):
                break
            seen = min(len(index), seen + data.draw(st.integers(1, 3)))  # more arrives
            continue
        b_batches.append((start, end))
        start = end
    assert b_batches == a_batches
    for (_, previous_end), (next_start, _) in zip(a_batches, a_batches[1:], strict=False):
        assert previous_end == next_start
    assert len(a_batches) == len(index) // k


def test_the_policy_forgets_heartbeats_it_passed_and_needs_its_index_topic():
    with pytest.raises(InvalidSourceOption, match="heartbeatIndex"):
        HeartbeatCut({})
    with pytest.raises(InvalidSourceOption, match="at least 1"):
        HeartbeatCut({"heartbeatIndex": "hb", "heartbeatsPerBatch": "0"})
    index = HeartbeatIndex()
    for e in beats({"0": 4}, {"0": 9}):
        index.apply(e.encode(), {})
    index.apply(HeartbeatEntry(1, {"in": {"0": 3}}).encode(), {})  # out of order: ignored
    assert [e.seq for e in index.entries] == [1, 2]


def test_a_dead_leaders_lease_expires_though_its_replacement_beats_in_the_same_file(tmp_path):
    """The replacement of a killed leader writes the replica's heartbeat file: its beats must
    not keep the dead incarnation's lease alive (the follower would never take over, and the
    replacement would lead instead)."""
    import json
    import time

    from recovery_lib.ha.replication.leases import lease_expired, lease_path

    def beat(pgid: int, age_s: float) -> None:
        path = lease_path(tmp_path, "b")
        path.parent.mkdir(parents=True, exist_ok=True)
        ts_ms = int((time.time() - age_s) * 1000)
        fields = {"pid": pgid, "ts_ms": ts_ms, "query_active": True, "last_batch": 1}
        path.write_text(json.dumps({**fields, "batches": 2, "input_rows": 9, "pgid": pgid}))

    beat(100, age_s=0.1)
    assert not lease_expired(tmp_path, "b/100", "a/300", timeout_s=3)  # the holder beats
    beat(100, age_s=10)
    assert lease_expired(tmp_path, "b/100", "a/300", timeout_s=3)  # it stopped beating
    beat(200, age_s=0.1)  # b's replacement, a new process group, beats in the same file
    assert lease_expired(tmp_path, "b/100", "a/300", timeout_s=3)
    assert not lease_expired(tmp_path, "b/200", "a/300", timeout_s=3)
    assert lease_expired(tmp_path, "b/100", "b/200", timeout_s=3)  # my own former self


def test_a_killed_holder_on_this_host_loses_its_lease_at_once_a_frozen_one_at_the_timeout(
    tmp_path,
):
    """Its heartbeat names this host and its driver: gone (SIGKILL, even before it is reaped)
    ends the lease now; stopped (SIGSTOP, a zombie leader to be) only after the timeout."""
    import json
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    from recovery_lib.ha.replication.leases import lease_expired, lease_path

    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path = lease_path(tmp_path, "b")
        path.parent.mkdir(parents=True)
        fields = {"pid": holder.pid, "ts_ms": int(time.time() * 1000), "query_active": True}
        path.write_text(json.dumps({**fields, "last_batch": 1, "batches": 2, "input_rows": 9,
                                    "pgid": 77, "host": socket.gethostname()}))  # fmt: skip
        assert not lease_expired(tmp_path, "b/77", "a/300", timeout_s=30)  # alive, beating
        os.kill(holder.pid, signal.SIGSTOP)
        assert not lease_expired(tmp_path, "b/77", "a/300", timeout_s=30)  # frozen: wait
        os.kill(holder.pid, signal.SIGKILL)
        time.sleep(0.2)  # dead, not reaped yet: a zombie
        assert lease_expired(tmp_path, "b/77", "a/300", timeout_s=30)
    finally:
        holder.kill()
        holder.wait()
    beat = json.loads(path.read_text())
    path.write_text(json.dumps({**beat, "host": "another-host"}))  # its pid says nothing here
    assert not lease_expired(tmp_path, "b/77", "a/300", timeout_s=30)


def test_a_replica_passed_a_heartbeat_once_its_committed_batch_ends_after_it_everywhere():
    from recovery_lib.ha.replication.heartbeats import HeartbeatEntry, passed

    entry = HeartbeatEntry(7, {"a": {"0": 10, "1": 4}, "b": {"0": 2}})
    assert passed(entry, {"a": {"0": 11, "1": 5}, "b": {"0": 3}})
    assert not passed(entry, {"a": {"0": 11, "1": 4}, "b": {"0": 3}})  # ends at it, not after
    assert not passed(entry, {"a": {"0": 11, "1": 5}})  # a source it has not read
    assert not passed(entry, None)  # committed nothing yet


def test_the_generator_waits_for_the_slowest_replica_in_step(monkeypatch, settings_env):
    """A heartbeat is written only while the slowest replica has fewer than ``ahead`` indexed
    heartbeats still to run: from cold, two (the first batch and the next), then one each
    time it finishes a batch; quick replicas get one per period."""
    import threading
    import time

    from recovery_lib.ha.replication import heartbeats
    from recovery_lib.ha.replication.heartbeats import HeartbeatEntry, HeartbeatGenerator

    # No broker is reached (writes are stubbed), but the clients want an address: without
    # one this test depended on an earlier test having started the session's broker.
    settings_env(KAFKA_BOOTSTRAP="127.0.0.1:9", RECOVERY_REPLICATION_HEARTBEATS_AHEAD="2")

    gen = HeartbeatGenerator(["t"], "t.hb", period_s=0.02)
    monkeypatch.setattr(gen.index, "create", lambda: None)
    monkeypatch.setattr(gen, "idle", lambda: False)
    monkeypatch.setattr(heartbeats, "HELD_POLL_S", 0.01)
    written: list[HeartbeatEntry] = []

    def beat() -> None:  # heartbeat n at offset 10 n of the input's one partition
        written.append(HeartbeatEntry(len(written) + 1, {"t": {"0": 10 * (len(written) + 1)}}))
        gen.indexed(written[-1])

    monkeypatch.setattr(gen, "beat", beat)
    ran = {"a": 0, "b": 0}  # heartbeats each replica's committed batches ran past
    looks: list[int] = []

    def committed() -> list[dict | None]:
        looks.append(len(written))
        return [{"t": {"0": 10 * n + 1}} if n else None for n in ran.values()]

    def until(done, what: str) -> None:  # noqa: ANN001
        deadline = time.monotonic() + 30
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.01)

    def held_at(count: int) -> None:  # ten looks without a heartbeat past ``count``
        until(lambda: looks.count(count) >= 10 or len(written) > count, f"ten looks at {count}")
        assert len(written) == count, f"it wrote heartbeat {len(written)} while held"

    stop = threading.Event()
    thread = threading.Thread(target=gen.run, args=(stop, None, committed))
    thread.start()
    try:
        held_at(2)  # cold replicas: the first batch's heartbeat and the next
        ran["a"] = 1
        held_at(2)  # b, the slowest, still runs its first batch
        ran["b"] = 1
        until(lambda: len(written) == 3, "the heartbeat b's first commit let through")
        held_at(3)
        ran.update(a=3, b=3)  # quick replicas: one heartbeat per period again
        until(lambda: len(written) >= 4, "a heartbeat once both were level")
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_every_process_of_a_replica_claims_as_its_drivers_incarnation(monkeypatch):
    """PySpark's daemon gives Python workers a process group of their own; a determinant
    writer in a worker must still be the incarnation whose heartbeats renew its lease."""
    import os

    from recovery_lib.ha.replication.leases import incarnation
    from recovery_lib.runtime.faults import DRIVER_PGID_ENV

    monkeypatch.delenv(DRIVER_PGID_ENV, raising=False)
    assert incarnation("a") == f"a/{os.getpgid(0)}"  # the driver itself, before it marks
    monkeypatch.setenv(DRIVER_PGID_ENV, "4242")  # a worker of the driver whose group is 4242
    assert incarnation("a") == "a/4242"
