"""The Clonos extractor (recovery_lib/reproduce/extract_clonos.py) without Spark: synthetic
reports give the expected rows, the real reports compare against the paper, missing reports
give nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery_lib.reproduce import extract_clonos
from recovery_lib.reproduce.extract_clonos import extract
from recovery_lib.reproduce.report import compare

BENCHMARKS = Path(__file__).parents[2] / "docs" / "benchmarks"

CAUSAL = {
    "events": 1000,
    "rounds": 3,
    "pipelines": {
        "q12": {
            "on_over_off": {"kafka": 0.9},
            "latency_rate_eps": 500,
            "latency": {
                "off": {"p99_ms": 100.0, "bounded": True},
                "kafka": {"p99_ms": 120.0, "bounded": True},
            },
        },
        "prices": {
            "on_over_off": {"output": 1.01},
            "latency": {
                "off": {"p99_ms": 100.0, "bounded": False},
                "output": {"p99_ms": 103.0, "bounded": False},
            },
        },
    },
}

STANDBY = {
    "compare": [
        {
            "query": "q3",
            "rate": 1000,
            "ratio_recovery": 0.05,
            "ratio_restart": 0.1,
            "standby": {"recovery_time_s": 4.0, "restart_time_s": 1.0},
            "native": {"recovery_time_s": 80.0, "restart_time_s": 10.0},
        },
        {
            "query": "q8",
            "rate": 1000,
            "ratio_recovery": None,
            "ratio_restart": 0.2,
            "standby": {"recovery_time_s": None, "restart_time_s": 2.0},
            "native": {"recovery_time_s": None, "restart_time_s": 10.0},
        },
    ],
    "sizes": [{"takeover_detail": [{"restart_time_s": 1.0}]}],
    "takeovers": [{"takeover_detail": [{"restart_time_s": 3.0}, {"restart_time_s": 2.5}]}],
}

REHEARSAL = {
    "compare": [
        {
            "query": "q3",
            "rate": 1000,
            "ratio_recovery": 0.5,
            "ratio_restart": 0.05,
            "standby": {"recovery_time_s": 30.0, "restart_time_s": 0.8},
            "native": {"recovery_time_s": 60.0, "restart_time_s": 16.0},
        }
    ],
    "sizes": [],
    "takeovers": [],
}

RECOVERY = {
    "results": [
        {"query": "q8", "placement": "local", "rate": 100, "recovery_time_s": 70.0},
        {"query": "q3", "placement": "cluster", "rate": 100, "recovery_time_s": None},
    ]
}


def _write(directory: Path, reports: dict[str, dict]) -> Path:
    for name, report in reports.items():
        (directory / name).write_text(json.dumps(report))
    return directory


def _by_row(rows):
    out: dict[str, list] = {}
    for m in rows:
        out.setdefault(m.row_id, []).append(m)
    return out


def test_synthetic_causal_report(tmp_path: Path) -> None:
    rows = _by_row(extract(_write(tmp_path, {"bench_causal.json": CAUSAL})))
    assert set(rows) == {
        "clonos.tput_overhead.avg.dsd_1",
        "clonos.overhead.conclusion.min",
        "clonos.overhead.conclusion.max",
        "clonos.latency_overhead.dsd_1",
    }
    tput = rows["clonos.tput_overhead.avg.dsd_1"]
    assert [(m.value, m.unit, m.agrees) for m in tput] == [(10.0, "%", True), (-1.0, "%", True)]
    assert all(m.report == "docs/benchmarks/bench_causal.json" for m in tput)
    assert [m.value for m in rows["clonos.overhead.conclusion.min"]] == [-1.0]
    assert [m.value for m in rows["clonos.overhead.conclusion.max"]] == [10.0]
    # 20 % p99 overhead, both runs bounded: above 10 % + 5 points -> differs, with why;
    # 3 % with unbounded runs: overload, not judged.
    q12, prices = rows["clonos.latency_overhead.dsd_1"]
    assert (q12.value, q12.agrees) == (20.0, False)
    assert "Kafka" in q12.differs_because
    assert (prices.value, prices.agrees) == (3.0, None)


def test_synthetic_standby_and_recovery_reports(tmp_path: Path) -> None:
    reports = {
        "bench_standby.json": STANDBY,
        "bench_standby_rehearsal.json": REHEARSAL,
        "bench_recovery.json": RECOVERY,
    }
    rows = _by_row(extract(_write(tmp_path, reports)))
    clonos = rows["clonos.recovery_time.q3.clonos"]
    # ratio 0.05 <= 10 s / 87 s agrees; 0.5 does not, and says why
    assert [(m.value, m.agrees) for m in clonos] == [(4.0, True), (30.0, False)]
    assert clonos[1].differs_because
    assert [m.report for m in clonos] == [
        "docs/benchmarks/bench_standby.json",
        "docs/benchmarks/bench_standby_rehearsal.json",
    ]
    assert [(m.value, m.agrees) for m in rows["clonos.recovery_time.q3.flink"]] == [
        (80.0, None),
        (60.0, None),
    ]
    assert [m.value for m in rows["clonos.recovery_time.q8.flink"]] == [70.0]
    assert "clonos.recovery_time.q8.clonos" not in rows  # no recovery time: no row
    switch = rows["clonos.standby_switch_time"]
    assert [(m.value, m.agrees) for m in switch] == [
        (1.0, None),
        (2.0, None),
        (2.5, None),  # median of the state-size and repeated takeovers
        (0.8, None),
    ]


def test_a_report_lacking_a_field_names_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"bench_causal.json pipelines.q12: missing field on_"):
        extract_clonos.causal_rows({"pipelines": {"q12": {"latency": {}}}})
    _write(tmp_path, {"bench_recovery.json": {"results": [{"query": "q3"}]}})
    with pytest.raises(ValueError, match=r"results\[0\]: missing field placement"):
        extract(tmp_path)


def test_real_reports_compare_against_the_paper() -> None:
    comparisons = compare("clonos", BENCHMARKS)
    measured = [c for c in comparisons if c.ours]
    assert len(measured) >= 5
    assert all(m.unit for c in measured for m in c.ours)


def test_missing_reports_give_no_rows(tmp_path: Path) -> None:
    assert extract(tmp_path) == []
    _write(tmp_path, {"bench_recovery.json": RECOVERY})
    assert {m.row_id for m in extract(tmp_path)} == {"clonos.recovery_time.q8.flink"}
