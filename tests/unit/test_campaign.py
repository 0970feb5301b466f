"""The failure campaign's case selection and summary (the runs themselves are benchmarks)."""

from __future__ import annotations

import pytest

from recovery_lib.bench.causal_campaign import CASES, select_cases, summarize


def test_cases_cover_every_failure_kind_and_twenty_failures_per_mode():
    kinds = [k for c in CASES for k in c.kinds.split(",")]
    assert len(kinds) >= 20
    assert {"driver-kill", "mid-write", "task-retry", "executor-kill"} <= set(kinds)
    assert all("executor-kill" not in c.kinds or c.cluster for c in CASES)


def test_select_cases_by_name_and_refuses_unknown_ones():
    assert select_cases([]) == CASES
    (case,) = select_cases(["lastbids-cluster"])
    assert case.pipeline == "lastbids" and case.cluster
    with pytest.raises(ValueError, match="unknown case.*cases are"):
        select_cases(["lastbids-moon"])


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
