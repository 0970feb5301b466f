"""What a benchmark ran on, for its report: the machine and the broker it measured against."""

from __future__ import annotations

from recovery_lib.kafka.apache import KAFKA_VERSION
from recovery_lib.kafka.broker import running_state
from recovery_lib.settings import Settings, get_settings


def broker_description(settings: Settings | None = None) -> str:
    """``embedded Apache Kafka 4.4.0 (1 node)``, ``embedded tansu`` or ``the cluster at
    KAFKA_BOOTSTRAP``: results differ by broker (docs/io.md), so every report says which."""
    settings = settings or get_settings()
    state = running_state(settings)
    if settings.kafka_bootstrap and (state is None or state.bootstrap != settings.kafka_bootstrap):
        return "the Kafka cluster at KAFKA_BOOTSTRAP"
    kind = state.kind if state is not None else settings.broker_kind
    if kind == "tansu":
        return "embedded tansu broker"
    nodes = len(state.nodes) if state is not None else 1
    return f"embedded Apache Kafka {KAFKA_VERSION} ({nodes} node{'s' if nodes > 1 else ''})"
