"""What differs between leader-based (KaZoo) and leaderless (LiveRobin) active replication,
as two strategy objects; ``ReplicaSet`` keeps the supervision both share.

A strategy says how a replica cuts its batches (its source options), what its sink checks
before writing (its sink options), what runs beside the replicas (LiveRobin's heartbeat
generator), which replica a failure may be aimed at, and who stands for the set.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from recovery_lib.errors import ConfigurationError
from recovery_lib.ha.replication.heartbeats import HeartbeatGenerator
from recovery_lib.ha.replication.kazoo import KAZOO_GUARD, KAZOO_POLICY, role_path
from recovery_lib.ha.replication.liverobin import LIVEROBIN_POLICY
from recovery_lib.io.offsets import Offsets
from recovery_lib.runtime.checkpoint import committed_offsets, last_committed
from recovery_lib.settings import Settings

REPLICAS = ("a", "b")


def order_topic(output_topic: str) -> str:
    return f"{output_topic}.order"


def heartbeat_index_topic(output_topic: str) -> str:
    return f"{output_topic}.heartbeats"


class ReplicaView(Protocol):
    """What a strategy sees of its replica set."""

    home: Path
    output_topic: str
    input_topics: list[str]
    kafka: dict[str, str]
    heartbeat_period_s: float
    slow_delay_s: float
    settings: Settings
    generator_errors: list[str]

    def checkpoint(self, replica: str) -> Path: ...

    def live(self) -> list[str]: ...

    def in_step(self) -> list[str]: ...

    def event(self, kind: str, detail: dict[str, Any], ts_ms: int | None = None) -> None: ...

    def thread(self, target: Callable[..., Any], name: str, *args: Any) -> None: ...


def replica_roles(home: Path) -> dict[str, dict[str, Any]]:
    """Each replica's last decision (KaZoo: role, epoch, batch); {} before the first."""
    out: dict[str, dict[str, Any]] = {}
    for replica in REPLICAS:
        try:
            out[replica] = json.loads(role_path(home / "replicas", replica).read_text())
        except (OSError, ValueError):
            out[replica] = {}
    return out


def most_committed(view: ReplicaView) -> str:
    return max(view.live(), key=lambda r: last_committed(view.checkpoint(r)) or -1)


class ReplicationStrategy(Protocol):
    name: str
    title: str
    victims: tuple[str, ...]  # which replica a failure may be aimed at
    default_victim: str

    def control_topic(self, output_topic: str) -> str: ...

    def source_options(self, view: ReplicaView, replica: str) -> dict[str, str]: ...

    def sink_options(self, view: ReplicaView, replica: str) -> dict[str, str]: ...

    def start(self, view: ReplicaView) -> None: ...

    def tick(self, view: ReplicaView) -> None: ...

    def stop(self) -> None: ...

    def leader(self, view: ReplicaView) -> str | None: ...

    def front(self, view: ReplicaView) -> str: ...

    def role(self, roles: dict[str, Any]) -> tuple[str | None, int | None]: ...

    @property
    def heartbeats(self) -> int | None: ...

    @property
    def leader_takeovers(self) -> list[dict[str, Any]]: ...


class LeaderBased:
    """KaZoo: the leader cuts, publishes each batch's cut to the order log (``<output>.order``)
    and the follower runs the same batches; each replica's sink writes batch b only as the
    leader published it. A follower takes the lead when the leader's lease expires."""

    name = "kazoo"
    title = "KaZoo"
    victims = ("leader", "follower", *REPLICAS)
    default_victim = "leader"

    def __init__(self) -> None:
        self.leader_takeovers: list[dict[str, Any]] = []
        self._seen: set[tuple[str, int]] = set()

    def control_topic(self, output_topic: str) -> str:
        return order_topic(output_topic)

    def source_options(self, view: ReplicaView, replica: str) -> dict[str, str]:
        return {
            "cutPolicy": KAZOO_POLICY,
            "replicaId": replica,
            "epochStore": str(view.home / "epochs"),
            "leaseDir": str(view.home / "replicas"),
            "replicaCheckpoint": str(view.checkpoint(replica)),
            "orderTopic": order_topic(view.output_topic),
        }

    def sink_options(self, view: ReplicaView, replica: str) -> dict[str, str]:
        return {
            "writeGuard": KAZOO_GUARD,
            "replicaCheckpoint": str(view.checkpoint(replica)),
            "orderTopic": order_topic(view.output_topic),
        }

    def start(self, view: ReplicaView) -> None:
        return None

    def tick(self, view: ReplicaView) -> None:
        """Record the leader takeovers the replicas' cut policies decided."""
        for replica, role in replica_roles(view.home).items():
            for taken in role.get("takeovers", []):
                key = (replica, int(taken.get("epoch", 0)))
                if key in self._seen:
                    continue
                self._seen.add(key)
                if taken.get("cause") == "no leader yet":
                    continue  # the first election, not a fail-over
                record = {"kind": "leader", "replica": replica, **taken}
                self.leader_takeovers.append(record)
                view.event("leader_takeover", record, taken.get("ts_ms"))

    def stop(self) -> None:
        return None

    def leader(self, view: ReplicaView) -> str | None:
        """The current leader among the live replicas (None before the first election)."""
        roles = replica_roles(view.home)
        leaders = [r for r in view.live() if roles.get(r, {}).get("role") == "leader"]
        if not leaders:
            return None
        return max(leaders, key=lambda r: int(roles[r].get("epoch", 0)))

    def front(self, view: ReplicaView) -> str:
        return self.leader(view) or most_committed(view)

    def role(self, roles: dict[str, Any]) -> tuple[str | None, int | None]:
        return roles.get("role"), roles.get("epoch")

    @property
    def heartbeats(self) -> int | None:
        return None


class Leaderless:
    """LiveRobin: no leader; a heartbeat generator (this process) writes every input's
    positions to ``<output>.heartbeats`` every period, and both replicas cut each batch at
    the same heartbeat."""

    name = "liverobin"
    title = "LiveRobin"
    victims = REPLICAS
    default_victim = REPLICAS[0]

    def __init__(self) -> None:
        self.generator: Any = None
        self.beats_written = 0  # heartbeats of generators already stopped
        self.leader_takeovers: list[dict[str, Any]] = []  # never any: no leader

    def control_topic(self, output_topic: str) -> str:
        return heartbeat_index_topic(output_topic)

    def source_options(self, view: ReplicaView, replica: str) -> dict[str, str]:
        return {
            "cutPolicy": LIVEROBIN_POLICY,
            "heartbeatIndex": heartbeat_index_topic(view.output_topic),
        }

    def sink_options(self, view: ReplicaView, replica: str) -> dict[str, str]:
        return {}

    def start(self, view: ReplicaView) -> None:
        if not view.input_topics:
            raise ConfigurationError(
                "LiveRobin's heartbeats need the job's input topics: pass input_topics to the "
                "replica set"
            )
        self.generator = HeartbeatGenerator(
            view.input_topics,
            heartbeat_index_topic(view.output_topic),
            view.heartbeat_period_s,
            view.kafka,
            slow=(view.input_topics[0], 0) if view.slow_delay_s else None,
            slow_delay_s=view.slow_delay_s,
            settings=view.settings,
        )

        def failed(exc: Exception) -> None:
            view.generator_errors.append(str(exc))

        def committed() -> list[Offsets | None]:  # of the replicas that must keep up
            return [committed_offsets(view.checkpoint(r)) or None for r in view.in_step()]

        view.thread(self.generator.run, "heartbeats", failed, committed)

    def tick(self, view: ReplicaView) -> None:
        return None

    def stop(self) -> None:
        if self.generator is not None:
            self.generator.close()
            self.beats_written += self.generator.beats  # what the stopped generator wrote
            self.generator = None

    def leader(self, view: ReplicaView) -> str | None:
        return None

    def front(self, view: ReplicaView) -> str:
        return most_committed(view)

    def role(self, roles: dict[str, Any]) -> tuple[str | None, int | None]:
        return None, None

    @property
    def heartbeats(self) -> int | None:
        return self.generator.beats if self.generator is not None else None


STRATEGIES: dict[str, Callable[[], ReplicationStrategy]] = {
    LeaderBased.name: LeaderBased,
    Leaderless.name: Leaderless,
}


def replication_strategy(name: str) -> ReplicationStrategy:
    try:
        return STRATEGIES[name]()
    except KeyError:
        raise ConfigurationError(
            f"replication {name!r}: choose one of {', '.join(STRATEGIES)}"
        ) from None
