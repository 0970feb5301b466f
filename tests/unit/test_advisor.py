"""``recovery advise``: the facts it measures and the rules that turn them into a mode, each
reason citing what our benchmarks measured."""

from __future__ import annotations

import json

from recovery_lib.advisor.facts import Facts, job_facts, key_skew, pipeline_facts
from recovery_lib.advisor.rules import advise, measured_gaps


def _masking(tmp_path, gaps: dict[str, float]):  # noqa: ANN202
    runs = {name: {"output_gap_s": gap} for name, gap in gaps.items()}
    report = {"masking": [{"name": "q3", "runs": {**runs, "liverobin": {"error": "x"}}}]}
    (tmp_path / "bench_replication.json").write_text(json.dumps(report))
    return tmp_path


def test_key_skew_is_the_share_of_the_hottest_one_percent_of_keys():
    uniform = key_skew(str(i % 1000) for i in range(10_000))
    assert uniform.keys == 1000 and uniform.hot_share == 0.01 and not uniform.skewed
    hot = key_skew(["hot"] * 3_000 + [str(i) for i in range(7_000)])
    assert hot.hot_share >= 0.3 and hot.skewed
    assert key_skew([]).records == 0


def test_the_cheapest_mode_whose_measured_gap_fits_the_outage_bound(tmp_path):
    reports = _masking(tmp_path, {"native": 53.6, "standby": 15.9, "kazoo-leader": 6.6})
    facts = lambda bound: Facts("q3", "job", False, False, max_outage_s=bound)  # noqa: E731
    assert advise(facts(None), reports).mode == "native"
    assert advise(facts(60), reports).mode == "native"
    assert advise(facts(20), reports).mode == "standby"
    kazoo = advise(facts(10), reports)
    assert kazoo.mode == "kazoo" and "6.6 s" in kazoo.reasons[0]
    nothing = advise(facts(1), reports)
    assert nothing.mode == "kazoo" and "no measured mode" in nothing.reasons[0]


def test_a_nondeterministic_job_runs_causal_and_plain_consumers_get_the_release_sink(tmp_path):
    reports = _masking(tmp_path, {"native": 53.6})
    prices = job_facts("prices", max_outage_s=60)
    advice = advise(prices, reports)
    assert prices.nondeterministic and advice.mode == "causal" and advice.causal
    assert advice.sink == "release" and "causal" in advice.reasons[0]
    deduping = advise(Facts("q3", "job", False, False, plain_consumers=False), reports)
    assert deduping.sink == "dedup" and not deduping.causal


def test_pipelines_cycles_and_skew_choose_unc_and_a_small_uniform_one_coor(tmp_path):
    reach = pipeline_facts("reach")
    assert reach.cycle and advise(reach, tmp_path).mode == "unc"
    q1p = pipeline_facts("q1p")
    assert q1p.stages == 2 and not q1p.cycle and advise(q1p, tmp_path).mode == "coor"
    skewed = Facts("q1p", "pipeline", False, False, stages=2, skew=key_skew(["k"] * 9 + ["j"]))
    assert "skewed input" in advise(skewed, tmp_path).reasons[0]
    three = pipeline_facts("q1p3")
    assert three.stages == 3 and advise(three, tmp_path).mode == "unc"


def test_two_replicas_are_skipped_above_the_load_they_kept_up_with(tmp_path):
    from recovery_lib.advisor.facts import Load

    reports = _masking(tmp_path, {"native": 53.6, "standby": 15.9, "kazoo-leader": 6.6})

    def facts(rate: float) -> Facts:
        load = Load(rate_eps=rate, mst_eps=60_000, mst_source="bench_nexmark.json")
        return Facts("q3", "job", False, False, max_outage_s=10, load=load)

    light = facts(2_000)
    advice = advise(light, reports)
    assert advice.mode == "kazoo"
    assert any("3% of the MST 60,000 ev/s" in r for r in advice.reasons)
    heavy = facts(30_000)
    advice = advise(heavy, reports)
    assert advice.mode == "standby" and "50% of the measured MST" in advice.reasons[0]
    # No mode's gap fits, and replicas cannot keep up: a standby, not kazoo.
    tight = Facts("q3", "job", False, False, max_outage_s=1, load=heavy.load)
    assert advise(tight, reports).mode == "standby"
    over = advise(facts(90_000), reports)
    assert any("cannot keep up at all" in r for r in over.reasons)


def test_the_load_is_measured_from_the_newest_run_and_the_nexmark_reports(tmp_path):
    from recovery_lib.advisor.facts import job_load, measured_mst
    from recovery_lib.advisor.rules import state_reason
    from recovery_lib.metrics.store import MetricsStore

    store_path = tmp_path / "metrics.duckdb"
    with MetricsStore(store_path) as store:
        # What the job daemon writes: the jobs-file entry, whose "job" is the job's reference.
        config = {"job": "q3", "name": "q3_local", "mode": "native"}
        old = store.start_run("q3", "native", config)
        new = store.start_run("q3", "native", config)
        for run, rate, rows in ((old, 100.0, 5), (new, 4_000.0, 1_000)):
            for batch in range(3):
                ts = 1_000 * batch + (run == new) * 10**6
                store.add("micro_batches", [(run, "q3", batch, ts, 100, rate + batch, rate,
                          1, 1, 1, 1, 1, 1, rows, rows * 1000, 0, 1, None)])  # fmt: skip
        reference = store.start_run("q3", "reference", {})
        store.add("micro_batches", [(reference, "q3", 0, 10**9, 1, 9e9, 1, 1, 1, 1, 1, 1, 1, 1,
                                     1, 0, 1, None)])  # fmt: skip
    reports = tmp_path / "reports"
    reports.mkdir()
    for name, mst in (("bench_nexmark.json", 90_000), ("bench_nexmark_joins.json", 40_000)):
        (reports / name).write_text(json.dumps({"queries": {"q3": {"mst_eps": mst}}}))
    assert measured_mst("q3", reports) == (40_000.0, "bench_nexmark_joins.json")
    assert measured_mst("q99", reports) is None
    load = job_load("q3_local", "q3", store_path, reports)
    assert load.rate_eps == 4_001.0 and load.rate_source == f"run {new}"
    assert load.state_rows == 1_000 and load.state_bytes == 1_000_000
    assert load.fraction_of_mst == 0.1
    assert job_load("q3", "q3", store_path, reports, rate_eps=8_000).fraction_of_mst == 0.2
    standby = {"sizes": [{"restored_state_bytes": 50_000, "restart_time_s": 1.5}]}
    (reports / "bench_standby.json").write_text(json.dumps(standby))
    assert "more than 10x" in state_reason(load, reports)


def test_the_comparison_reports_gaps_count_with_the_masking_runs(tmp_path):
    reports = _masking(tmp_path, {"native": 53.6, "standby": 15.9, "kazoo-leader": 6.6})
    compare = {
        "job": "q8",
        "variants": [
            {"name": "standby", "fired": True, "output_gap_s": 25.0},  # worse than masking's
            {"name": "kazoo", "fired": True, "output_gap_s": 4.0},  # better: the worst stays
            {"name": "liverobin", "fired": False, "output_gap_s": 0.5},  # no kill: no evidence
        ],
    }
    (tmp_path / "bench_compare.json").write_text(json.dumps(compare))
    other = {
        "job": "avgprice",
        "variants": [{"name": "native", "fired": True, "output_gap_s": 60.0}],
    }
    (tmp_path / "bench_compare_avgprice.json").write_text(json.dumps(other))
    (tmp_path / "bench_compare_native.json").write_text(json.dumps({"experiment": "x"}))
    gaps = measured_gaps(reports)
    assert gaps["native"] == (60.0, "q3, avgprice (compare)")
    assert gaps["standby"] == (25.0, "q3, q8 (compare)")
    assert gaps["kazoo-leader"] == (6.6, "q3, q8 (compare)")
    assert "liverobin" not in gaps
    bound = Facts("q3", "job", False, False, max_outage_s=20)
    advice = advise(bound, reports)  # standby's worst gap, 25 s, no longer fits 20 s
    assert advice.mode == "kazoo"
    assert advice.evidence == [
        "docs/benchmarks/bench_replication.json",
        "docs/benchmarks/bench_compare.json",
        "docs/benchmarks/bench_compare_avgprice.json",
    ]
