"""Write generated NexMark events to their topics, paced (events/s) or as fast as possible."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

from recovery_lib.errors import ConfigurationError
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.generator import AUCTION, BID, PERSON, NexmarkGenerator
from recovery_lib.runtime.pacing import Pacer

UNPACED_BLOCK = 20_000


@dataclass
class ProduceStats:
    first_event_id: int
    events: int
    persons: int
    auctions: int
    bids: int
    elapsed_s: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.elapsed_s if self.elapsed_s > 0 else 0.0


def ensure_topics(config: GeneratorConfig, admin: TopicAdmin | None = None) -> None:
    admin = admin or TopicAdmin()
    for topic in config.topics:
        admin.create(topic, config.partitions)


def produce_events(
    config: GeneratorConfig,
    count: int | None = None,
    duration_s: float | None = None,
    rate: float | None = None,
    first_event_id: int = 0,
    on_progress: Callable[[int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    producer: Any = None,
) -> ProduceStats:
    """Produce ``count`` events, or events for ``duration_s`` seconds at ``rate`` events/s.

    Unpaced when ``rate`` is None. The Kafka record timestamp of each event is its ingest time.
    """
    if rate is not None and rate <= 0:
        raise ConfigurationError(f"rate must be a positive number of events per second, got {rate}")
    if count is None:
        if duration_s is None or rate is None:
            raise ConfigurationError("give a count of events, or a duration together with a rate")
        if duration_s <= 0:
            raise ConfigurationError(f"duration must be positive, got {duration_s}")
        count = int(duration_s * rate)
    if count < 0:
        raise ConfigurationError(f"count must be >= 0, got {count}")
    generator = NexmarkGenerator(config)
    topics = {PERSON: config.persons_topic, AUCTION: config.auctions_topic, BID: config.bids_topic}
    own_producer = producer is None
    if own_producer:
        producer = Producer(
            {
                **client_config(),
                "linger.ms": "5",
                "batch.num.messages": "10000",
                "queue.buffering.max.messages": "1000000",
                "enable.idempotence": "true",
            }
        )
    by_kind = {PERSON: 0, AUCTION: 0, BID: 0}
    started = time.perf_counter()
    pacer = Pacer(rate)
    block = UNPACED_BLOCK if rate is None else max(1, int(rate / 50))  # paced: 20 ms slices
    done = 0
    produce = producer.produce
    while done < count and not (stop and stop()):
        n = min(block, count - done)
        for _eid, kind, key, value, partition in generator.encode(
            generator.block(first_event_id + done, n)
        ):
            while True:
                try:
                    produce(topics[kind], value, key, partition)
                    break
                except BufferError:
                    producer.poll(0.01)
            by_kind[kind] += 1
        done += n
        producer.poll(0)
        if on_progress:
            on_progress(done)
        pacer.wait(done)
    remaining = producer.flush(120)
    if remaining:
        raise RecordsNotAcknowledged(
            f"{remaining} events were not acknowledged by the broker; check the broker is up"
        )
    return ProduceStats(
        first_event_id,
        done,
        by_kind[PERSON],
        by_kind[AUCTION],
        by_kind[BID],
        time.perf_counter() - started,
    )
