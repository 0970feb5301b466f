"""What a Kafka-protocol broker can do, found out by trying it (not by its name).

``hides_aborted_records``: a transaction is aborted and another committed on a probe topic; a
read_committed consumer must see the committed record and not the aborted one. Apache Kafka
does; the embedded tansu does not (../shared/DESIGN.md section 5), so the Kafka-transactional
sink is only correct, and only tested, where this says True.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from recovery_lib.errors import ConfigurationError
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config

PROBE_TOPIC = "recovery.probe.transactions"


def require_hidden_aborts(config: Mapping[str, str], who: str, instead: str) -> None:
    """Refuse (``who``: what asked) unless the broker of ``config`` hides aborted records;
    ``instead``: the sink modes to choose otherwise."""
    if not hides_aborted_records(config):
        raise ConfigurationError(
            f"{who}: the broker at {config.get('bootstrap.servers')} shows aborted "
            "transactional records to read_committed consumers (the embedded tansu does), so a "
            "consumer would read outputs twice. Run on Apache Kafka (the default broker; unset "
            f"RECOVERY_BROKER_KIND=tansu), or choose {instead}"
        )


def hides_aborted_records(config: Mapping[str, str] | None = None, timeout_s: float = 20) -> bool:
    config = dict(config) if config is not None else client_config()
    TopicAdmin(config).create(PROBE_TOPIC, 1)
    token = uuid.uuid4().hex
    try:
        producer = Producer({**config, "transactional.id": f"recovery-probe-{token}"})
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
        producer.produce(PROBE_TOPIC, f"aborted-{token}".encode(), partition=0)
        producer.flush(timeout_s)
        producer.abort_transaction(timeout_s)
        producer.begin_transaction()
        producer.produce(PROBE_TOPIC, f"committed-{token}".encode(), partition=0)
        producer.commit_transaction(timeout_s)
    except KafkaException:
        return False  # no transactions at all
    consumer = Consumer(
        {
            **config,
            "group.id": f"recovery-probe-{token}",
            "isolation.level": "read_committed",
            "enable.auto.commit": "false",
        }
    )
    try:
        consumer.assign([TopicPartition(PROBE_TOPIC, 0, 0)])
        deadline = time.monotonic() + timeout_s
        saw_aborted = False
        while time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=1.0):
                if msg.error() is not None:
                    continue
                value = msg.value() or b""
                if value == f"aborted-{token}".encode():
                    saw_aborted = True
                elif value == f"committed-{token}".encode():
                    return not saw_aborted
        return False  # the committed record never came: not usable either
    finally:
        consumer.close()
