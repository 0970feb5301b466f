"""The CEC extractor (recovery_lib/reproduce/extract_cec.py) without Spark: a synthetic report
gives the expected rows, the real report compares against the paper, a missing report gives
nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery_lib.reproduce.extract_cec import extract
from recovery_lib.reproduce.report import compare

BENCHMARKS = Path(__file__).parents[2] / "docs" / "benchmarks"


def _run(
    knob: str, value: int, extent: int, ec_load_s: float, replayed_bytes: int, batch_ms: int = 0
) -> dict:
    return {
        "knob": knob,
        "value": value,
        "open_windows": 1000,
        "extent": extent,
        "ec_load_s": ec_load_s,
        "replayed_bytes": replayed_bytes,
        "mean_batch_ms_before": batch_ms,
    }


REPORT = {
    "summary": {
        "throughput_vs_no_checkpointing": {
            "fast": {"CEC, no checkpointing": 1.0, "CEC, G_open only": 0.95},
            "slow": {"CEC, G_open only": 0.8, "Spark, HDFS state": 0.5},
        },
        "ec_load_vs_extent": {"ms_per_1000_records": 60.0, "intercept_s": -1.0, "r2": 0.9},
    },
    "recovery": [
        _run("Q", 2, 2500, 0.3, 2_000_000),
        _run("Q", 1, 2000, 0.2, 1_000_000),
        _run("Q", 8, 5000, 0.6, 5_000_000),
        _run("Q", 4, 4500, 0.5, 4_000_000),
        _run("U", 100, 3000, 0.4, 3_000_000),
        _run("U", 50, 2200, 0.25, 1_500_000),
        _run("U", 10, 2100, 0.21, 1_250_000),
        _run("CP", 25, 1500, 0.15, 500_000, batch_ms=1700),
        _run("CP", 100, 2000, 0.2, 900_000, batch_ms=1400),
        _run("CP", 250, 2100, 0.22, 950_000, batch_ms=1500),
    ],
    "ec_load_sweep": [
        {"extent": 10_000, "ec_load_s": 0.1},
        {"extent": 20_000, "ec_load_s": 0.2},
        {"extent": 40_000, "ec_load_s": 0.4},
        {"extent": 160_000, "ec_load_s": 10.0},  # beyond the linear range: left out of our fit
    ],
}


def _write(directory: Path, report: dict) -> Path:
    (directory / "bench_cec.json").write_text(json.dumps(report))
    return directory


def _values(rows) -> dict[str, list]:
    out: dict[str, list] = {}
    for m in rows:
        out.setdefault(m.row_id, []).append((m.value, m.unit, m.agrees))
    return out


def test_synthetic_report(tmp_path: Path) -> None:
    rows = extract(_write(tmp_path, REPORT))
    assert all(m.report == "docs/benchmarks/bench_cec.json" for m in rows)
    got = _values(rows)
    assert got.pop("cec.baseline.gopen_net.tput_drop") == [(5.0, "%", True), (20.0, "%", False)]
    assert got.pop("cec.ec_load_linear_in_extent") == [
        (10.0, "ms per 1000 records", True),  # 10k-40k: exactly linear
        (60.0, "ms per 1000 records", False),  # the report's whole-sweep fit, r2 0.9
    ]
    assert got == {
        "cec.default.openwins": [(1000, "windows", None)],
        "cec.q.extent.q8x": [(5000, "tuples", True)],  # below its target 8 x 1000
        "cec.q.ec_load.small_extent.min": [(0.2, "s", None)],
        "cec.q.ec_load.small_extent.max": [(0.3, "s", None)],
        "cec.q.ec_load.large_extent.min": [(0.5, "s", None)],
        "cec.q.ec_load.large_extent.max": [(0.6, "s", None)],
        "cec.q.replay.low_q.min": [(1.0, "MB", None)],
        "cec.q.replay.low_q.max": [(2.0, "MB", None)],
        "cec.q.replay.high_q": [(4.0, "MB", None)],
        "cec.u.extent.min": [(2100, "tuples", None)],
        "cec.u.extent.max": [(3000, "tuples", None)],
        "cec.u.ec_load.min": [(0.21, "s", None)],
        "cec.u.ec_load.max": [(0.4, "s", None)],
        "cec.u.replay.low": [(1.25, "MB", None)],
        "cec.u.replay.high": [(3.0, "MB", None)],
        "cec.cp.ec_load_est.cp25": [(0.15, "s", None)],
        "cec.cp.ec_load_est.cp250": [(0.22, "s", None)],
        # batch time against CP = 250 ms: over 10 % longer at 25 ms (agrees), shorter at 100
        "cec.cp.response_time.cp25": [(1.7, "s", True)],
        "cec.cp.response_time.cp100": [(1.4, "s", False)],
    }
    differs = [m for m in rows if m.agrees is False]
    assert all(m.differs_because for m in differs)
    linear_differs = [m for m in differs if m.row_id == "cec.ec_load_linear_in_extent"]
    assert "broker" in linear_differs[0].differs_because


def test_a_report_lacking_a_field_names_it(tmp_path: Path) -> None:
    broken = {**REPORT, "recovery": [{"knob": "Q", "value": 1}]}
    with pytest.raises(ValueError, match="bench_cec.json: missing field open_windows"):
        extract(_write(tmp_path, broken))


def test_real_report_compares_against_the_paper() -> None:
    comparisons = compare("cec", BENCHMARKS)
    measured = [c for c in comparisons if c.ours]
    assert len(measured) >= 5
    assert all(m.unit for c in measured for m in c.ours)


def test_missing_report_gives_no_rows(tmp_path: Path) -> None:
    assert extract(tmp_path) == []
