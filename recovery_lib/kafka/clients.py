"""Client configuration shared by every producer, consumer and admin client we create.

A config holds secrets (``sasl.password`` ...): show one only through ``redacted``, and an
error text that may quote one through ``scrubbed``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from recovery_lib.kafka.broker import running_state
from recovery_lib.kafka.exceptions import (
    BrokerAuthenticationFailed,
    BrokerTlsFailed,
    BrokerUnreachable,
    NoBrokerConfigured,
)
from recovery_lib.settings import Settings, get_settings

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

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

    protocol = settings.kafka_client_config().get("security.protocol", "PLAINTEXT")
    if protocol.upper() != "PLAINTEXT":
        # The embedded broker's address is its PLAINTEXT listener: a TLS or SASL client there
        # would only fail its handshake.
        raise NoBrokerConfigured(
            f"the client security protocol is {protocol} but KAFKA_BOOTSTRAP is unset: set it "
            "to the secured cluster's listener (host:port,...), or unset "
            "RECOVERY_KAFKA_SECURITY_PROTOCOL to use the embedded broker"
        )
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


# The JAAS login module of each SASL mechanism, for Java clients (Spark's Kafka connector).
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def spark_kafka_options(config: Mapping[str, str]) -> dict[str, str]:
    """A librdkafka client config as Spark's Kafka connector (a Java client) takes it:
    ``kafka.``-prefixed options for the broker, the security protocol, SASL (a JAAS line from
    the user and password) and TLS (the CA file as a PEM trust store).

    Args:
        config: The project's client config (``client_config``).

    Returns:
        The options; ``kafka.security.protocol`` always (a team's own is replaced).
    """
    out = {
        "kafka.bootstrap.servers": config["bootstrap.servers"],
        "kafka.security.protocol": config.get("security.protocol", "PLAINTEXT").upper(),
    }
    mechanism = config.get("sasl.mechanism") or config.get("sasl.mechanisms")
    if mechanism:
        out["kafka.sasl.mechanism"] = mechanism.upper()
        module = _JAAS_MODULES.get(mechanism.upper())
        if module is not None and "sasl.username" in config:
            user = config["sasl.username"].replace('"', '\\"')
            password = config.get("sasl.password", "").replace('"', '\\"')
            out["kafka.sasl.jaas.config"] = (
                f'{module} required username="{user}" password="{password}";'
            )
    if config.get("ssl.ca.location"):
        out["kafka.ssl.truststore.type"] = "PEM"
        out["kafka.ssl.truststore.location"] = config["ssl.ca.location"]
    if config.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        out["kafka.ssl.endpoint.identification.algorithm"] = ""
    return out


# librdkafka properties whose values are secrets, also as ``kafka.<property>`` source and
# sink options: passwords (sasl, ssl key and stores), OAuth client secrets and configs, inline
# private keys and JAAS configs.
SECRET_PROPERTY = re.compile(
    r"password|secret|(^|\.)ssl\.key\.pem$|(^|\.)ssl_key$|oauthbearer\.config$|jaas\.config$",
    re.IGNORECASE,
)
REDACTED = "***"
# How often check_reachable looks at librdkafka's errors while it waits for an answer.
_REFUSAL_POLL_S = 0.25


def is_secret(name: str) -> bool:
    """Whether the client property (or ``kafka.<property>`` option) ``name`` holds a secret."""
    return bool(SECRET_PROPERTY.search(name))


def redacted(config: Mapping[str, object]) -> dict[str, object]:
    """``config`` with every secret's value replaced by ``***``: what a log line, a report or
    an error message may show of a client config or of source / sink options."""
    return {k: REDACTED if is_secret(str(k)) and v else v for k, v in config.items()}


def scrubbed(text: str, config: Mapping[str, object]) -> str:
    """``text`` (e.g. a client error's message) with every secret value of ``config`` in it
    replaced by ``***``."""
    for name, value in config.items():
        if is_secret(str(name)) and isinstance(value, str) and value:
            text = text.replace(value, REDACTED)
    return text


def check_reachable(config: Mapping[str, str], timeout_s: float) -> None:
    """Fail fast, with the fix in the message, when no broker answers or it refuses this
    client. A refused SASL login (``BrokerAuthenticationFailed``) or TLS handshake
    (``BrokerTlsFailed``) is raised as soon as librdkafka reports it to the error callback,
    within a second or so, not after ``timeout_s``: no retry can mend either."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    refusals: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:  # served by admin.poll below
        # A handshake cut by a broker going down is a disconnect, not a refusal: waited out.
        cut = error.code() == KafkaError._SSL and "disconnected" in error.str().lower()
        if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) and not cut:
            refusals.append(error)

    admin = AdminClient({**config, "error_cb": on_error})
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while True:
        try:
            admin.list_topics(timeout=max(0.05, min(_REFUSAL_POLL_S, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            last = exc
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError._AUTHENTICATION:
                refusals.append(error)
        admin.poll(0)
        if refusals or time.monotonic() >= deadline:
            break
    # Not kept alive by the raised error's frames: a client retrying a refused login (or a
    # dead port) would go on logging its failures.
    del admin
    if refusals:
        raise _refused(config, refusals[0]) from None
    raise BrokerUnreachable(
        f"Kafka broker at {config.get('bootstrap.servers')} did not answer within "
        f"{timeout_s:.0f} s ({scrubbed(str(last), config)}); start it with `recovery broker "
        "start` or fix KAFKA_BOOTSTRAP / the kafka.bootstrap.servers option"
    ) from None


def _refused(config: Mapping[str, str], error: KafkaError) -> Exception:
    """The error for a broker that refused this client, saying which setting to fix (and never
    a secret of ``config``)."""
    from confluent_kafka import KafkaError

    bootstrap = config.get("bootstrap.servers")
    said = scrubbed(error.str(), config)
    if error.code() == KafkaError._SSL:
        return BrokerTlsFailed(
            f"the TLS handshake with the Kafka broker at {bootstrap} failed ({said}); check "
            "RECOVERY_KAFKA_SSL_CA_LOCATION (the CA that signed the brokers' certificates), "
            "RECOVERY_KAFKA_SECURITY_PROTOCOL and that KAFKA_BOOTSTRAP names the TLS listener"
        )
    user = config.get("sasl.username")
    return BrokerAuthenticationFailed(
        f"the Kafka broker at {bootstrap} refused the SASL login of user {user!r} "
        f"({config.get('sasl.mechanism') or config.get('sasl.mechanisms')}): {said}. Fix "
        "RECOVERY_KAFKA_SASL_USERNAME / RECOVERY_KAFKA_SASL_PASSWORD (or "
        "RECOVERY_KAFKA_SASL_MECHANISM)"
    )
