"""The NexMark generator: deterministic, Beam's proportions, a skew knob that concentrates bids."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.generator import AUCTION, BID, PERSON, NexmarkGenerator
from recovery_lib.nexmark.producer import produce_events
from recovery_lib.nexmark.queries import get_query


def encoded(config: GeneratorConfig, start: int, count: int, block: int) -> list[tuple]:
    gen = NexmarkGenerator(config)
    rows: list[tuple] = []
    for s in range(start, start + count, block):
        rows.extend(gen.encode(gen.block(s, min(block, start + count - s))))
    return rows


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 10_000), st.integers(1, 700), st.integers(1, 3000))
def test_same_seed_and_ids_give_identical_bytes_whatever_the_block_size(seed, start, block, count):
    config = GeneratorConfig(seed=seed)
    assert encoded(config, start, count, block) == encoded(config, start, count, 997)


def test_different_seeds_give_different_events():
    a = encoded(GeneratorConfig(seed=1), 0, 2000, 500)
    b = encoded(GeneratorConfig(seed=2), 0, 2000, 500)
    assert [r[1] for r in a] == [r[1] for r in b]  # kinds are structural
    assert sum(x[3] != y[3] for x, y in zip(a, b, strict=True)) > 1500


def test_proportions_are_1_3_46_by_event_id():
    kinds = Counter(row[1] for row in encoded(GeneratorConfig(), 0, 50_000, 10_000))
    assert (kinds[PERSON], kinds[AUCTION], kinds[BID]) == (1000, 3000, 46_000)


def test_ids_start_at_1000_and_persons_auctions_are_sequential():
    gen = NexmarkGenerator(GeneratorConfig())
    block = gen.block(0, 5000)
    assert block.persons["id"].tolist() == list(range(1000, 1000 + len(block.persons["id"])))
    assert block.auctions["id"].tolist() == list(range(1000, 1000 + len(block.auctions["id"])))
    # bids only name auctions that exist or are at most AUCTION_ID_LEAD ahead
    assert block.bids["auction"].min() >= 1000
    assert (block.bids["auction"] <= block.auctions["id"].max() + 10).all()


def top_auction_share(skew: float) -> float:
    bids = NexmarkGenerator(GeneratorConfig(hot_ratio=skew)).block(0, 200_000).bids["auction"]
    counts = Counter(bids.tolist())
    return counts.most_common(1)[0][1] / len(bids)


def test_hot_ratio_concentrates_bids_on_hot_auctions():
    uniform, beam, skewed = top_auction_share(0.0), top_auction_share(0.5), top_auction_share(0.9)
    assert uniform < 0.01
    assert skewed > beam > 5 * uniform


def test_delayed_events_are_occasional_and_bounded():
    config = GeneratorConfig(event_time_rate=1000, delay_probability=0.01, max_delay_ms=2000)
    block = NexmarkGenerator(config).block(0, 100_000)
    on_time = config.base_time_ms + block.event_ids
    late = on_time - block.event_time_ms
    assert 0.005 < (late > 0).mean() < 0.02
    assert late.max() < 2000 and late.min() >= 0


@pytest.mark.parametrize("skew", [-0.1, 1.5])
def test_skew_outside_unit_interval_is_a_clear_error(skew):
    with pytest.raises(ValidationError, match=r"within \[0, 1\]"):
        GeneratorConfig(hot_ratio=skew)


def test_negative_rate_is_a_clear_error():
    with pytest.raises(ValueError, match="rate must be a positive"):
        produce_events(GeneratorConfig(), count=10, rate=-5)


def test_unknown_query_name_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown NexMark query 'q99'; choose one of q1"):
        get_query("q99")
