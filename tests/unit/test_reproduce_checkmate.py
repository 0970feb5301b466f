"""CheckMate's extractor: the fields of bench_protocols.json it reads become the Measured rows
expected (a changed report format fails here), the real report compares, a missing one gives
no rows."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from recovery_lib.reproduce.extract_checkmate import REPORT, extract
from recovery_lib.reproduce.report import compare

REAL_REPORTS = Path(__file__).parents[2] / "docs" / "benchmarks"


def summary(normalised: float, overhead: float, invalid: float, ckpt_ms: float) -> dict:
    return {
        "normalised": normalised,
        "message_overhead": overhead,
        "invalid_pct": invalid,
        "checkpoint_time_ms": ckpt_ms,
        "forced_checkpoints": 0,
        "throughput_runs": [100.0, 110.0],
    }


def uniform(pipeline: str, protocol: str) -> dict:
    return {
        "pipeline": pipeline,
        "protocol": protocol,
        "events": 1000,
        "interval_s": 2.0,
        "checkpoints": 5,
    }


def paced(suite_pipeline: str, protocol: str, kill: str, **extra: object) -> dict:
    trial = {
        "pipeline": suite_pipeline,
        "protocol": protocol,
        "rate": 500,
        "load": 0.5,
        "kill": kill,
        "kill_at_s": 45.0,
        "paced_s": 120.0,
        "interval_s": 2.0,
        "invalid_pct": 0.0,
        "forced_checkpoints": 0,
        "checkpoints": 10,
    }
    return {**trial, **extra}


def recovery(protocol: str, restart_s: float, recovery_s: float, p50s: list) -> dict:
    restarted = ["reroute"] if protocol == "unc" else ["convert", "reroute", "route"]
    return paced(
        "q1p3",
        protocol,
        "reroute",
        recovery_time_s=recovery_s,
        recoveries=[{"restart_time_s": restart_s, "restarted": restarted}],
        first_output_ms=1_000_000,
        killed_ms=1_040_000,
        latency_per_s=[{"s": s, "p50": p50, "n": n} for s, p50, n in p50s],
    )


def skew(
    protocol: str, hot: float, p50_ms: float, ckpt_ms: float, restart_s: float, load: float = 0.5
) -> dict:
    return paced(
        "q3p",
        protocol,
        "join",
        hot_ratio=hot,
        load=load,
        latency_p50_ms=p50_ms,
        checkpoint_time_ms=ckpt_ms,
        recoveries=[{"restart_time_s": restart_s}],
    )


def cyclic(protocol: str, ckpt_ms: float, restart_s: float, invalid: float) -> dict:
    return paced(
        "reach",
        protocol,
        "join",
        load=None,
        rate=300,
        checkpoint_time_ms=ckpt_ms,
        invalid_pct=invalid,
        recoveries=[{"restart_time_s": restart_s}],
    )


REPORT_JSON = {
    "summary": {
        "q1p": {
            "none": summary(1.0, 1.0, 0.0, 50),
            "coor": summary(0.95, 1.0, 0.0, 5000),
            "unc": summary(0.9, 1.0, 0.0, 50),
            "cic": summary(0.85, 1.5, 0.0, 60),
        },
        "q3p": {
            "none": summary(1.0, 1.0, 0.0, 500),
            "coor": summary(0.8, 1.0, 0.0, 20000),
            "unc": summary(1.2, 1.0, 0.0, 500),
            "cic": summary(0.4, 1.8, 3.0, 400),
        },
    },
    "uniform": [uniform(p, proto) for p in ("q1p", "q3p") for proto in ("none", "coor")],
    "mst": [{"pipeline": "q1p3", "mst_eps": 1000}, {"pipeline": "q3p", "mst_eps": 2000}],
    "recovery": [
        # in the 30 s before the kill: UNC's p50s 1 s x3, 2 s, 3 s (p50 1 s); COOR's 4 s
        recovery(
            "unc",
            10.0,
            30.0,
            [(5, 9000, 9), (20, 1000, 3), (30, 2000, 1), (39, 3000, 1), (45, 9000, 9)],
        ),
        recovery("coor", 20.0, 90.0, [(20, 4000, 1)]),
    ],
    "skew": [
        skew("coor", 0.1, 10_000, 1000, 10.0),
        skew("unc", 0.1, 5000, 500, 12.0),
        skew("cic", 0.1, 5000, 500, 11.0),
        skew("coor", 0.2, 200_000, 5000, 10.0),
        skew("unc", 0.2, 5000, 500, 20.0),
        skew("cic", 0.2, 5000, 500, 15.0),
    ],
    "cyclic": [cyclic("unc", 600.0, 12.5, 0.0), cyclic("cic", 700.0, 13.0, 1.5)],
}


def measured(report: dict, tmp_path: Path) -> dict[str, list[tuple]]:
    (tmp_path / "bench_protocols.json").write_text(json.dumps(report))
    rows: dict[str, list[tuple]] = {}
    for m in extract(tmp_path):
        assert m.report == REPORT and m.how
        rows.setdefault(m.row_id.removeprefix("checkmate."), []).append((m.value, m.unit, m.agrees))
    return rows


def test_synthetic_report_gives_the_expected_rows(tmp_path: Path) -> None:
    rows = measured(REPORT_JSON, tmp_path)
    assert rows["mst_ratio.q1_q8_q12.coor.upto50"] == [(0.95, "ratio", True)]
    assert rows["mst_gap.unc_vs_coor"] == [(5.3, "%", True)]  # (0.95 - 0.9) / 0.95
    assert rows["mst_ratio.q3.coor_unc.most"] == [(0.8, "ratio", True), (1.2, "ratio", True)]
    assert rows["mst_ratio.q3.cic"] == [(0.4, "ratio", True)]
    assert rows["msg_overhead.all.coor.w10"] == [(1.0, "ratio", True)] * 2
    assert rows["msg_overhead.q1.cic.w10"] == [(1.5, "ratio", False)]  # paper 2.1
    assert rows["msg_overhead.q3.cic.w10"] == [(1.8, "ratio", True)]  # paper 1.82
    assert rows["invalid_ckpt.q1.unc.w10"] == [(0.0, "%", True)]
    assert rows["invalid_ckpt.q3.unc.w10"] == [(0.0, "%", False)]  # paper 4 %
    assert rows["invalid_ckpt.q3.cic.w10"] == [(3.0, "%", True)]  # paper 3 %
    assert rows["ckpt_time.coor_vs_unc_cic"] == [(40.0, "x", True)]  # 20 s / 500 ms
    assert rows["recovery_time.q1.w10"] == [(30.0, "s", None), (90.0, "s", None)]
    assert rows["latency.q3.coor_spikes"] == [(4.0, "x", False)]  # 4 s / 1 s
    assert rows["restart_time_ratio.unc_cic_vs_coor.w100"] == [(0.5, "x", False)]
    assert rows["skew.coor.p50_growth_per_step.load50"] == [(20.0, "x", True)]
    assert rows["skew.coor.ckpt_time_growth_per_step.load50"] == [(5.0, "x", False)]
    assert rows["skew.restart_time"] == [(2.0, "x", False)]  # 20 s / 10 s at hot 0.2
    assert rows["cyclic.ckpt_time.unc.w5"] == [(600.0, "ms", None)]
    assert rows["cyclic.restart_time.cic.w5"] == [(13000, "ms", None)]
    assert rows["cyclic.invalid_ckpt.unc.w5"] == [(0.0, "%", False)]  # paper 1.4 %
    assert rows["cyclic.invalid_ckpt.cic.w5"] == [(1.5, "%", True)]  # paper 1.7 %
    assert rows["default.load_pct_of_mst"] == [(50.0, "%", False)]
    assert rows["default.run_duration"] == [(120.0, "s", False)]
    assert rows["default.failure_at"] == [(45.0, "s", False)]
    assert rows["default.skew.load_low"] == [(50.0, "%", True)]
    assert rows["default.cyclic.failure_at"] == [(45.0, "s", False)]
    # Not in the report, so not answered: 80 % skew, the 50-worker tables, the node set.
    unanswered = {"skew.load80", "default.skew.load_high", "msg_overhead.q1.cic.w50"}
    assert not (unanswered | {"default.cyclic.nodes"}) & set(rows)


def test_the_cyclic_node_set_is_answered_from_the_trial_that_records_it(tmp_path: Path) -> None:
    report = copy.deepcopy(REPORT_JSON)
    report["cyclic"][0]["reach_nodes"] = 1_000_000
    assert measured(report, tmp_path)["default.cyclic.nodes"] == [(1_000_000, "nodes", True)]
    report["cyclic"][0]["reach_nodes"] = 10_000
    assert measured(report, tmp_path)["default.cyclic.nodes"] == [(10_000, "nodes", False)]


def test_skew_at_80_percent_is_answered_once_it_ran(tmp_path: Path) -> None:
    report = copy.deepcopy(REPORT_JSON)
    report["skew"] += [
        skew("coor", 0.1, 9000, 3000, 10.0, load=0.8),
        skew("unc", 0.1, 3000, 500, 10.0, load=0.8),
        skew("cic", 0.1, 2000, 600, 10.0, load=0.8),
    ]
    rows = measured(report, tmp_path)
    assert rows["skew.load80"] == [(3.0, "x", True)]  # p50 9 s / 3 s, checkpoint 3 s / 0.6 s
    assert rows["default.skew.load_high"] == [(80.0, "%", True)]


def test_a_missing_field_is_an_error_naming_it(tmp_path: Path) -> None:
    report = copy.deepcopy(REPORT_JSON)
    del report["summary"]["q1p"]["cic"]["message_overhead"]
    with pytest.raises(ValueError, match="summary.q1p.cic has no field 'message_overhead'"):
        measured(report, tmp_path)


def test_disagreements_say_why(tmp_path: Path) -> None:
    (tmp_path / "bench_protocols.json").write_text(json.dumps(REPORT_JSON))
    for m in extract(tmp_path):
        assert bool(m.differs_because) == (m.agrees is False), m.row_id


def test_the_real_report_compares() -> None:
    comparisons = compare("checkmate", REAL_REPORTS)  # raises on a row naming no paper row
    assert sum(1 for c in comparisons if c.ours) >= 10


def test_a_missing_report_gives_no_rows(tmp_path: Path) -> None:
    assert extract(tmp_path) == []
