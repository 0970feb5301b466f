"""The comparison harness's logic: the figures every variant is measured by, which variants
apply to a job, the report's relations to native, its table and chart, and the resource
sampler on a real child process."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from recovery_lib.bench.compare_bench import (
    VARIANTS,
    CompareBench,
    CompareConfig,
    builds_cec_aggregate,
    chart,
    failure_figures,
    pipeline_of,
    rows,
)

FAIL_MS = 100_000


def _samples(before_ms: int, after: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """One output every 100 ms for the 30 s before the failure at ``before_ms`` latency."""
    steady = [(FAIL_MS - 30_000 + i * 100, before_ms) for i in range(300)]
    return steady + after


def test_failure_figures_measure_gap_recovery_and_disturbance() -> None:
    # Nothing for 5 s after the failure, then 5 s at 4x the latency, then normal again.
    after = [(FAIL_MS + 5_000 + i * 100, 2_000) for i in range(50)]
    after += [(FAIL_MS + 10_000 + i * 100, 500) for i in range(200)]
    figures = failure_figures(_samples(500, after), FAIL_MS)
    assert figures["output_gap_s"] == pytest.approx(5.0)
    assert 9.0 <= figures["recovery_time_s"] <= 11.0
    assert figures["p99_after_over_before"] == pytest.approx(4.0)
    assert figures["p50_before_ms"] == 500


def test_failure_figures_of_a_failure_that_did_not_fire_are_empty() -> None:
    figures = failure_figures(_samples(500, []), None)
    assert figures == {"recovery_time_s": None, "output_gap_s": None, "p50_before_ms": None}


def test_variants_cover_every_mode_the_issue_names() -> None:
    assert set(VARIANTS) == {
        "native", "causal", "standby", "standby-hot", "cec", "kazoo", "liverobin", "release",
        "two-phase", "coor", "unc", "cic", "coor-shared", "unc-shared", "cic-shared",
    }  # fmt: skip
    assert dict(VARIANTS["unc-shared"].env) == {"RECOVERY_PIPELINE_PLACEMENT": "shared"}
    assert dict(VARIANTS["standby-hot"].env) == {"RECOVERY_STANDBY_HOT": "true"}
    assert VARIANTS["kazoo"].sink == "release" and VARIANTS["kazoo"].victim == "leader"
    assert VARIANTS["two-phase"].mode == "native" and VARIANTS["cic"].protocol == "cic"


def test_applicability_read_from_the_job_and_the_pipelines_file() -> None:
    assert builds_cec_aggregate("avgprice") is True
    assert builds_cec_aggregate("q3") is False
    assert pipeline_of("q3") == "q3p"
    assert pipeline_of("q8") == "q8p"
    assert pipeline_of("prices") is None


def test_cec_and_protocols_not_applicable_to_a_job_without_them(tmp_path: Path) -> None:
    """No Spark starts: both answers come before any run."""
    bench = CompareBench(CompareConfig(job="prices"), str(tmp_path / "cmp"), Console(quiet=True))
    report = bench.run(["cec", "coor"])
    notes = {e["name"]: e.get("not_applicable", "") for e in report["variants"]}
    assert "cec_aggregate" in notes["cec"]
    assert "no pipeline" in notes["coor"]
    assert (tmp_path / "cmp.json").exists() and (tmp_path / "cmp.png").stat().st_size > 0
    with pytest.raises(ValueError, match="unknown variant"):
        bench.run(["flink"])


def _entry(name: str, p50: float, recovery: float | None) -> dict:
    return {
        "name": name, "verdict": "consistent", "guarantee": "exactly-once", "fired": True,
        "p50_before_ms": p50, "p99_30s_before_ms": 2 * p50, "recovery_time_s": recovery,
        "output_gap_s": 3.0, "p99_after_over_before": 1.2, "throughput_eps": 2000.0,
        "peak_processes": 4, "peak_rss_mb": 1500, "restart_time_s": 2.0,
    }  # fmt: skip


def test_relations_to_native_table_and_chart(tmp_path: Path) -> None:
    bench = CompareBench(CompareConfig(), str(tmp_path / "cmp"), Console(quiet=True))
    slow = {**_entry("unc", 900, None), "p99_after_over_before": None}  # never came back
    bench.report["variants"] = [
        _entry("native", 400, 20.0),
        _entry("kazoo", 800, 1.0),
        {"name": "cec", "not_applicable": "not a CEC aggregate"},
        slow,
    ]
    bench._relate()
    kazoo = bench.report["variants"][1]
    assert kazoo["vs_native"]["p50_before_ms"] == 2.0
    assert kazoo["vs_native"]["recovery_time_s"] == 0.05
    table = rows(bench.report)
    assert [r["variant"] for r in table] == ["native", "kazoo", "cec", "unc"]
    assert table[1]["oracle"] == "consistent exactly-once" and table[1]["note"] == ""
    assert table[2]["note"] == "not a CEC aggregate"
    assert table[3]["note"] == (
        "latency not back within 10 % of before by the run's end; "
        "no output in the 30 s after the kill"
    )
    chart(bench.report, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 10_000


def test_a_kazoo_trigger_is_given_to_kazoo_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replicated modes' batch slack reaches the experiment: KaZoo's leader gets the
    trigger, LiveRobin its heartbeat period, a restarting mode neither."""
    import recovery_lib.bench.compare_bench as compare_bench
    from recovery_lib.metrics.resources import ResourceSampler

    seen = {}

    class Captured(ValueError):
        pass

    def experiment(cfg, *_args, **_kwargs):
        seen[cfg.mode] = (cfg.trigger_s, cfg.heartbeat_period_s)
        raise Captured("captured")  # before any process starts

    monkeypatch.setattr(compare_bench, "Experiment", experiment)
    bench = CompareBench(
        CompareConfig(job="q3", kazoo_trigger_s=8.0, liverobin_period_s=6.0),
        "unused",
        Console(quiet=True),
    )
    for name in ("kazoo", "liverobin", "native"):
        assert bench.experiment(VARIANTS[name], ResourceSampler()) == {"not_applicable": "captured"}
    assert seen == {"kazoo": (8.0, None), "liverobin": (None, 6.0), "native": (None, None)}
