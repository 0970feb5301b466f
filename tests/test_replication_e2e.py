"""Two live replicas of NexMark q1 on the broker, one SIGKILLed mid-stream: the survivor goes
on without a restart, the dead replica is replaced from the survivor's shipped state and joins
again, and a plain consumer of the gated output (no dedup) reads exactly the NexMark
reference, each output once. KaZoo: the leader dies and the follower takes the lease;
LiveRobin: a replica dies and the other one goes on cutting at the same heartbeats."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
import uuid

import pytest

from recovery_lib.ha.replication.gate import REPLICA_HEADER, raw_topic
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.io.sinks.ids import parse_output_id
from recovery_lib.modes.replication import replica_set_for_job
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.producer import ensure_topics, produce_events
from recovery_lib.nexmark.reference import compare, load_events, reference_rows
from recovery_lib.runtime.checkpoint import last_committed
from tests.helpers import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.broker]

TRANCHE = 4_000  # events of the second and third tranches, each fed at RATE
RATE = 300.0
OPEN_CAP = 60_000  # the first tranche flows until both replicas committed; at most this many


class TrancheFeeder:
    """Feeds the NexMark input in three tranches on the test's word, so the kill lands
    mid-stream and the replacement sees new input however slow the machine is: the first
    flows until both replicas committed batches, the second while the victim dies, the third
    once the replacement serves (it must run batches of its own to join)."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.go = [threading.Event() for _ in range(3)]
        self.done = [threading.Event() for _ in range(3)]
        self.errors: list[BaseException] = []
        self.cancelled = threading.Event()
        self.events = 0
        self.thread = threading.Thread(target=self._feed, daemon=True)

    def _feed(self) -> None:
        try:
            for i in range(3):
                while not self.go[i].wait(0.5):
                    if self.cancelled.is_set():
                        return
                stats = produce_events(
                    self.config,
                    count=OPEN_CAP if i == 0 else TRANCHE,
                    rate=RATE,
                    first_event_id=self.events,
                    stop=lambda i=i: self.cancelled.is_set() or (i == 0 and self.go[1].is_set()),
                )
                self.events += stats.events
                self.done[i].set()
        except BaseException as exc:  # noqa: BLE001 - the test reads errors
            self.errors.append(exc)
            for event in self.done:
                event.set()

    def feed(self, tranche: int) -> None:
        if tranche == 0:
            self.thread.start()
        self.go[tranche].set()

    def cancel(self) -> None:
        """Stop feeding (a failed test must not leave a producer running)."""
        self.cancelled.set()


def run_replicated(mode: str, tmp_path, victim: str, heartbeat_period_s: float = 0.5):
    """Both replicas up; the first input tranche fed and committed by both; the ``victim``
    replica SIGKILLed while the second tranche flows, replaced at once from the survivor's
    state; the third tranche fed once the replacement serves. Returns the set, the killed
    replica, the survivor, the gated output's records, the raw topic's records and the
    reference rows."""
    config = GeneratorConfig(topic_prefix=f"rp{uuid.uuid4().hex[:8]}", partitions=2)
    ensure_topics(config)
    out = f"{config.topic_prefix}.q1out"
    feeder = TrancheFeeder(config)
    replicas = replica_set_for_job(
        "q1",
        mode,
        tmp_path / "home",
        config.topic_prefix,
        out,
        partitions=config.partitions,
        heartbeat_period_s=heartbeat_period_s,
        victim=victim,
        replace_after_s=0,
    )

    def ticking(condition):  # noqa: ANN001, ANN202 - supervise while waiting
        def check() -> bool:
            assert not feeder.errors, feeder.errors
            replicas.tick()
            return condition()

        return check

    with replicas, contextlib.ExitStack() as cleanup:
        cleanup.callback(feeder.cancel)
        replicas.start()
        replicas.wait_ready(300)
        feeder.feed(0)
        for name in replicas.supervisors:
            wait_for(
                ticking(lambda name=name: (last_committed(replicas.checkpoint(name)) or -1) >= 2),
                240,
                f"replica {name} to commit",
            )
        assert not feeder.done[0].is_set(), "the first tranche hit its cap before both committed"
        feeder.feed(1)
        time.sleep(2.0)
        assert not feeder.done[1].is_set(), "the second tranche ended before the kill"
        killed = replicas.victim_replica()
        assert killed is not None, replicas.roles()
        survivor = next(r for r in replicas.supervisors if r != killed)
        survivor_pid = replicas.supervisors[survivor].pid
        replicas.kill_group(signal.SIGKILL)
        wait_for(
            ticking(
                lambda: (
                    bool(replicas.replacements)
                    and replicas.replacements[0].started_ms is not None
                    and replicas.supervisors[killed].is_ready()
                )
            ),
            300,
            f"replica {killed}'s replacement to serve",
            interval_s=1,
        )
        assert feeder.done[1].wait(120), "the second tranche was not produced"
        feeder.feed(2)
        assert feeder.done[2].wait(120), "the third tranche was not produced"
        expected = reference_rows(load_events(config, feeder.events), "q1")

        def count() -> int:
            assert survivor in replicas.tick(), "the survivor died"
            return sum(1 for _ in read_topic(out))

        wait_for(lambda: count() >= len(expected), 240, "the gated output", interval_s=2)
        wait_for(
            ticking(lambda: survivor in replicas.live() and not replicas.failed),
            240,
            f"replica {killed}'s replacement to join",
            interval_s=1,
        )
        time.sleep(3)  # anything forwarded twice after the count was reached shows up too
        outputs = list(read_topic(out))
        raw = list(read_topic(raw_topic(out)))
        assert replicas.supervisors[survivor].pid == survivor_pid, "the survivor restarted"
        (replacement,) = replicas.replacements
        assert replacement.replica == killed and replacement.survivor == survivor
        assert replacement.copy_batch is not None and replacement.copy_batch >= 2, replacement
        joined = last_committed(replicas.checkpoint(killed))
        assert joined is not None and joined > replacement.copy_batch, "it never ran a batch"
        assert replicas.ready_for_next_failure()
    return replicas, killed, survivor, outputs, raw, expected


def check_exactly_once(outputs, raw, expected) -> None:
    """The plain consumer's view is the reference, each output once; both replicas wrote the
    raw topic, and every copy of an id there carries the same value (identical batches)."""
    comparison = compare([json.loads(r.value) for r in outputs], expected)
    assert comparison.equal, comparison
    assert len({r.id for r in outputs}) == len(outputs), "the gate forwarded an id twice"
    values: dict[str, bytes] = {}
    for record in raw:
        assert values.setdefault(record.id, record.value) == record.value, record.id
    # Both wrote or skipped: a replica's release barrier skips what the other replica already
    # wrote to a partition, so the slower one may write nothing at all.
    writers = {dict(r.headers).get(REPLICA_HEADER) for r in raw}
    assert writers and writers <= {b"a", b"b"}, writers


def test_kazoo_follower_takes_over_from_a_killed_leader_without_a_restart(
    kafka_bootstrap, tmp_path
):
    replicas, killed, survivor, outputs, raw, expected = run_replicated("kazoo", tmp_path, "leader")
    check_exactly_once(outputs, raw, expected)
    roles = replicas.roles()
    assert roles[survivor]["role"] == "leader" and roles[survivor]["epoch"] == 2, roles
    assert [t["cause"] for t in roles[survivor]["takeovers"]] == ["leader's lease expired"]
    assert roles[killed]["role"] == "follower", "the replacement follows the new leader"
    kinds = [t["kind"] for t in replicas.takeovers]
    assert sorted(kinds) == ["leader", "replacement"], replicas.takeovers


@pytest.mark.long  # ~9 min
def test_liverobin_survives_a_killed_replica_with_identical_cuts(kafka_bootstrap, tmp_path):
    # A replacement catches up only if it runs a batch faster than a heartbeat period.
    replicas, killed, survivor, outputs, raw, expected = run_replicated(
        "liverobin", tmp_path, "a", heartbeat_period_s=2.0
    )
    check_exactly_once(outputs, raw, expected)
    assert replicas.beats_written > 0 and not replicas.generator_errors  # the set is stopped


@pytest.mark.long
def test_a_nondeterministic_job_replicated_by_kazoo_is_exactly_once_after_the_leader_dies(
    kafka_bootstrap,
):
    """prices (random noise + a live HTTP price service) on two replicas that share their
    determinant streams; the leader is SIGKILLed mid-stream. Both replicas wrote identical
    values under every id, and the plain consumer's view is one failure-free run's."""
    from recovery_lib.experiment.runner import Experiment, ExperimentConfig

    cfg = ExperimentConfig(
        query="prices",
        mode="kazoo",
        sink="release",
        victim="leader",
        fail="driver-kill",
        fail_at_s=15.0,
        rate=300.0,
        duration_s=40.0,
        replace_after_s=5.0,
    )
    report = Experiment(cfg).run()
    c = report["consistency"]
    assert report["failures"][0]["fired"], report["failures"]
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c
    assert {t["kind"] for t in report["takeovers"]} >= {"leader", "replacement"}
    values: dict[str, bytes] = {}
    raw = list(read_topic(raw_topic(report["out_topics"]["faulty"])))
    for record in raw:
        assert values.setdefault(record.id, record.value) == record.value, record.id
    assert len(values) == c["outputs"]
    assert report["restarts"] == [] and report["p99_30s_after_ms"] is not None


@pytest.mark.long
def test_a_kazoo_leader_frozen_mid_write_comes_back_as_a_zombie_whose_copies_are_dropped(
    kafka_bootstrap,
):
    """The leader is stopped (SIGSTOP of its whole process group) after its sink wrote 5 rows
    of a batch, for longer than its lease: the follower takes over and writes the batch. When
    the old leader resumes it goes on writing that batch: it tries, and every copy it writes
    is one the gate drops or its guard refuses (the plain consumer's view stays
    exactly-once). The pause is 15 s (lease 3 s): the new leader must finish the batch while
    the old one sleeps, or the old one's rows come first and are no copies at all (8 s was
    too short on a loaded 2-core host); the replica heartbeat timeout is longer still, so the
    paused leader is not replaced before it wakes."""
    from recovery_lib.bench.replication_bench import zombie_attempts
    from recovery_lib.experiment.runner import Experiment, ExperimentConfig
    from recovery_lib.settings import get_settings

    cfg = ExperimentConfig(
        query="q1",
        mode="kazoo",
        sink="release",
        victim="leader",
        fail="pause-mid-write",
        midwrite_rows=5,
        pause_s=15.0,
        heartbeat_timeout_s=30.0,
        fail_at_s=15.0,
        rate=300.0,
        duration_s=45.0,
    )
    report = Experiment(cfg).run()
    c = report["consistency"]
    assert report["failures"][0]["fired"] is True, report["failures"]
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c
    (takeover,) = [t for t in report["takeovers"] if t["kind"] == "leader"]
    zombie = "a" if takeover["replica"] == "b" else "b"
    raw = list(read_topic(raw_topic(report["out_topics"]["faulty"])))
    workdir = get_settings().home / "experiments" / report["experiment"]
    tried = zombie_attempts(workdir, raw)
    attempts = tried["late_copies"].get(zombie, 0) + tried["guard_refusals"].get(zombie, 0)
    where = json.loads((workdir / "faulty" / "arm" / zombie / "midpause.where").read_text())
    by_writer: dict[str, list[int]] = {}  # the paused task's rows in the raw topic: seqs
    for r in raw:
        _, batch, part, seq = parse_output_id(r.id) if r.id else ("", -1, -1, -1)
        if (batch, part) == (where["batch"], where["partition"]):
            writer = dict(r.headers).get(REPLICA_HEADER, b"?").decode()
            by_writer.setdefault(writer, []).append(seq)
    summary = {w: (len(seqs), min(seqs), max(seqs)) for w, seqs in by_writer.items()}
    assert attempts > 0, (
        tried,
        where,
        summary,
        "the resumed leader tried nothing: the test shows nothing",
    )
    assert report["restarts"] == []
