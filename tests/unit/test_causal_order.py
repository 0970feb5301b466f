"""Deterministic record order: the ordered wrapper makes a non-commutative stateful function
independent of the order and framing in which a key's rows arrive."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.lastbids import last_auctions
from recovery_lib.causal.order import ordered


class State:  # the GroupState surface last_auctions uses
    def __init__(self) -> None:
        self.value = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self):
        return self.value

    def update(self, value) -> None:
        self.value = value


ROWS = pd.DataFrame(
    {
        "bidder": [7] * 12,
        "auction": list(range(1000, 1012)),
        "topic": ["bids"] * 12,
        "partition": [i % 2 for i in range(12)],
        "offset": [i // 2 for i in range(12)],
        "ingest_ms": list(range(12)),
    }
)


def run(fn, permutation: list[int], cuts: list[int]) -> str:
    shuffled = ROWS.iloc[permutation].reset_index(drop=True)
    bounds = sorted({0, *cuts, len(shuffled)})
    frames = [shuffled.iloc[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    (out,) = list(fn((7,), iter(frames), State()))
    return out["last_auctions"].iloc[0]


@settings(max_examples=60, deadline=None)
@given(st.permutations(list(range(12))), st.lists(st.integers(1, 11), max_size=4))
def test_ordered_output_does_not_depend_on_arrival_order_or_framing(permutation, cuts):
    assert run(ordered(last_auctions), permutation, cuts) == run(
        ordered(last_auctions), list(range(12)), []
    )


def test_without_ordering_arrival_order_changes_the_output():
    forward = run(last_auctions, list(range(12)), [])
    backward = run(last_auctions, list(reversed(range(12))), [])
    assert forward != backward


def test_missing_lineage_columns_are_named():
    with pytest.raises(ValueError, match="lineage columns"):
        list(ordered(last_auctions)((7,), iter([ROWS.drop(columns=["offset"])]), State()))
