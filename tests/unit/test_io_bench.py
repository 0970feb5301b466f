"""`recovery bench io`'s comparison with Spark's own Kafka source: ratios and goals from the
figures of one run (the bench itself runs in `make bench-io`)."""

from __future__ import annotations

from recovery_lib.bench.io_bench import DRIVER, OURS, SPARKS, against_sparks_source, path_name


def run(ours_eps: float, spark_eps: float, ours_p50: float, spark_p50: float) -> dict:
    report = {}
    for kind in ("noop", "noop_kv"):
        report[path_name(OURS, kind)] = {"events_per_s": ours_eps, "cpu_s_per_million": 9.0}
        report[path_name(SPARKS, kind)] = {"events_per_s": spark_eps, "cpu_s_per_million": 4.5}
    report["latency_by_source"] = [
        {
            "source": OURS,
            "rate_eps": 1000.0,
            "p50_ms": ours_p50,
            "p99_ms": 900.0,
            "phase_p50_ms": {"addBatch": 150.0, "commitOffsets": 90.0},
        },
        {
            "source": SPARKS,
            "rate_eps": 1000.0,
            "p50_ms": spark_p50,
            "p99_ms": 700.0,
            "phase_p50_ms": {"addBatch": 120.0, "commitOffsets": 40.0},
        },
    ]
    return report


def test_the_project_keeps_its_report_keys_and_sparks_get_their_own():
    assert path_name(OURS, "noop") == "source_to_noop"
    assert path_name(SPARKS, "noop_kv") == "spark_source_to_noop_kv"


def test_within_goal_at_0_8x_throughput_and_1_2x_p50():
    out = against_sparks_source(run(80_000, 100_000, 240.0, 200.0))
    assert out["all_columns"]["ours_over_spark"] == 0.8 and out["all_columns"]["within_goal"]
    assert out["q1_latency_by_rate"]["1000"]["p50_ours_over_spark"] == 1.2
    assert out["q1_latency_by_rate"]["1000"]["within_goal"]
    phases = out["q1_latency_by_rate"]["1000"]["batch_phase_p50_ms"]
    assert phases["commitOffsets"] == {OURS: 90.0, SPARKS: 40.0}


def test_a_slower_source_misses_the_goals():
    out = against_sparks_source(run(50_000, 100_000, 500.0, 200.0))
    assert out["key_value"]["ours_over_spark"] == 0.5 and not out["key_value"]["within_goal"]
    assert out["key_value"]["spark_cpu_s_per_million"] == 4.5
    assert not out["q1_latency_by_rate"]["1000"]["within_goal"]


def test_two_rounds_in_opposite_orders_are_averaged_per_source():
    """A session's first latency run is slower: each source runs first once and last once,
    and its figures are the mean of its two rounds."""
    report = run(100_000, 100_000, 400.0, 250.0)  # round 0: ours first (slow), Spark's second
    report["latency_by_source"] += [
        {**report["latency_by_source"][1], "p50_ms": 270.0, "round": 1},  # Spark's first now
        {**report["latency_by_source"][0], "p50_ms": 240.0, "round": 1,
         "phase_p50_ms": {"addBatch": 110.0, "commitOffsets": 70.0}},
    ]  # fmt: skip
    at = against_sparks_source(report)["q1_latency_by_rate"]["1000"]
    assert at["ours_p50_ms"] == 320.0 and at["spark_p50_ms"] == 260.0
    assert at["rounds_p50_ms"] == {OURS: [400.0, 240.0], SPARKS: [250.0, 270.0]}
    assert at["p50_ours_over_spark"] == round(320 / 260, 3)
    assert at["batch_phase_p50_ms"]["addBatch"] == {OURS: 130.0, SPARKS: 120.0}


def test_the_driver_read_path_is_judged_against_sparks_source_too():
    report = run(100_000, 100_000, 300.0, 200.0)
    report[path_name(DRIVER, "noop_kv")] = {"events_per_s": 20_000, "cpu_s_per_million": 30.0}
    report["latency_by_source"].append(
        {
            "source": DRIVER,
            "rate_eps": 1000.0,
            "p50_ms": 210.0,
            "p99_ms": 650.0,
            "phase_p50_ms": {"addBatch": 118.0},
        }
    )
    out = against_sparks_source(report)
    assert out["key_value_driver_read"]["driver_over_spark"] == 0.2
    at = out["q1_latency_by_rate"]["1000"]
    assert at["p50_driver_over_spark"] == 1.05 and at["driver_within_goal"]
    assert not at["within_goal"]  # the default path (300 ms) misses it in the same run
    assert at["batch_phase_p50_ms"]["addBatch"] == {OURS: 150.0, DRIVER: 118.0, SPARKS: 120.0}
    assert at["rounds_p50_ms"][DRIVER] == [210.0]


def test_a_report_from_before_the_driver_path_has_no_driver_figures():
    out = against_sparks_source(run(100_000, 100_000, 240.0, 200.0))
    assert "key_value_driver_read" not in out
    at = out["q1_latency_by_rate"]["1000"]
    assert at["driver_p50_ms"] is None and not at["driver_within_goal"]
