"""Generator configuration, after Beam's NexMark GeneratorConfig.

Proportions person:auction:bid = 1:3:46 by event id; ids start at 1000; 100 auctions in
flight; 1000 active people. Beam's hot ratios (2 for auctions, 4 for sellers and bidders, so
1/2 and 3/4 of choices hit a hot item) become one skew knob, ``hot_ratio`` in [0, 1]: the
probability that a bid goes to a hot auction and comes from a hot bidder, and that an auction
comes from a hot seller (CheckMate's hot-item ratio). 0 is uniform; Beam's auctions are 0.5.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator

PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
BID_PROPORTION = 46
TOTAL_PROPORTION = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
# A hot item stands for each group of this many consecutive ids (Beam's HOT_*_RATIO = 100).
HOT_GROUP = 100

DEFAULT_BASE_TIME_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: event times are synthetic


class GeneratorConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    seed: int = 42
    hot_ratio: float = 0.5
    # Logical event rate: spacing of event times (ms between consecutive events = 1000 / rate).
    event_time_rate: float = 10_000.0
    base_time_ms: int = DEFAULT_BASE_TIME_MS
    num_in_flight_auctions: int = 100
    num_active_people: int = 1000
    # Occasional delayed events: this fraction of events carries an event time up to
    # max_delay_ms in the past (late, but within the queries' watermark delay).
    delay_probability: float = 0.001
    max_delay_ms: int = 2_000
    topic_prefix: str = "nexmark"
    partitions: int = 4

    @field_validator("hot_ratio")
    @classmethod
    def _skew(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError(
                f"skew (hot ratio) must be within [0, 1], got {value}; 0 = uniform, "
                "0.5 = Beam's default, 0.9 = strongly skewed"
            )
        return value

    @field_validator("event_time_rate")
    @classmethod
    def _rate(cls, value: float) -> float:
        if value <= 0:
            raise ValueError(f"event_time_rate must be positive, got {value}")
        return value

    @field_validator("delay_probability")
    @classmethod
    def _prob(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"delay_probability must be within [0, 1], got {value}")
        return value

    @field_validator("partitions", "num_in_flight_auctions", "num_active_people")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be at least 1, got {value}")
        return value

    @property
    def persons_topic(self) -> str:
        return f"{self.topic_prefix}.persons"

    @property
    def auctions_topic(self) -> str:
        return f"{self.topic_prefix}.auctions"

    @property
    def bids_topic(self) -> str:
        return f"{self.topic_prefix}.bids"

    @property
    def topics(self) -> list[str]:
        return [self.persons_topic, self.auctions_topic, self.bids_topic]
