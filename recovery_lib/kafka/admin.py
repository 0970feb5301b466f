"""Topic administration: create (idempotent), delete, list, describe partitions."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from recovery_lib.kafka.clients import check_reachable, client_config
from recovery_lib.kafka.exceptions import KafkaLayerError, TopicMissing
from recovery_lib.settings import Settings, get_settings


class TopicAdmin:
    def __init__(
        self, config: Mapping[str, str] | None = None, settings: Settings | None = None
    ) -> None:
        """``config``: the client config (default: the settings' broker and security);
        ``settings``: the caller's (default: the process's), for the config and the waits."""
        settings = settings or get_settings()
        self.config = dict(config) if config is not None else client_config(settings=settings)
        self.timeout_s = settings.kafka_request_timeout_s
        self.topic_wait_s = settings.topic_wait_timeout_s
        check_reachable(self.config, self.timeout_s)
        self.admin = AdminClient(self.config)

    def create(
        self,
        name: str,
        partitions: int = 1,
        replication: int = -1,
        config: Mapping[str, str] | None = None,
    ) -> bool:
        """Create a topic; returns False when it already exists (idempotent). ``replication``
        -1: the broker's default (3 in the project's Kafka cluster, 1 on a single node);
        ``config``: topic settings (e.g. message.timestamp.type)."""
        topic = NewTopic(name, partitions, replication, config=dict(config or {}))
        futures = self.admin.create_topics([topic], request_timeout=self.timeout_s)
        try:
            futures[name].result(timeout=self.timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            raise
        self.wait_for([name])
        return True

    def delete(self, name: str) -> bool:
        futures = self.admin.delete_topics([name], request_timeout=self.timeout_s)
        try:
            futures[name].result(timeout=self.timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return False
            raise
        self.wait_gone([name])
        return True

    def wait_gone(self, names: Iterable[str], timeout_s: float | None = None) -> None:
        """Return once no topic of ``names`` is in the metadata (Apache Kafka deletes in the
        background: a topic created again too early would still hold the old records)."""
        deadline = time.monotonic() + (timeout_s or self.topic_wait_s)
        left = set(names)
        while left:
            topics = self.admin.list_topics(timeout=self.timeout_s).topics
            left = {n for n in left if n in topics}
            if left and time.monotonic() >= deadline:
                raise KafkaLayerError(
                    f"topics {sorted(left)} still exist after a wait for their deletion; the "
                    "broker may be overloaded (RECOVERY_TOPIC_WAIT_TIMEOUT_S waits longer)"
                )
            if left:
                time.sleep(0.1)

    def list(self) -> list[str]:
        topics = self.admin.list_topics(timeout=self.timeout_s).topics
        return sorted(t for t in topics if not t.startswith("__"))

    def partitions(self, name: str) -> list[int]:
        # A metadata request naming the topic could auto-create it; list all instead.
        meta = self.admin.list_topics(timeout=self.timeout_s).topics.get(name)
        if meta is None or meta.error is not None or not meta.partitions:
            raise TopicMissing(
                f"topic {name!r} does not exist on {self.config['bootstrap.servers']}; create it "
                f"with `recovery topics create {name} --partitions N`"
            )
        return sorted(meta.partitions)

    def wait_for(
        self, names: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, list[int]]:
        """Partitions of each topic, waiting up to ``timeout_s`` for them to appear."""
        deadline = time.monotonic() + (timeout_s or self.topic_wait_s)
        result: dict[str, list[int]] = {}
        for name in names:
            while True:
                try:
                    result[name] = self.partitions(name)
                    break
                except TopicMissing:
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.1)
        return result


def delete_records_below(
    before: Mapping[str, Mapping[str, int]], kafka: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Kafka DeleteRecords: every partition of ``before`` ({topic: {partition: offset}}) loses
    its records below the offset; per partition, what happened (a broker may refuse)."""
    admin = AdminClient(dict(kafka) if kafka else client_config())
    partitions = [
        TopicPartition(topic, int(part), int(offset))
        for topic, parts in before.items()
        for part, offset in parts.items()
    ]
    outcome: dict[str, str] = {}
    try:
        futures = admin.delete_records(partitions, request_timeout=15)
        for tp, future in futures.items():
            key = f"{tp.topic}/{tp.partition}"
            try:
                future.result(timeout=20)
                outcome[key] = f"deleted below {tp.offset}"
            except Exception as exc:  # noqa: BLE001 - per partition, e.g. broker lacks it
                outcome[key] = f"refused: {exc}"
    except Exception as exc:  # noqa: BLE001
        outcome["error"] = f"DeleteRecords failed: {exc}"
    return outcome
