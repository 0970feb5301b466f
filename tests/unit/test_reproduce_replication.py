"""Paper 002's extractor reads bench_replication.json, partial or complete, without Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery_lib.reproduce.extract_replication import extract
from recovery_lib.reproduce.report import compare

BENCHMARKS = Path(__file__).parents[2] / "docs/benchmarks"


def _run(mode: str, victim: str | None = None, **fields: object) -> dict:
    return {
        "name": f"masking_q3_{mode}",
        "query": "q3",
        "mode": mode,
        "victim": victim,
        "fail": "driver-kill",
        "rate": 5000.0,
        "duration_s": 120.0,
        "heartbeat_period_s": None,
        "latency_ms": {"p50": 7000.0, "p99": 20000.0},
        "p99_30s_before_ms": None,
        "p99_30s_after_ms": None,
        "p99_after_over_before": None,
        "recovery_time_s": None,
        "output_gap_s": None,
        "failures": [{"kind": "driver-kill", "at_s": 40.0, "fired": True}],
        "verdict": "consistent",
        "guarantee": "exactly-once",
        **fields,
    }


def _kills(victim: str, n: int) -> dict:
    run = _run("kazoo", victim, failures=[{"kind": "driver-kill", "fired": True}] * 3)
    return {**run, "name": f"kills_q3_kazoo_{victim}_{n}"}


def _liverobin(name: str, rate: float, p50: float, p99: float, **fields: object) -> dict:
    return {"name": name, "query": "q1", "mode": "liverobin", "rate": rate,
            "latency_ms": {"p50": p50, "p99": p99}, **fields}  # fmt: skip


def _report() -> dict:
    failed = {"name": "masking_q3_liverobin", "query": "q3", "mode": "liverobin",
              "heartbeat_period_s": 6.0, "error": "did not process its warm-up events"}  # fmt: skip
    runs = {
        "native": _run("native", output_gap_s=50.0),
        "standby": _run("standby", output_gap_s=15.0, recovery_time_s=30.0),
        "kazoo-leader": _run(
            "kazoo",
            "leader",
            output_gap_s=6.0,
            recovery_time_s=10.0,
            p99_30s_before_ms=20000.0,
            p99_30s_after_ms=23000.0,
            p99_after_over_before=1.15,
        ),  # fmt: skip
        "kazoo-follower": _run(
            "kazoo",
            "follower",
            output_gap_s=4.0,
            recovery_time_s=3.0,
            p99_30s_before_ms=13000.0,
            p99_30s_after_ms=26000.0,
            p99_after_over_before=2.0,
        ),  # fmt: skip
        "liverobin": failed,
    }
    return {
        "machine": "2 cores shared by the broker, the generator and both replicas",
        "masking": [
            {
                "name": "q3",
                "rate": 5000.0,
                "runs": runs,
                "native_recovery_s": 80.0,
                "native_recovery_is_lower_bound": True,
            }  # fmt: skip
        ],
        "cost": [],
        "heartbeat": [
            _liverobin("heartbeat_q1_0.25s", 2000.0, 0, 0, heartbeat_period_s=0.25, error="x"),
            _liverobin("heartbeat_q1_2s", 2000.0, 3500.0, 6000.0, heartbeat_period_s=2.0),
            _liverobin("heartbeat_q1_0.5s", 2000.0, 1500.0, 3000.0, heartbeat_period_s=0.5),
            _liverobin("heartbeat_q1_1s", 2000.0, 2000.0, 4000.0, heartbeat_period_s=1.0),
        ],
        "slow": [
            _liverobin("slow_q1_1s", 2000.0, 2100.0, 5000.0),
            _liverobin("slow_q1_0s", 2000.0, 2000.0, 3000.0),
        ],
        "kills": [_kills("leader", 1), _kills("leader", 2), {**_kills("leader", 3), "error": "x"}],
        "zombie": [],
    }


def _by_row(rows: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for m in rows:
        out.setdefault(m.row_id, []).append(m)
    return out


def test_a_partial_report_gives_each_answered_row_its_number_and_verdict(tmp_path):
    (tmp_path / "bench_replication.json").write_text(json.dumps(_report()))
    rows = _by_row(extract(tmp_path))

    passive = rows["activerep.fault.passive.latency"]
    assert [(m.value, m.agrees) for m in passive] == [
        (50.0, True), (80.0, True), (15.0, True), (30.0, True),
    ]  # fmt: skip
    assert "at least" in passive[1].how  # native never recovered within the run
    gap, ratio = rows["activerep.fault.kazoo_leader.outlier_latency"]
    assert (gap.value, gap.unit, gap.agrees) == (6.0, "s", None)
    assert (ratio.value, ratio.unit, ratio.agrees) == (1.15, "x", True)
    assert "2 of 2 repeated-kill runs (6 kills" in ratio.how and "1 failed to run" in ratio.how
    (follower,) = rows["activerep.fault.kazoo_follower.latency_impact"]
    assert (follower.value, follower.agrees) == (2.0, False) and follower.differs_because
    assert "activerep.fault.liverobin.latency_impact" not in rows  # its only run failed
    assert [(m.value, m.agrees) for m in rows["activerep.cost.compute"]] == [(2.0, True)]
    (beat,) = rows["activerep.mib1.liverobin_latency_vs_heartbeat"]
    assert (beat.value, beat.unit, beat.agrees) == (2000.0, "ms", True)
    assert "periods 0.25 s failed" in beat.how
    (slow,) = rows["activerep.mib3.latency_vs_rate_imbalance"]
    assert (slow.value, slow.agrees) == (2000.0, True)  # p99 3,000 -> 5,000 ms
    assert sorted(m.value for m in rows["activerep.default.input_rate"]) == [2000.0, 5000.0]
    assert [m.value for m in rows["activerep.default.measurement_window"]] == [120.0]
    assert "activerep.default.heartbeat_period" not in rows  # only from runs that ran
    assert all(m.report == str(tmp_path / "bench_replication.json") for m in extract(tmp_path))


def test_no_output_after_the_kill_and_a_falling_trend_are_disagreements(tmp_path):
    report = _report()
    follower = report["masking"][0]["runs"]["kazoo-follower"]
    follower.update(p99_30s_after_ms=None, p99_after_over_before=None)
    report["heartbeat"][1]["latency_ms"]["p50"] = 1000.0  # 2 s period below 0.5 s's
    (tmp_path / "bench_replication.json").write_text(json.dumps(report))
    rows = _by_row(extract(tmp_path))
    (gone,) = rows["activerep.fault.kazoo_follower.latency_impact"]
    assert (gone.value, gone.agrees) == (None, False) and "no output" in gone.differs_because
    (beat,) = rows["activerep.mib1.liverobin_latency_vs_heartbeat"]
    assert beat.agrees is False and "micro-batch" in beat.differs_because


def test_cost_rows_compare_each_mode_with_one_replica(tmp_path):
    report = _report()
    report["cost"] = [
        {
            "name": "q3",
            "rate": 5000.0,
            "runs": {
                "native": _run("native"),
                "kazoo": _run("kazoo"),
                "liverobin": {"mode": "liverobin", "error": "x"},
            },
            "p50_vs_single": {"native": 1.0, "kazoo": 1.3, "liverobin": None},
            "p99_vs_single": {"native": 1.0, "kazoo": 1.6, "liverobin": None},
        }  # fmt: skip
    ]
    (tmp_path / "bench_replication.json").write_text(json.dumps(report))
    cost = _by_row(extract(tmp_path))["activerep.cost.compute"]
    assert [(m.value, m.unit, m.agrees) for m in cost] == [(2.0, "x", True), (1.3, "x", None)]
    # With CPU measured: a ratio near the paper's 2x agrees, far from it differs and says why.
    for ratio, agrees in ((2.1, True), (1.2, False)):
        report["cost"][0]["cpu_vs_single"] = {"native": 1.0, "kazoo": ratio, "liverobin": None}
        (tmp_path / "bench_replication.json").write_text(json.dumps(report))
        cost = _by_row(extract(tmp_path))["activerep.cost.compute"]
        cpu = [m for m in cost if "CPU seconds" in m.how]
        assert [(m.value, m.agrees) for m in cpu] == [(ratio, agrees)]
        assert bool(cpu[0].differs_because) is not agrees


def test_the_real_report_compares_whatever_it_holds_so_far():
    if not (BENCHMARKS / "bench_replication.json").exists():
        pytest.skip("no bench_replication.json yet")
    comparisons = compare("active-replication", BENCHMARKS)  # raises on a row id of no row
    assert comparisons


def test_a_missing_report_gives_no_rows(tmp_path):
    assert extract(tmp_path) == []
