"""The metrics store's GX suites accept every value the code writes: a suite that lags the code
fails the consistency DAG's metrics check on a correct store (the 2-hour soak's DAG run
failed so: the suite did not know the oracle's `inconclusive` verdict)."""

from __future__ import annotations

import pandas as pd

from recovery_lib.verify.expectations import load_suite_spec, validate_frame
from recovery_lib.verify.oracle import Verdict


def _value_set(suite: str, column: str) -> set[str]:
    spec = load_suite_spec(suite)
    sets = [
        e["kwargs"]["value_set"]
        for e in spec["expectations"]
        if e["type"] == "expect_column_values_to_be_in_set" and e["kwargs"]["column"] == column
    ]
    assert len(sets) == 1, f"{suite}: one value set for {column}"
    return set(sets[0])


def test_the_consistency_reports_suite_knows_every_verdict():
    assert _value_set("metrics_consistency_reports", "verdict") == {v.value for v in Verdict}


def test_a_store_with_an_inconclusive_report_passes_and_an_unknown_verdict_fails():
    rows = {
        "run_id": ["a", "b"],
        "verdict": ["consistent", "inconclusive"],
        "lost": [0, 0],
        "duplicated": [0, 0],
        "divergent": [0, 0],
        "outputs": [10, 3],
    }
    good = validate_frame(pd.DataFrame(rows), "metrics_consistency_reports", "test")
    assert good.success, good.failures
    bad = validate_frame(
        pd.DataFrame({**rows, "verdict": ["consistent", "maybe"]}),
        "metrics_consistency_reports",
        "test",
    )
    assert not bad.success and bad.failures[0]["examples"] == ["maybe"]
