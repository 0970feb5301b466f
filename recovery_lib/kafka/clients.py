"""Client configuration shared by every producer, consumer and admin client we create."""

from __future__ import annotations

from collections.abc import Mapping

from recovery_lib.kafka.broker import running_state
from recovery_lib.kafka.exceptions import BrokerUnreachable, NoBrokerConfigured
from recovery_lib.settings import Settings, get_settings

# Short group timeouts: tansu takes ~20 s per join with librdkafka defaults, ~3 s with these.
GROUP_TIMEOUTS = {"session.timeout.ms": "6000", "max.poll.interval.ms": "10000"}
# Consumers that read whole offset ranges: ~100 B records make the 1 MB default fetch a round
# trip per 10k records. A reused consumer's next range waits for the fetch the broker holds at
# the last one's end (fetch.wait.max.ms, 500 by default): measured on tansu, the first record
# of a new range came after ~450 ms, after ~30 ms with 10 (every source task paid it).
# But tansu answers a fetch with what it gathered within the wait, and gathering older records
# of a topic written in many small batches can take longer: a 2-hour soak's job then got
# nothing at all with 10 ms (30 ms worked). Readers fall back to SLOW_FETCHES when a short
# wait brings nothing for a while (io/range_reader.py).
RANGE_FETCHES = {
    "max.partition.fetch.bytes": str(8 << 20),
    "fetch.max.bytes": str(64 << 20),
    "fetch.wait.max.ms": "10",
}
SLOW_FETCHES = {**RANGE_FETCHES, "fetch.wait.max.ms": "500"}
# Readers of whole topics (the oracle): librdkafka keeps fetching ahead until a million
# messages wait (about 450 MB at 150 B each); its default of 100,000 makes a reader of millions
# of records wait on fetches (measured on tansu: 2M records in 1.5 s instead of 9.8 s).
BULK_READS = {**RANGE_FETCHES, "queued.min.messages": "1000000"}
SLOW_BULK_READS = {**BULK_READS, **SLOW_FETCHES}
# Without a record for settings.kafka_slow_fetch_after_s under the short fetch wait, readers
# switch to the slow one.


def resolve_bootstrap(settings: Settings | None = None) -> str:
    """``KAFKA_BOOTSTRAP`` if set, else the running embedded broker."""
    settings = settings or get_settings()
    if settings.kafka_bootstrap:
        return settings.kafka_bootstrap

    state = running_state(settings)
    if state is None:
        raise NoBrokerConfigured(
            "no Kafka broker: start the embedded one with `recovery broker start`, "
            "or set KAFKA_BOOTSTRAP=host:port to use an external cluster"
        )
    return state.bootstrap


def client_config(
    bootstrap: str | None = None,
    extra: Mapping[str, str] | None = None,
    settings: Settings | None = None,
) -> dict[str, str]:
    """Base librdkafka config: bootstrap + pass-through (SASL/TLS) + call-site extras."""
    settings = settings or get_settings()
    config: dict[str, str] = {"bootstrap.servers": bootstrap or resolve_bootstrap(settings)}
    config.update(settings.kafka_client_config())
    if extra:
        config.update({k: str(v) for k, v in extra.items()})
    return config


def check_reachable(config: Mapping[str, str], timeout_s: float) -> None:
    """Fail fast, with the fix in the message, when no broker answers."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(dict(config))
    try:
        admin.list_topics(timeout=timeout_s)
    except Exception as exc:
        raise BrokerUnreachable(
            f"Kafka broker at {config.get('bootstrap.servers')} did not answer within "
            f"{timeout_s:.0f} s ({exc}); start it with `recovery broker start` or fix "
            "KAFKA_BOOTSTRAP / the kafka.bootstrap.servers option"
        ) from exc
