"""A daemon's /metrics: Prometheus names (units, ``_total``), counters that follow the
supervisor, the verdict as a labelled gauge, and example alert rules and a Grafana dashboard
that name only what is exposed."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
import yaml

from recovery_lib.ha.replication.replica_set import Replacement, ReplacementStatus
from recovery_lib.metrics.openmetrics import JobMetrics, exposed_names
from recovery_lib.runtime.supervisor import Restart

DOCKER = Path(__file__).resolve().parents[2] / "docker"
PROMQL_FUNCTIONS = {"increase", "rate", "deriv", "and", "or", "unless", "sum", "by", "max"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (identifiers outside braces and labels)."""
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)
    return {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare) if w.startswith("recovery_")}


def supervisor(restarts: int, replacements: list[Replacement] | None = None):  # noqa: ANN201
    return SimpleNamespace(
        serving=lambda: True,
        restarts=[Restart("exit -9", 1000, 1000 + 4500) for _ in range(restarts)],
        takeovers=[],
        **(
            {"replacements": replacements, "failed": {}, "gate": SimpleNamespace(dropped={"a": 3})}
            if replacements is not None
            else {}
        ),
    )


def test_counters_follow_the_supervisor_and_a_scrape_shows_them() -> None:
    metrics = JobMetrics("q3_ops", "native")
    metrics.observe_supervisor(supervisor(1))
    metrics.observe_supervisor(supervisor(1))  # the same restart seen twice counts once
    metrics.observe_supervisor(supervisor(2))
    metrics.observe_verdict("consistent", "exactly-once")
    metrics.observe_verdict("inconsistent", "at-least-once")  # the newest report wins
    port = metrics.serve(0)
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert 'recovery_restarts_total{job="q3_ops",mode="native"} 2.0' in text
    assert 'recovery_last_restart_seconds{job="q3_ops",mode="native"} 4.5' in text
    assert re.search(
        r'recovery_consistency_verdict\{guarantee="at-least-once",job="q3_ops",mode="native",'
        r'verdict="inconsistent"\} 1.0', text
    )  # fmt: skip
    assert re.search(r'verdict="consistent"\} 0.0', text)


def test_a_replica_set_reports_deaths_replacements_and_gate_drops() -> None:
    metrics = JobMetrics("q3_kazoo", "kazoo")
    dead = Replacement("a", "exit -9", 0, "b")
    joined = Replacement("b", "exit -9", 0, "a", status=ReplacementStatus.JOINED)
    metrics.observe_supervisor(supervisor(0, [dead, joined]))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in metrics.registry.collect()
        for s in family.samples
    }
    labels = (("job", "q3_kazoo"), ("mode", "kazoo"))
    assert samples[("recovery_replica_deaths_total", labels)] == 2
    assert samples[("recovery_replica_replacements_total", labels)] == 1
    assert samples[("recovery_gate_dropped_copies_total", (*labels, ("replica", "a")))] == 3


def test_alert_rules_and_the_grafana_dashboard_name_only_exposed_metrics() -> None:
    metrics = JobMetrics("j", "kazoo")
    metrics.observe_supervisor(supervisor(1, [Replacement("a", "x", 0, "b")]))
    for gauge in (metrics.input_lag_records, metrics.batch_duration):
        gauge.labels(**metrics.labels).set(1)
    metrics.gc_freed.labels(**metrics.labels).inc(10)  # what observe_store adds from the store
    exposed = exposed_names(metrics)
    rules = yaml.safe_load((DOCKER / "alerts.yml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    dashboard = json.loads((DOCKER / "grafana-dashboard.json").read_text())
    exprs += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    named = set().union(*(metric_names(e) for e in exprs))
    assert named and named <= exposed, sorted(named - exposed)
    assert {"RecoveryJobDown", "RecoveryVerdictNotExactlyOnce", "RecoveryReplicaMissing"} <= {
        r["alert"] for g in rules["groups"] for r in g["rules"]
    }
    assert metric_names("increase(recovery_restarts_total[15m]) > 3") == {"recovery_restarts_total"}


def test_a_pipeline_daemon_counts_its_recoveries() -> None:
    metrics = JobMetrics("pipeline:q1p", "unc")
    done = SimpleNamespace(restart_time_s=7.5)
    metrics.observe_pipeline(False, [SimpleNamespace(restart_time_s=None)])
    metrics.observe_pipeline(True, [done, SimpleNamespace(restart_time_s=None)])
    values = {s.name: s.value for f in metrics.registry.collect() for s in f.samples}
    assert values["recovery_restarts_total"] == 2 and values["recovery_job_up"] == 1
    assert values["recovery_last_restart_seconds"] == 7.5


def test_ops_status_lists_each_running_daemons_metrics_url(tmp_path, settings_env) -> None:
    import os

    from recovery_lib.cli.ops_cmd import _daemon_metrics
    from recovery_lib.runtime.daemon import DaemonStatus

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: q3_x, job: q3}\n  - {name: q3_y, job: q3}\n")
    pipelines = tmp_path / "pipelines.yaml"
    pipelines.write_text("pipelines: []\n")
    home = tmp_path / "home"
    settings_env(RECOVERY_HOME=home, RECOVERY_JOBS_FILE=jobs, RECOVERY_PIPELINES_FILE=pipelines)
    running = DaemonStatus("q3_x", "running", os.getpid(), 0, metrics_port=43210)
    (home / "jobs" / "q3_x").mkdir(parents=True)
    (home / "jobs" / "q3_x" / "daemon.json").write_text(json.dumps(running.__dict__))
    assert _daemon_metrics() == [("job q3_x", "running", "http://127.0.0.1:43210/metrics")]


def test_output_gap_grows_until_output_comes_back_then_recovery_time_is_set() -> None:
    metrics = JobMetrics("q3_ops", "native")
    failure = 100_000
    before = [(failure - 10_000 + i * 500, 200) for i in range(20)]  # p50 200 ms for 10 s
    gauge = metrics.registry.get_sample_value

    def value(name: str) -> float | None:
        return gauge(f"recovery_{name}", metrics.labels)

    metrics.observe_output(before, [v for v, _ in before], failure, failure + 7_000)
    assert value("last_output_gap_seconds") == 7.0  # no output yet: the silence so far
    assert value("last_recovery_seconds") is None  # latency not back (no output at all)
    # Output again 12 s after the failure: first late (a backlog), then as before.
    after = [(failure + 12_000 + i * 250, 3_000 if i < 8 else 200) for i in range(40)]
    samples = before + after
    metrics.observe_output(samples, [v for v, _ in samples], failure, failure + 30_000)
    assert value("last_output_gap_seconds") == 12.0
    assert value("last_recovery_seconds") == 14.0  # the first second of 3 back within 10 %


def test_input_lag_counts_records_and_the_age_of_the_oldest_unread() -> None:
    metrics = JobMetrics("q3_ops", "native")
    committed = {"in": {"0": 10, "1": 5}}
    ends = {("in", 0): 12, ("in", 1): 5}
    metrics.observe_input_lag(committed, ends, oldest_unread_ms=40_000, now=52_500)
    sample = metrics.registry.get_sample_value
    assert sample("recovery_input_lag_records", metrics.labels) == 2
    assert sample("recovery_input_lag_seconds", metrics.labels) == 12.5
    metrics.observe_input_lag(committed, {("in", 0): 10, ("in", 1): 5})  # caught up
    assert sample("recovery_input_lag_seconds", metrics.labels) == 0


def test_last_failure_is_the_newest_detection_of_any_kind() -> None:
    sup = supervisor(1, [Replacement("a", "x", 9_000, "b")])
    assert JobMetrics.last_failure_ms(sup) == 9_000
    assert JobMetrics.last_failure_ms(supervisor(0)) is None


def test_a_windowed_output_follower_forgets_what_is_older_than_its_window() -> None:
    from recovery_lib.metrics.latency import LatencyCollector

    follower = LatencyCollector("out", "r", None, config={}, window_s=10)
    for second in range(100):
        follower.samples.append((second * 1000, 50))
        follower.per_second[second] += 1
        follower.seen_ids[f"id-{second}".encode()] = second
    follower._newest_ms = 99_000  # noqa: SLF001 - what the consumer thread tracks
    follower._trim()  # noqa: SLF001
    assert follower.samples[0] == (89_000, 50) and len(follower.samples) == 11
    assert min(follower.per_second) == 89 and min(follower.seen_ids.values()) == 89
    unbounded = LatencyCollector("out", "r", None, config={})
    unbounded.samples.append((0, 1))
    unbounded._trim()  # noqa: SLF001 - no window: everything is kept (an experiment's run)
    assert unbounded.samples == [(0, 1)]


def test_live_metrics_follow_a_run_the_experiment_drives_and_stop_serving() -> None:
    from recovery_lib.metrics.latency import LatencyCollector
    from recovery_lib.metrics.openmetrics import LiveMetrics
    from recovery_lib.metrics.store import now_ms

    sup = supervisor(0, [])  # a replica set, no failure yet
    output = LatencyCollector("out", "r", None, config={})
    live = LiveMetrics(JobMetrics("q3_kazoo", "kazoo"), sup, output, every_s=0.05)
    port = live.start(0)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        died = now_ms() - 4_000
        output.samples.append((died + 3_000, 100))  # output came back 3 s after the death
        sup.replacements.append(Replacement("a", "exit -9", died, "b"))  # seen after its output

        labels = {"job": "q3_kazoo", "mode": "kazoo"}
        sample = live.metrics.registry.get_sample_value
        deadline = time.monotonic() + 30
        # The death and the output gap after it: one observation sets the death, then the gap.
        while (
            sample("recovery_replica_deaths_total", labels) != 1
            or sample("recovery_last_output_gap_seconds", labels) is None
        ):
            assert time.monotonic() < deadline, "the thread did not observe the death"
            time.sleep(0.05)
        text = httpx.get(url, timeout=10).text  # what Prometheus scrapes
        assert 'recovery_replica_deaths_total{job="q3_kazoo",mode="kazoo"} 1.0' in text, text
        assert 'recovery_last_output_gap_seconds{job="q3_kazoo",mode="kazoo"} 3.0' in text, text
    finally:
        live.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=2)


def test_live_metrics_log_a_failure_that_repeats_once_not_every_few_seconds(caplog) -> None:
    import logging

    from recovery_lib.metrics.latency import LatencyCollector
    from recovery_lib.metrics.openmetrics import LiveMetrics

    class Broken:
        calls = 0

        def serving(self) -> bool:
            Broken.calls += 1
            raise RuntimeError("supervisor gone")

    output = LatencyCollector("out", "r", None, config={})
    live = LiveMetrics(JobMetrics("q3", "native"), Broken(), output, every_s=0.02)
    caplog.set_level(logging.WARNING, logger="recovery_lib.metrics.openmetrics")
    live.start(0)
    try:
        deadline = time.monotonic() + 10
        while Broken.calls < 5:
            assert time.monotonic() < deadline, "the thread did not observe"
            time.sleep(0.02)
    finally:
        live.stop()
    warnings = [r for r in caplog.records if "supervisor gone" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
