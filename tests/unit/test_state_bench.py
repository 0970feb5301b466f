"""The state benchmark's arithmetic: which points run, where a restart's time went (from the
events and micro-batches a run leaves in the metrics store), and the goals' ratios."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from recovery_lib.bench.state_bench import StateBench, StateConfig, restart_breakdown
from recovery_lib.metrics.store import MetricsStore

KILL = 1_000_000


def _batch(run: str, batch: int, ts: int, trigger: int, add: int, custom: dict | None) -> tuple:
    return (run, "keyed_state", batch, ts, 100, 100.0, 100.0, trigger, add, 1, 50, 1, 1,
            10, 10, 0, 1, json.dumps(custom) if custom else None)  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "metrics.duckdb"
    with MetricsStore(path) as s:
        run = s.start_run("keyed_state", "native", {})
        for b, ts in enumerate(range(KILL - 20_000, KILL, 2_000)):
            s.add("micro_batches", [_batch(run, b, ts, 900, 400, None)])
        s.event(run, "failure_detected", {"cause": "exit -9"}, KILL + 500)
        s.event(run, "restart", {"pid": 1}, KILL + 600)
        phases = {
            "imported_ms": KILL + 2_600,
            "session_ready_ms": KILL + 12_600,
            "query_built_ms": KILL + 14_600,
            "query_started_ms": KILL + 15_100,
        }
        s.event(run, "job_phases", phases, KILL + 15_100)
        loads = {"rocksdbLoadLatencyMs": 3_000, "rocksdbReplayChangeLogLatencyMs": 1_000}
        s.add("micro_batches", [_batch(run, 10, KILL + 15_400, 6_000, 5_500, loads)])
    return path, run


def test_a_restart_is_broken_down_into_its_phases(store: tuple[Path, str]) -> None:
    path, run = store
    b = restart_breakdown(path, run, KILL, output_gap_s=25.0)
    assert (b.detect_s, b.imports_s, b.session_s, b.build_s, b.start_s) == (
        0.5, 2.0, 10.0, 2.0, 0.5,
    )  # fmt: skip
    assert b.first_batch_s == 6.0 and b.state_load_s == 4.0
    assert b.state_load_source == "rocksdbLoadLatencyMs+rocksdbReplayChangeLogLatencyMs"
    assert b.rest_s == pytest.approx(25.0 - 21.4)  # the first batch ended 21.4 s after the kill
    assert b.takeover_s is None


def test_without_a_load_metric_the_state_load_is_the_first_batch_over_the_median(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.duckdb"
    with MetricsStore(path) as s:
        run = s.start_run("keyed_state", "standby", {})
        for b in range(5):
            s.add("micro_batches", [_batch(run, b, KILL - 10_000 + b * 1_000, 500, 300, None)])
        s.event(run, "job_phases", {"takeover_ms": KILL + 8_000, "query_started_ms": KILL + 9_000})
        s.add("micro_batches", [_batch(run, 5, KILL + 9_100, 2_000, 1_800, {"x": 1})])
    b = restart_breakdown(path, run, KILL, output_gap_s=None)
    assert b.takeover_s == 1.0 and b.imports_s is None
    assert b.state_load_s == 1.5 and "estimate" in (b.state_load_source or "")
    assert b.rest_s is None


def test_no_restart_is_said_so(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with MetricsStore(path) as s:
        run = s.start_run("keyed_state", "native", {})
    b = restart_breakdown(path, run, KILL, output_gap_s=None)
    assert b.notes and "did not restart" in b.notes[0]


def test_the_hdfs_store_stops_at_its_largest_size_and_small_states_run_first() -> None:
    cfg = StateConfig(sizes=(10**6, 10**4, 10**7), variants=("native",), hdfs_max_keys=10**6)
    assert cfg.points() == [
        ("rocksdb", 10**4, "native", "on"),
        ("hdfs", 10**4, "native", "on"),
        ("rocksdb", 10**6, "native", "on"),
        ("hdfs", 10**6, "native", "on"),
        ("rocksdb", 10**7, "native", "on"),
    ]


def test_before_and_after_the_cuts_only_the_restarting_variants_run_twice() -> None:
    cfg = StateConfig(
        sizes=(10**6,), stores=("rocksdb",), variants=("native", "kazoo"), cuts=("off", "on")
    )
    assert cfg.points() == [
        ("rocksdb", 10**6, "native", "off"),
        ("rocksdb", 10**6, "native", "on"),
        ("rocksdb", 10**6, "kazoo", "on"),
    ]
    other = StateConfig(job="q3", sizes=(10**6, 10**7), stores=("rocksdb",), variants=("native",))
    assert other.points() == [("rocksdb", 0, "native", "on")]  # its own input, no size series


def test_the_goals_are_ratios_of_the_points(tmp_path: Path) -> None:
    bench = StateBench(StateConfig(stores=("rocksdb",)), str(tmp_path / "s"), Console())
    gaps = {
        ("native", 10**4): 20.0,
        ("native", 10**6): 60.0,
        ("standby", 10**4): 5.0,
        ("standby", 10**6): 12.0,
        ("kazoo", 10**4): 2.0,
        ("kazoo", 10**6): 2.5,
        ("liverobin", 10**4): 4.0,
        ("liverobin", 10**6): 8.0,
    }
    bench.report["points"] = [
        {"store": "rocksdb", "variant": v, "keys": k, "output_gap_s": g}
        for (v, k), g in gaps.items()
    ]
    bench._relate()
    goals = bench.report["goals"]["rocksdb"]
    assert goals["output_gap_growth"]["native"]["largest_over_smallest"] == 3.0
    assert goals["replicated_flat"] is False  # liverobin grew 2x
    assert goals["standby_over_native_at_largest"] == {"standby": 0.2, "standby-hot": None}
    assert goals["standby_goal_met"]


def test_a_cut_is_reported_as_after_over_before(tmp_path: Path) -> None:
    cfg = StateConfig(stores=("rocksdb",), variants=("native",), cuts=("off", "on"))
    bench = StateBench(cfg, str(tmp_path / "s"), Console())
    bench.report["points"] = [
        {"store": "rocksdb", "variant": "native", "keys": 10**6, "cut": cut,
         "restart_time_s": restart, "output_gap_s": gap}
        for cut, restart, gap in (("off", 20.0, 40.0), ("on", 15.0, 30.0))
    ]  # fmt: skip
    bench._relate()
    (row,) = bench.report["cuts"]
    assert row["restart_time_s"]["after_over_before"] == 0.75
    assert row["output_gap_s"] == {"before": 40.0, "after": 30.0, "after_over_before": 0.75}
    # the goals read the product's points only
    assert bench.report["goals"]["rocksdb"]["output_gap_growth"] == {}


def test_each_later_cut_is_compared_with_the_first_and_the_goals_stay_the_products(
    tmp_path: Path,
) -> None:
    cfg = StateConfig(stores=("rocksdb",), variants=("native",), cuts=("off", "on", "spare"))
    bench = StateBench(cfg, str(tmp_path / "s"), Console())
    bench.report["points"] = [
        {"store": "rocksdb", "variant": "native", "keys": k, "cut": cut, "output_gap_s": gap}
        for k in (10**4, 10**6)
        for cut, gap in (("off", 20.0), ("on", 16.0), ("spare", 5.0 if k == 10**4 else 10.0))
    ]
    bench._relate()
    rows = {(r["keys"], r["after"]): r["output_gap_s"]["after_over_before"]
            for r in bench.report["cuts"]}  # fmt: skip
    assert rows == {(10**4, "on"): 0.8, (10**4, "spare"): 0.25,
                    (10**6, "on"): 0.8, (10**6, "spare"): 0.5}  # fmt: skip
    growth = bench.report["goals"]["rocksdb"]["output_gap_growth"]["native"]
    assert growth["largest_over_smallest"] == 1.0  # "on" at both sizes, not the spare's 2.0


def test_the_points_and_their_breakdowns_are_written_as_markdown(tmp_path: Path) -> None:
    bench = StateBench(StateConfig(stores=("rocksdb",)), str(tmp_path / "s"), Console())
    restarted = {
        "store": "rocksdb", "variant": "native", "keys": 10**4, "cut": "on",
        "output_gap_s": 15.6, "verdict": "consistent", "guarantee": "exactly-once",
        "state_bytes": 2_376_586,
        "breakdown": {"detect_s": 0.565, "session_s": 3.839, "first_batch_s": 10.24,
                      "state_load_s": 0.099},
    }  # fmt: skip
    replicated = {"store": "rocksdb", "variant": "kazoo", "keys": 10**4, "output_gap_s": 8.1,
                  "verdict": "inconsistent", "guarantee": "at-least-once"}  # fmt: skip
    bench.report["points"] = [replicated, restarted]
    bench.save()
    text = (tmp_path / "s_tables.md").read_text()
    points, breakdowns = text.split("Where a restart's time went")
    assert (
        "| rocksdb | 10,000 | kazoo | on | - | - | - | 8.10 | - | - | inconsistent at-least-once |"
        in points
    )
    assert "| rocksdb | 10,000 | native | on | 2.40 | - | - | 15.6 | 0.10 |" in points
    # only the restarting point is broken down, each phase in its column
    (row,) = [line for line in breakdowns.splitlines() if line.startswith("| rocksdb")]
    assert row.startswith("| rocksdb | 10,000 | native | on | 0.56 | - | 3.84 |")
    assert row.endswith("| 10.2 | - | 0.10 | 15.6 |")


def test_a_point_leaves_no_topics_on_the_broker(tmp_path: Path, monkeypatch) -> None:
    """The embedded broker keeps every record in memory: a point's topics go once judged."""
    from recovery_lib.bench import state_bench

    seen: list[bool] = []

    def experiment(self, variant, sampler):  # noqa: ANN001, ANN202
        seen.append(self.cfg.keep_output)
        return {"not_applicable": "recorded"}

    monkeypatch.setattr(state_bench.CompareBench, "experiment", experiment)
    bench = StateBench(StateConfig(), str(tmp_path / "bench_state"), Console(quiet=True))
    bench.point("rocksdb", 10_000, "native")
    assert seen == [False]
