"""``recovery advise``: the facts it measures and the rules that turn them into a mode, each
reason citing what our benchmarks measured."""

from __future__ import annotations

import json

from recovery_lib.advisor.facts import Facts, job_facts, key_skew, pipeline_facts
from recovery_lib.advisor.rules import advise


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
