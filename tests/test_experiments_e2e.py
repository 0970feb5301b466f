"""Native-Spark baselines with real failures, judged by the oracle (which must be able to fail).

Each experiment: a supervised faulty run with a failure injected, a failure-free reference run
on the same generated input, the oracle, recovery metrics. Small rates and short runs: these
check behaviour, the benchmark scripts measure.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.metrics.store import MetricsStore, read_frame
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.producer import ensure_topics, produce_events
from recovery_lib.runtime.faults import MIDWRITE_ARM, arm
from recovery_lib.runtime.price_service import PriceService
from recovery_lib.runtime.supervisor import ProcessSpec, Supervisor
from recovery_lib.verify.oracle import judge
from tests.helpers import prices_job, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.broker]


def experiment(kafka_bootstrap, **overrides) -> dict:
    cfg = ExperimentConfig(**{"rate": 500.0, "duration_s": 24.0, "fail_at_s": 10.0, **overrides})
    return Experiment(cfg).run()


# Long tier: the default tier kills an at-least-once sink mid-write in test_recovery_e2e, and
# the oracle's at-least-once class has property tests (tests/unit/test_oracle.py).
@pytest.mark.long
def test_at_least_once_sink_after_mid_write_kill_is_reported_duplicated(kafka_bootstrap, tmp_path):
    report = experiment(kafka_bootstrap, query="q1", fail="mid-write", sink="at-least-once")
    c = report["consistency"]
    assert report["failures"][0]["kind"] == "mid-write"
    assert report["restarts"] and report["restart_time_s"] > 0
    assert c["duplicated"] > 0 and c["lost"] == 0
    assert c["guarantee"] == "at-least-once" and c["verdict"] == "inconsistent"
    path = write_report(report, tmp_path / "mid-write.json")
    saved = json.loads(path.read_text())
    for key in (
        "query",
        "mode",
        "rate",
        "duration_s",
        "failures",
        "throughput_eps",
        "latency_ms",
        "restart_time_s",
        "recovery_time_s",
        "consistency",
    ):
        assert key in saved
    assert path.with_suffix(".png").stat().st_size > 10_000


@pytest.mark.long  # native restart: test_recovery_e2e; the experiment's store: test_release_e2e
def test_deterministic_q3_with_dedup_is_consistent_after_driver_kill(kafka_bootstrap):
    report = experiment(kafka_bootstrap, query="q3", fail="driver-kill", sink="dedup", rate=1500.0)
    c = report["consistency"]
    assert report["restarts"][0]["cause"].startswith("exit -9")
    assert c["outputs"] > 0 and c["outputs"] == c["reference_outputs"]
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c
    assert c["invariants"] and all(i["checked"] and i["ok"] for i in c["invariants"]), c
    store = MetricsStore(report_store_path())
    kinds = set(
        read_frame(
            store.path, "SELECT kind FROM events WHERE run_id = ?", [report["faulty_run_id"]]
        )["kind"]
    )
    assert {"failure_injected", "failure_detected", "restart", "ready"} <= kinds
    verdicts = read_frame(
        store.path,
        "SELECT verdict FROM consistency_reports WHERE run_id = ?",
        [report["faulty_run_id"]],
    )["verdict"].tolist()
    assert verdicts == ["consistent"]


@pytest.mark.long
def test_task_retry_inside_a_udf_is_recovered_by_spark_and_consistent(kafka_bootstrap):
    report = experiment(kafka_bootstrap, query="q1", fail="task-retry", sink="dedup")
    assert report["restarts"] == []  # Spark retried the task; the driver never died
    assert report["failures"][0]["fired"] is True and "fired_ms" in report["failures"][0]
    assert report["consistency"]["verdict"] == "consistent"


@pytest.mark.long
def test_pause_shorter_than_the_heartbeat_timeout_stalls_without_restart(kafka_bootstrap):
    report = experiment(kafka_bootstrap, query="q1", fail="pause", sink="dedup")
    assert report["restarts"] == []
    assert report["output_gap_s"] >= 4.0  # SIGSTOP held the whole job for 5 s
    assert report["consistency"]["verdict"] == "consistent"


@pytest.mark.long
def test_missed_heartbeats_are_detected_and_the_job_restarted(kafka_bootstrap, admin, tmp_path):
    gen = GeneratorConfig(topic_prefix=f"hb{int(time.time())}", partitions=2)
    ensure_topics(gen, admin)
    spec = ProcessSpec(
        "jobs.nexmark.q1",
        ["--prefix", gen.topic_prefix, "--checkpoints", str(tmp_path / "ck")],
        heartbeat_timeout_s=4.0,
    )
    sup = Supervisor(spec, tmp_path / "sup")
    try:
        sup.start()
        sup.wait_ready()
        first = sup.pid
        sup.kill_group(signal.SIGSTOP)  # alive but silent: only the heartbeat can tell
        wait_for(lambda: (sup.tick() or True) and sup.restarts != [], 30, "detection by heartbeat")
        assert sup.restarts[0].cause.startswith("no heartbeat")
        wait_for(
            lambda: (sup.tick() or True) and sup.restarts[0].ready_ms is not None,
            180,
            "the restarted job to be ready",
        )
        assert sup.pid != first and sup.restarts[0].restart_time_s > 0
    finally:
        sup.stop()


@pytest.mark.long  # the default tier shows native divergence with tests/test_user_job_e2e.py
def test_nondeterministic_pipeline_diverges_after_a_kill(kafka_bootstrap, admin, tmp_path):
    """rand() and a changing HTTP price: a replayed batch re-computes its outputs differently."""
    gen = GeneratorConfig(topic_prefix=f"nd{int(time.time())}", partitions=2, event_time_rate=1000)
    ensure_topics(gen, admin)
    out = f"{gen.topic_prefix}.out"
    admin.create(out, 2)
    produce_events(gen, count=6000)
    with PriceService() as prices:
        arm(tmp_path / "arm", MIDWRITE_ARM, "rows=100")  # die in the middle of the first batch
        sup = prices_job(tmp_path, gen.topic_prefix, out, prices.url, "at_least_once")
        try:
            sup.start()
            wait_for(lambda: (sup.tick() or True) and sup.restarts != [], 180, "the mid-write kill")
            wait_for(
                lambda: (sup.tick() or True) and sum(1 for _ in read_topic(out)) > 5600,
                240,
                "the restarted job to write its output",
            )
        finally:
            sup.stop()
    from jobs.prices import JOB

    report = judge(JOB.name, JOB.contract, list(read_topic(out)), None, dedup=True)
    assert report.divergent > 0, report
    assert report.verdict == "inconsistent"


def report_store_path():
    from recovery_lib.settings import get_settings

    return get_settings().home / "metrics.duckdb"
