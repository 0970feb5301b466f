"""The failure campaign's case selection and summary (the runs themselves are benchmarks)."""

from __future__ import annotations

from collections import Counter

import pytest

from recovery_lib.bench.campaign import (
    CASES,
    FAULT_KINDS,
    RELEASE_CASES,
    SUITES,
    planned,
    select,
    summarize,
)
from recovery_lib.experiment.runner import FAILURE_KINDS


def test_cases_cover_every_failure_kind_and_twenty_failures_per_mode():
    kinds = [k for c in CASES for k in c.kinds.split(",")]
    assert len(kinds) >= 20
    assert {"driver-kill", "mid-write", "task-retry", "executor-kill"} <= set(kinds)
    assert all("executor-kill" not in c.kinds or c.cluster for c in CASES)


def test_release_suite_has_twenty_failures_of_every_sink_failure_kind():
    kinds = Counter(k for c in RELEASE_CASES for k in c.kinds.split(","))
    # torn-write: CEC only; the pauses are stalls (a zombie test), not failures that re-run
    stalls = {"pause", "pause-mid-write", "torn-write"}
    faults = {*FAULT_KINDS, "broker-kill"}  # their own suites
    assert set(kinds) == set(FAILURE_KINDS) - stalls - faults
    assert min(kinds.values()) >= 20, kinds
    assert all("executor-kill" not in c.kinds or c.cluster for c in RELEASE_CASES)
    assert len({c.name for c in RELEASE_CASES}) == len(RELEASE_CASES)
    # The transactional sink takes the same failures as release and at-least-once.
    sinks = {v.sink for _, v in planned(RELEASE_CASES, SUITES["release"][1])}
    assert sinks == {"release", "at-least-once", "transactional"}


def test_the_brokers_suite_kills_twenty_leaders_per_sink_in_runs_that_validate():
    from recovery_lib.bench.campaign import SUITE_TIMING
    from recovery_lib.experiment.runner import ExperimentConfig

    cases, variants = SUITES["brokers"]
    timing = SUITE_TIMING["brokers"]
    per_sink: Counter = Counter()
    for case, variant in planned(cases, variants):
        kinds = case.kinds.split(",")
        assert set(kinds) == {"broker-kill"}
        per_sink[variant.sink] += len(kinds)
        ExperimentConfig(
            query=case.pipeline, mode=variant.mode, sink=variant.sink, fail=case.kinds,
            repeat=len(kinds), duration_s=timing["fail_at_s"] + len(kinds) * timing["every_s"],
            **timing,
        ).validate()  # fmt: skip
    assert set(per_sink) == {"release", "dedup", "transactional"}
    assert min(per_sink.values()) >= 20, per_sink


def test_the_faults_suite_has_twenty_of_every_new_kind_in_runs_their_modes_accept():
    from recovery_lib.experiment.runner import ExperimentConfig
    from recovery_lib.modes import get_mode

    cases, variants = SUITES["faults"]
    runs = planned(cases, variants)
    kinds = Counter(k for case, _ in runs for k in case.kinds.split(","))
    assert set(kinds) == set(FAULT_KINDS) and min(kinds.values()) >= 20, kinds
    assert {v.mode for _, v in runs} == {"native", "causal", "standby", "kazoo", "liverobin"}
    assert {c.pipeline for c, _ in runs} == {"q3", "prices"}
    for case, variant in runs:  # every planned run passes the experiment's own validation
        repeat = len(case.kinds.split(","))
        mode = variant.mode
        if variant.sink != "dedup" and case.pipeline == "prices":
            mode = get_mode(mode).with_causal_logging(True)
        ExperimentConfig(
            query=case.pipeline, mode=mode, sink=variant.sink, fail=case.kinds, repeat=repeat,
            fail_at_s=15.0, every_s=30.0, jitter_s=8.0, duration_s=15.0 + repeat * 30.0,
        ).validate()  # fmt: skip


def test_the_tables_suite_has_twenty_of_every_kind_per_table_sink_and_a_plain_append_contrast():
    from recovery_lib.bench.campaign import SUITE_TIMING
    from recovery_lib.experiment.runner import ExperimentConfig

    cases, variants = SUITES["tables"]
    runs = planned(cases, variants)
    timing = SUITE_TIMING["tables"]
    per_sink: dict[str, Counter] = {}
    for case, variant in runs:
        per_sink.setdefault(variant.sink, Counter()).update(case.kinds.split(","))
        repeat = len(case.kinds.split(","))
        ExperimentConfig(
            query=case.pipeline, mode=variant.mode, sink=variant.sink, fail=case.kinds,
            repeat=repeat, duration_s=timing["fail_at_s"] + repeat * timing["every_s"],
            **timing,
        ).validate()  # fmt: skip
    kinds = {"driver-kill", "mid-write", "task-retry", "write-retry"}
    for sink in ("delta", "iceberg"):
        assert set(per_sink[sink]) == kinds and min(per_sink[sink].values()) >= 20, per_sink
    assert set(per_sink) == {"delta", "iceberg", "delta-append", "iceberg-append"}
    assert {c.pipeline for c, v in runs if v.sink == "delta"} == {"q1", "q3"}


def test_repeated_release_cases_run_their_own_input_and_failure_times():
    by_kind: dict[tuple[str, bool], list[int]] = {}
    for c in RELEASE_CASES:
        by_kind.setdefault((c.pipeline, c.cluster), []).append(c.seed_offset)
    assert all(len(set(offsets)) == len(offsets) for offsets in by_kind.values()), by_kind


def test_select_cases_and_variants_by_name_and_refuses_unknown_ones():
    assert select("causal", [], []) == SUITES["causal"]
    (case,), variants = select("causal", ["lastbids-cluster"], ["causal"])
    assert case.pipeline == "lastbids" and case.cluster and [v.mode for v in variants] == ["causal"]
    _, (variant,) = select("release", [], ["release"])
    assert variant.sink == "release" and variant.name == "release (native)"
    with pytest.raises(ValueError, match="unknown case.*cases of causal are"):
        select("causal", ["lastbids-moon"], [])
    with pytest.raises(ValueError, match="suites are causal, release, faults, tables"):
        select("exactly", [], [])
    with pytest.raises(ValueError, match="no variant"):
        select("release", [], ["standby"])


def test_summary_counts_fired_failures_and_verdicts_per_mode():
    def entry(mode, verdict, fired):
        return {
            "mode": mode,
            "verdict": verdict,
            "failures": [{"kind": "driver-kill", "fired": f} for f in fired],
        }

    summary = summarize(
        [
            entry("causal", "consistent", [None, True]),
            entry("native", "inconsistent", [None, False]),
        ]
    )
    assert summary["causal"]["failures"] == 2 and summary["causal"]["consistent_runs"] == 1
    assert summary["native"]["failures"] == 1 and summary["native"]["inconsistent_runs"] == 1


def test_by_kind_counts_faults_guarantees_and_medians_per_kind_and_mode():
    from recovery_lib.bench.campaign import by_kind, by_kind_table

    def run(mode, guarantee, duplicated, failures):
        verdict = "consistent" if guarantee == "exactly-once" else "inconsistent"
        return {
            "mode": mode,
            "guarantee": guarantee,
            "verdict": verdict,
            "duplicated": duplicated,
            "failures": [
                {"kind": k, "fired": fired, "recovery_time_s": rec, "output_gap_s": gap}
                for k, fired, rec, gap in failures
            ],
        }

    results = [
        run(
            "native", "exactly-once", 0, [("net-reset", True, 2.0, 1.0), ("poison", True, 9.0, 8.0)]
        ),
        run("native", "exactly-once", 0, [("net-reset", True, 4.0, 3.0)]),
        run("at-least-once (native)", "at-least-once", 7, [("net-reset", True, None, 1.5)]),
        run("native", "none", 0, [("net-reset", False, None, None)]),
    ]
    rows = {(r["kind"], r["mode"]): r for r in by_kind(results)}
    reset = rows[("net-reset", "native")]
    assert (reset["runs"], reset["faults"], reset["fired"]) == (3, 3, 2)
    assert reset["exactly_once_runs"] == 2 and reset["inconsistent_runs"] == 1
    assert reset["recovery_time_s_median"] == 3.0 and reset["output_gap_s_median"] == 2.0
    assert rows[("net-reset", "at-least-once (native)")]["duplicated_at_least_once"] == 7
    assert rows[("poison", "native")]["runs"] == 1
    table = by_kind_table(by_kind(results))
    assert "| net-reset | native | 3 | 2 / 3 | 2 / 3 | 0 | 3.0 (2 measured) | 2.0 |" in table


def test_a_campaign_stopped_halfway_keeps_the_runs_it_finished(tmp_path, monkeypatch):
    """The report is written after every run: a campaign cut short (a session's end, a
    failed run) keeps what it measured, and --merge goes on from there."""
    import io
    import json

    from rich.console import Console

    import recovery_lib.bench.campaign as campaign

    runs = []

    class FakeExperiment:
        def __init__(self, cfg, console, progress):
            self.cfg = cfg

        def run(self):
            runs.append(self.cfg.mode)
            if len(runs) == 2:
                raise KeyboardInterrupt  # the campaign is stopped during its second run
            failure = {"kind": "driver-kill", "fired": True, "at_s": 15.0}
            return {
                "failures": [failure],
                "restarts": [{}],
                "consistency": {"verdict": "consistent", "guarantee": "exactly-once"},
            }

    monkeypatch.setattr(campaign, "Experiment", FakeExperiment)
    cases = (campaign.Case("q3", "driver-kill"),)
    variants = (campaign.Variant("native"), campaign.Variant("causal"))
    out = tmp_path / "c"
    with pytest.raises(KeyboardInterrupt):
        campaign.run_campaign(str(out), Console(file=io.StringIO()), cases, variants)
    report = json.loads((tmp_path / "c.json").read_text())
    assert [r["mode"] for r in report["results"]] == ["native"]
    assert report["summary"]["native"]["failures"] == 1
    assert (tmp_path / "c_by_kind.md").exists()


def test_an_inconclusive_run_is_not_counted_exactly_once_and_its_missing_fault_not_fired():
    """A run whose last failure was never injected is inconclusive: the table by kind must not
    count it as exactly-once, and the failure counts as requested and not fired."""
    from recovery_lib.bench.campaign import by_kind, by_kind_table

    def run(verdict: str, not_injected: list[dict]) -> dict:
        return {
            "mode": "release (kazoo)", "verdict": verdict, "guarantee": "exactly-once",
            "duplicated": 0, "not_injected": not_injected,
            "failures": [{"kind": "net-reset", "fired": True, "output_gap_s": 1.0}],
        }  # fmt: skip

    rows = by_kind(
        [
            run("consistent", []),
            run("inconclusive", [{"kind": "checkpoint-unwritable", "at_s": 345.7}]),
        ]
    )
    reset = next(r for r in rows if r["kind"] == "net-reset")
    assert (reset["exactly_once_runs"], reset["inconclusive_runs"], reset["runs"]) == (1, 1, 2)
    unwritable = next(r for r in rows if r["kind"] == "checkpoint-unwritable")
    assert (unwritable["fired"], unwritable["faults"]) == (0, 1)
    assert "| 1 / 2 (1 inconclusive) |" in by_kind_table(rows)
