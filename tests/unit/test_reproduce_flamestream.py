"""Paper 004's extractor reads bench_sinks.json and release_campaign.json, without Spark."""

from __future__ import annotations

import json
from pathlib import Path

from recovery_lib.reproduce.extract_flamestream import extract
from recovery_lib.reproduce.report import compare

BENCHMARKS = Path(__file__).parents[2] / "docs/benchmarks"


def _point(interval_s: float, alo: float, release: float, two_phase: float) -> dict:
    return {
        "interval_s": interval_s,
        "at_least_once": {"p50_ms": alo},
        "release": {"p50_ms": release},
        "two_phase": {"p50_ms": two_phase},
    }


def _write(tmp_path: Path) -> None:
    sinks = {
        "machine": "2 cores, local[2], embedded tansu broker",
        "rate_eps": 1000.0,
        "release_goal": 1.1,
        "jobs": {
            "q1": [
                _point(2.0, 1300.0, 1500.0, 1600.0),
                _point(1.0, 800.0, 820.0, 850.0),
                {"interval_s": 5.0, "error": "the output topic is too narrow"},
            ],
            "q3": [],
        },
    }
    campaign = {
        "results": [
            {"case": "q1-local-1", "pipeline": "q1", "sink": "release", "rate": 1000,
             "recovery_mode": "native", "guarantee": "exactly-once", "duplicated": 0,
             "failures": [{"kind": "driver-kill"}, {"kind": "mid-write"}],
             "experiment_report": "docs/benchmarks/rc_q1_release.json"},
            {"case": "q1-local-1", "pipeline": "q1", "sink": "at-least-once", "rate": 1000,
             "duplicated": 7, "guarantee": "at-least-once"},
            {"case": "q3-local-1", "pipeline": "q3", "sink": "release", "error": "x"},
        ]
    }  # fmt: skip
    run = {"latency_ms": {"p50": 900.0, "p99": 5000.0}, "output_gap_s": 3.5,
           "restarts": [{"restart_time_s": 10.0}, {"restart_time_s": 12.5}]}  # fmt: skip
    (tmp_path / "bench_sinks.json").write_text(json.dumps(sinks))
    (tmp_path / "release_campaign.json").write_text(json.dumps(campaign))
    (tmp_path / "rc_q1_release.json").write_text(json.dumps(run))


def test_reports_give_the_overhead_its_trend_and_the_failure_runs(tmp_path):
    _write(tmp_path)
    rows: dict[str, list] = {}
    for m in extract(tmp_path):
        rows.setdefault(m.row_id, []).append(m)

    overhead = rows["flamestream.eo_latency_overhead"]
    assert [(m.value, m.unit, m.agrees) for m in overhead] == [
        (20.0, "ms", True), (200.0, "ms", False),
    ]  # fmt: skip
    assert "ratio 1.154" in overhead[1].how and overhead[1].differs_because
    (flat,) = rows["flamestream.eo_overhead_vs_interval"]
    assert (flat.value, flat.agrees) == (180.0, False)
    growth, ratio = rows["flamestream.flink_eo_latency_vs_interval"]
    assert (growth.value, growth.unit, growth.agrees) == (750.0, "ms", True)
    assert (ratio.value, ratio.unit, ratio.agrees) == (1.231, "x", True)
    assert [m.value for m in rows["flamestream.default.input_rate"]] == [1000.0]
    assert [m.value for m in rows["flamestream.default.nodes"]] == [1.0]
    (failures,) = rows["flamestream.recovery.ckpt_1000ms"]
    assert (failures.value, failures.agrees) == (5000.0, None)
    assert failures.report == str(tmp_path / "rc_q1_release.json")
    assert "0 duplicates" in failures.how and "had 7" in failures.how
    assert "restarts 10-12.5 s" in failures.how


def test_the_real_reports_answer_at_least_three_rows():
    comparisons = compare("flamestream", BENCHMARKS)  # raises on a row id of no row
    measured = [c for c in comparisons if c.ours]
    assert len(measured) >= 3


def test_missing_reports_give_no_rows(tmp_path):
    assert extract(tmp_path) == []
    _write(tmp_path)
    (tmp_path / "bench_sinks.json").unlink()
    assert {m.row_id for m in extract(tmp_path)} == {"flamestream.recovery.ckpt_1000ms"}
