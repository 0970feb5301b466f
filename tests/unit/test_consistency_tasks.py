"""The consistency DAG's compare task (recovery_lib/ops/airflow_tasks.judge_output): an
inconsistency or a failed expectation fails it, an inconclusive verdict skips it with the
reason, a consistent one returns the counts."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from recovery_lib.ops import airflow_tasks

INFO = {"reference_topic": "t.ref", "snapshot": {"batch": 3}, "inputs": {"bids": "t.bids"}}


def _report(verdict: str, gx: bool = True, **extra: object) -> dict:
    return {"verdict": verdict, "ok": verdict == "consistent" and gx, "outputs": 10,
            "reference_outputs": 10, "lost": 0, "duplicated": 0, "divergent": 0, "extra": 0,
            "guarantee": "exactly-once", "inconclusive_because": None,
            "expectations": {"success": gx, "failures": [] if gx else ["x"]}, **extra}  # fmt: skip


@pytest.fixture()
def reports(monkeypatch, recovery_home):
    """consistency_report stubbed (the oracle has its own tests): what the task does with it."""
    calls: list[dict] = []
    answer: list[dict] = []

    def fake(job, run_topic, reference_topic, **kw):  # noqa: ANN001, ANN202
        calls.append({"job": job, "run": run_topic, "reference": reference_topic, **kw})
        return answer[0]

    import recovery_lib.ops.reports as reports_mod

    monkeypatch.setattr(reports_mod, "consistency_report", fake)
    return calls, answer


def test_consistent_returns_counts_and_passes_the_inputs(reports):
    calls, answer = reports
    answer.append(_report("consistent"))
    out = airflow_tasks.judge_output("q3_x", "q3", "t.out", INFO, "release")
    assert out == {"verdict": "consistent", "outputs": 10, "reference_outputs": 10}
    assert calls[0]["inputs"] == {"bids": "t.bids"} and calls[0]["sink_mode"] == "release"


def test_inconclusive_skips_with_the_reason_and_inconsistent_fails(reports):
    _, answer = reports
    answer.append(_report("inconclusive", inconclusive_because="invariants not checked: x"))
    with pytest.raises(AirflowSkipException, match="invariants not checked"):
        airflow_tasks.judge_output("s", "q3", "t.out", INFO, "release")
    answer[0] = _report("inconsistent", lost=4)
    with pytest.raises(AirflowFailException, match="lost 4"):
        airflow_tasks.judge_output("s", "q3", "t.out", INFO, "release")
    answer[0] = _report("inconclusive", gx=False, inconclusive_because="y")
    with pytest.raises(AirflowFailException):  # a failed expectation is an alert regardless
        airflow_tasks.judge_output("s", "q3", "t.out", INFO, "release")
