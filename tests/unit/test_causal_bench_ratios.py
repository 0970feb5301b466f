"""The causal benchmark's headline: round-by-round ratios, so that a disturbed round moves one
ratio, not the verdict."""

from __future__ import annotations

import pytest

from recovery_lib.bench.causal_bench import paired_ratios


def test_each_round_is_judged_against_its_own_off_run_and_the_median_is_the_headline():
    rates = {
        "off": [100.0, 50.0, 100.0],  # round 1: the machine was busy for both variants
        "kafka": [95.0, 47.5, 80.0],
        "output": [100.0, 50.0, 100.0],
    }
    out = paired_ratios(rates)
    assert out["round_ratios"]["kafka"] == [0.95, 0.95, 0.8]
    assert out["on_over_off"] == {"kafka": 0.95, "output": 1.0}
    assert out["time_over_off"]["kafka"] == pytest.approx(1 / 0.95, abs=1e-3)
    # The medians of unpaired runs would have said 0.8 (80 / 100): the pairing is the point.
    assert out["on_over_off"]["kafka"] != round(80.0 / 100.0, 3)
