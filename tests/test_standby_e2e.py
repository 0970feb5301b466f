"""Standby takeover with real processes: a warm standby fed by shipped checkpoints takes over
when the primary is SIGKILLed or SIGSTOPped; a paused primary that continues is fenced.

Small rates and short runs (the benchmark measures); the oracle compares every faulty run with
a failure-free reference run on the same input.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from recovery_lib.experiment.runner import Experiment, ExperimentConfig
from recovery_lib.ha.fencing import FENCE_HEADER, FenceFilter
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.io.sinks.ids import EPOCH_HEADER
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config
from recovery_lib.metrics.store import read_frame
from recovery_lib.settings import get_settings

pytestmark = [pytest.mark.slow, pytest.mark.broker]


def experiment(**overrides) -> tuple[Experiment, dict]:
    cfg = ExperimentConfig(
        **{"mode": "standby", "rate": 1000.0, "duration_s": 30.0, "fail_at_s": 12.0, **overrides}
    )
    exp = Experiment(cfg)
    return exp, exp.run()


def raw_records(topic: str) -> list[tuple[int, int, dict[str, bytes]]]:
    """(partition, offset, headers) of every record, fences and fenced ones included."""
    config = client_config()
    out = []
    consumer = Consumer({**config, "group.id": "raw-test", "enable.auto.commit": "false"})
    try:
        for part in TopicAdmin(config).partitions(topic):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, part, low)])
            seen = low
            while seen < high:
                for msg in consumer.consume(1000, timeout=2.0):
                    if msg.error() is None:
                        out.append((part, msg.offset(), dict(msg.headers() or ())))
                        seen = msg.offset() + 1
            consumer.unassign()
    finally:
        consumer.close()
    return out


@pytest.mark.long  # the default tier: a daemon's standby takes over (test_operations_e2e.py)
def test_standby_takes_over_a_killed_q3_primary_consistently(kafka_bootstrap, settings_env):
    settings_env(RECOVERY_STANDBY_REPLACE_AFTER_S=0)  # a new standby at once
    exp, report = experiment(query="q3", fail="driver-kill", rate=1500.0, duration_s=45.0)
    assert report["consistency"]["verdict"] == "consistent", report["consistency"]
    assert report["consistency"]["outputs"] == report["consistency"]["reference_outputs"] > 0
    [takeover] = report["takeovers"]
    assert takeover["cause"].startswith("primary lease expired")
    assert takeover["epoch"] == 2  # the primary held 1
    assert takeover["copy_batch"] is not None and takeover["rejected_copies"] == []
    assert takeover["fence_records"] == 2  # one per output partition
    assert report["restart_time_s"] is not None
    # Detected by the lease, not by a supervisor restart: no new primary process was started
    # on the old checkpoint; the standby's own checkpoint went on from the shipped copy.
    node1 = exp.workdir / "faulty" / "node-1"
    assert (node1 / "ck" / "q3" / "commits" / str(takeover["copy_batch"])).exists()
    lags = read_frame(
        exp.store.path,
        "SELECT detail FROM events WHERE run_id = ? AND kind = 'standby_lag'",
        [report["faulty_run_id"]],
    )
    assert len(lags) > 0  # the standby's lag behind the primary was reported while shipping
    # A new standby was started for the new primary once it had caught up, and the links the
    # operations layer follows point at the new nodes.
    assert (exp.workdir / "faulty" / "node-2" / "job.log").exists()
    assert (exp.workdir / "faulty" / "primary").resolve().name == "node-1"


# Long tier: the killed-primary takeover stays in the default tier.
@pytest.mark.long
def test_paused_primary_is_fenced_after_the_standby_took_over(kafka_bootstrap):
    """SIGSTOP the primary (nondeterministic prices pipeline, causal logging) longer than the
    lease; the standby takes over; SIGCONT: none of the old primary's writes is accepted."""
    lease = get_settings().standby_lease_timeout_s
    exp, report = experiment(
        query="prices", fail="pause", pause_s=lease + 9.0, duration_s=34.0, rate=600.0
    )
    assert report["consistency"]["verdict"] == "consistent", report["consistency"]
    [takeover] = report["takeovers"]
    assert takeover["epoch"] == 2
    out_topic = f"{exp.gen.topic_prefix}.out.faulty"
    # The zombie continued after SIGCONT and tried to write: its own epoch checks (sink or
    # determinant log) refused it. Without such an attempt the checks below judge nothing.
    zombie_log = (exp.workdir / "faulty" / "node-0" / "job.log").read_text(errors="replace")
    refused = re.findall(
        r"(sink write|determinant log write)[^\n]*? refused: this writer holds epoch 1 but "
        r"epoch 2 was taken",
        zombie_log,
    )
    assert refused, "the zombie never tried to write after the takeover"
    # Whatever of epoch 1 reached the broker after the fence, readers drop, and only that.
    raw = raw_records(out_topic)
    fences = {p: off for p, off, h in raw if FENCE_HEADER in h}
    assert set(fences) == {0, 1}
    late_old = [(p, off) for p, off, h in raw if off > fences[p] and h.get(EPOCH_HEADER) == b"1"]
    fence = FenceFilter()
    accepted = list(read_topic(out_topic, fence=fence))
    assert fence.dropped == len(late_old)
    assert not any(r.epoch == 1 and r.offset > fences[r.partition] for r in accepted)
    assert any(r.epoch == 2 and r.offset > fences[r.partition] for r in accepted)  # the new one's
    print(
        f"zombie writes refused: {dict(Counter(refused))}; zombie records that reached the "
        f"broker after the fence: {len(late_old)}, all dropped by readers"
    )
    # The takeover's epoch is recorded in the pair's epoch store.
    assert Path(exp.workdir / "faulty" / "epochs" / "2").exists()


@pytest.mark.long
def test_a_hot_standby_takes_over_with_its_state_loaded(kafka_bootstrap, settings_env):
    """The hot standby's query follows the primary's committed batches, writing nothing; the
    primary is SIGKILLed; the standby takes over without restoring a copy or starting a query,
    its outputs numbered as the primary's, and the output is exactly-once (keyed_state: one
    input, no watermark, so a hot standby may catch up in larger batches)."""
    settings_env(RECOVERY_STANDBY_HOT="true", RECOVERY_STANDBY_REPLACE_AFTER_S=0)
    exp, report = experiment(
        query="keyed_state", keys=20_000, fail="driver-kill", rate=1000.0, duration_s=45.0
    )
    assert report["consistency"]["verdict"] == "consistent", report["consistency"]
    assert report["consistency"]["guarantee"] == "exactly-once"
    [takeover] = report["takeovers"]
    assert takeover.get("hot") is True, takeover  # not the warm fallback
    assert takeover["epoch"] == 2 and takeover["fence_records"] == 2
    assert takeover["follower_batch"] is not None  # it had run the primary's batches
    # Before the takeover the hot query wrote nothing: every epoch-2 record is after a fence.
    raw = raw_records(f"{exp.gen.topic_prefix}.out.faulty")
    fences = {p: off for p, off, h in raw if FENCE_HEADER in h}
    early = [(p, off) for p, off, h in raw if h.get(EPOCH_HEADER) == b"2" and off < fences[p]]
    assert early == []
    assert any(h.get(EPOCH_HEADER) == b"2" for _, _, h in raw)  # and wrote after it


@pytest.mark.long
def test_a_standby_of_a_job_with_two_inputs_stays_warm(kafka_bootstrap, settings_env):
    """q3 reads two inputs, each cut in a source process of its own: hot is refused and the
    standby takes over the warm way, exactly-once."""
    settings_env(RECOVERY_STANDBY_HOT="true", RECOVERY_STANDBY_REPLACE_AFTER_S=0)
    _exp, report = experiment(query="q3", fail="driver-kill", rate=1500.0, duration_s=40.0)
    assert report["consistency"]["verdict"] == "consistent", report["consistency"]
    [takeover] = report["takeovers"]
    assert not takeover.get("hot") and takeover["copy_batch"] is not None
