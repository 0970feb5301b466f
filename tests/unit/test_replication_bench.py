"""The replication benchmark's own arithmetic and evidence, without running it: the zombie's
refused writes read from the replicas' logs, the chart drawn from a report."""

from __future__ import annotations

import json

from recovery_lib.bench.replication_bench import (
    MASKING_RUNS,
    chart,
    masking_row,
    sink_for,
    zombie_attempts,
)
from recovery_lib.ha.replication.gate import REPLICA_HEADER
from recovery_lib.io.sinks.dedup_reader import SinkRecord


def test_the_zombies_refused_writes_are_counted_per_replica_log(tmp_path):
    replicas = tmp_path / "faulty" / "replicas"
    for name, text in {
        "a": "kazoo guard: write of batch 7 refused: not the published batch\n" * 3,
        "a.dead-1": "started\n",
        "b": "kazoo guard: waiting for batch 8\n",
    }.items():
        (replicas / name).mkdir(parents=True)
        (replicas / name / "job.log").write_text(text)
    (replicas / "b" / "role.json").write_text(json.dumps({"role": "leader", "epoch": 2}))
    raw = [
        SinkRecord("q1-0-0-0", None, None, b"x", "t", 0, 0, ((REPLICA_HEADER, b"b"),)),
        SinkRecord("q1-0-0-1", None, None, b"y", "t", 0, 1, ((REPLICA_HEADER, b"b"),)),
        SinkRecord("q1-0-0-0", None, None, b"x", "t", 0, 2, ((REPLICA_HEADER, b"a"),)),
        SinkRecord("q1-0-0-0", None, None, b"x", "t", 1, 0, ((REPLICA_HEADER, b"a"),)),
    ]  # the last one: the same id in another partition is another output
    found = zombie_attempts(tmp_path, raw)
    assert found["guard_refusals"] == {"a": 3, "a.dead-1": 0, "b": 0}
    assert found["late_copies"] == {"a": 1}
    assert found["roles"]["b"]["epoch"] == 2


def test_replicas_write_through_the_release_sink_and_single_processes_dedup():
    assert [sink_for(m) for _, m, _ in MASKING_RUNS] == [
        "dedup", "dedup", "release", "release", "release",
    ]  # fmt: skip


def test_the_chart_is_drawn_from_a_partial_report(tmp_path):
    run = {"p99_after_over_before": 1.1, "recovery_time_s": 2.0,
           "latency_ms": {"p50": 800, "p99": 1500}}  # fmt: skip
    report = {
        "masking": [{"name": "q3", "runs": {n: run for n, _, _ in MASKING_RUNS}}],
        "heartbeat": [{"heartbeat_period_s": p, **run} for p in (0.5, 1.0)],
        "cost": [{"name": "q3", "runs": {"native": run, "kazoo": run}}],
    }
    chart(report, tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 10_000


def test_a_native_run_that_never_recovered_bounds_every_ratio_from_above(tmp_path):
    def run(recovery, gap, p99_ratio=1.0):  # noqa: ANN001, ANN202
        return {"recovery_time_s": recovery, "output_gap_s": gap, "duration_s": 120.0,
                "failures": [{"kind": "driver-kill", "at_s": 40.2}],
                "p99_after_over_before": p99_ratio, "latency_ms": {"p50": 1, "p99": 2}}  # fmt: skip

    runs = {"native": run(None, 50.0, None), "standby": run(30.0, 15.0),
            "kazoo-leader": run(8.0, 5.0), "kazoo-follower": run(None, 2.0),
            "liverobin": run(4.0, 2.5)}  # fmt: skip
    row = masking_row("q3", 5000, runs)
    assert row["native_recovery_is_lower_bound"] and row["native_recovery_s"] == 79.8
    assert row["recovery_vs_native"]["kazoo-leader"] == round(8.0 / 79.8, 3)
    assert row["recovery_vs_native_is_upper_bound"]
    assert row["recovery_vs_native"]["kazoo-follower"] is None  # no recovery time of its own
    assert row["gap_vs_native"]["liverobin"] == 0.05
    runs["native"] = run(20.0, 50.0)
    measured = masking_row("q3", 5000, runs)
    assert not measured["native_recovery_is_lower_bound"]
    assert measured["recovery_vs_native"]["kazoo-leader"] == 0.4
    chart({"masking": [row, measured]}, tmp_path / "m.png")  # None ratios drawn as "no output"
    assert (tmp_path / "m.png").stat().st_size > 10_000


def test_rederive_recomputes_the_comparisons_of_a_saved_report(tmp_path):
    from rich.console import Console

    from recovery_lib.bench.replication_bench import ReplicationBench

    run = {"recovery_time_s": 5.0, "output_gap_s": 5.0, "duration_s": 120.0,
           "failures": [{"at_s": 40.0}], "p99_after_over_before": 1.0,
           "latency_ms": {"p50": 1, "p99": 2}}  # fmt: skip
    native = {**run, "recovery_time_s": None, "output_gap_s": 50.0}
    runs = {"native": native, "kazoo-leader": run}
    saved = {"masking": [{"name": "q3", "rate": 5000, "runs": runs, "recovery_vs_native": {}}]}
    (tmp_path / "r.json").write_text(json.dumps(saved))
    ReplicationBench(str(tmp_path / "r"), Console(quiet=True), append=True).rederive()
    (row,) = json.loads((tmp_path / "r.json").read_text())["masking"]
    assert row["recovery_vs_native"]["kazoo-leader"] == 0.062 and row["native_recovery_s"] == 80.0
    assert (tmp_path / "r.png").exists()


def test_a_failed_run_is_kept_as_a_result_and_the_row_and_chart_still_come(tmp_path):
    run = {"recovery_time_s": 5.0, "output_gap_s": 5.0, "duration_s": 120.0,
           "failures": [{"at_s": 40.0}], "p99_after_over_before": 1.0,
           "latency_ms": {"p50": 1, "p99": 2}}  # fmt: skip
    failed = {"name": "masking_q3_liverobin", "error": "did not process its warm-up events"}
    row = masking_row("q3", 5000, {"native": run, "liverobin": failed})
    assert row["failed_runs"] == {"liverobin": failed["error"]}
    assert row["recovery_vs_native"]["liverobin"] is None
    report = {"masking": [row], "heartbeat": [{"heartbeat_period_s": 0.25, **failed}],
              "cost": [{"name": "q3", "runs": {"native": run, "liverobin": failed}}]}  # fmt: skip
    chart(report, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000


def test_reuse_takes_a_run_from_its_experiment_report_instead_of_running_it(tmp_path):
    from rich.console import Console

    from recovery_lib.bench.replication_bench import ReplicationBench

    result = {"throughput_eps": 10.0, "latency_ms": {"p50": 1, "p99": 2}, "restart_time_s": 1.0,
              "recovery_time_s": 2.0, "output_gap_s": 3.0, "failures": [{"at_s": 40.0}],
              "consistency": {"verdict": "consistent", "guarantee": "exactly-once"},
              "elapsed_s": 99.0}  # fmt: skip
    (tmp_path / "r_masking_q3_native.json").write_text(json.dumps(result))
    bench = ReplicationBench(str(tmp_path / "r"), Console(quiet=True), reuse=True)
    entry = bench._experiment("masking_q3_native", bench._config("q3", "native", 5000.0))
    assert entry["recovery_time_s"] == 2.0 and entry["elapsed_s"] == 99.0
    assert entry["verdict"] == "consistent"
