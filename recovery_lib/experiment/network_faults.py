"""Failures of the network and the broker, injected on the experiment's faulty network
(chaos/network.py: a private broker behind the fault proxy, which every client of the run goes
through): ``net-reset`` (a connection reset after the broker got a produce or a fetch, before
its answer), ``net-blackhole`` (every byte dropped for N s), ``net-latency`` (added latency and
jitter for N s), ``broker-pause`` (the broker SIGSTOPped for N s, then SIGCONTed) and
``broker-restart`` (the broker SIGKILLed, started again on its log dir N s later: on Apache
Kafka nothing acknowledged is lost; on tansu everything is, and the job refuses to go on).
``broker-kill`` runs the experiment on a private three-node Kafka cluster instead
(chaos/cluster.py, no proxy): the node that leads the most of the job's input and output
partitions is SIGKILLed, the cluster elects new leaders, and the node starts again N s later.

A reset is armed like a hook: it fires when the next request of its api comes, or never (then
the verdict is inconclusive). The others fire when injected; what they did (frames dropped,
connections broken) is in the report's failure entry.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery_lib.chaos.cluster import ClusterNotStarted, FaultyCluster, LeaderKill
from recovery_lib.chaos.network import BrokerRestart, FaultyNetwork
from recovery_lib.chaos.proxy import Api, BlackholeFired, FaultProxy
from recovery_lib.errors import ConfigurationError
from recovery_lib.experiment.failures import FailureStatus, InjectedFailure
from recovery_lib.settings import Settings

# Faults of the single broker behind the fault proxy, and of a three-node cluster's leader.
PROXY_KINDS = ("net-reset", "net-blackhole", "net-latency", "broker-pause", "broker-restart")
CLUSTER_KINDS = ("broker-kill",)
NETWORK_KINDS = (*PROXY_KINDS, *CLUSTER_KINDS)
RESET_APIS = {"produce": Api.PRODUCE, "fetch": Api.FETCH, "any": None}


@dataclass(frozen=True)
class NetworkFaultOptions:
    seconds: float  # how long a blackhole, added latency, broker pause or restart lasts
    latency_ms: float = 200.0
    jitter_ms: float = 50.0
    reset_api: str = "produce"  # the request whose answer a reset cuts off


def needs_network(kinds: tuple[str, ...]) -> bool:
    return any(k in NETWORK_KINDS for k in kinds)


def needs_cluster(kinds: tuple[str, ...]) -> bool:
    return any(k in CLUSTER_KINDS for k in kinds)


class NetworkFaults:
    """The faulty network (or cluster, ``cluster=True``: broker-kill) of one experiment and
    the faults injected on it."""

    def __init__(
        self,
        workdir: Path,
        options: NetworkFaultOptions,
        seed: int,
        cluster: bool = False,
        settings: Settings | None = None,
    ) -> None:
        self.options = options
        self.cluster = FaultyCluster(workdir / "cluster", settings=settings) if cluster else None
        self.network = FaultyNetwork(workdir / "broker", seed=seed, settings=settings)
        self.watched: tuple[str, ...] = ()  # the job's topics, whose leaders broker-kill hits
        self._kills: list[tuple[InjectedFailure, LeaderKill]] = []
        self._until = 0.0  # monotonic: a blackhole, latency or pause lasts until then
        self._blackholes: list[tuple[InjectedFailure, BlackholeFired]] = []
        self._restarts: list[tuple[InjectedFailure, BrokerRestart]] = []
        self._latency_off: threading.Timer | None = None

    def start(self) -> str:
        return self.cluster.start() if self.cluster is not None else self.network.start()

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap if self.cluster is not None else self.network.bootstrap

    def use(self) -> contextlib.AbstractContextManager[str]:
        """This process's settings and its children's environment on the faulty network."""
        return self.cluster.use() if self.cluster is not None else self.network.use()

    def stop(self) -> None:
        if self._latency_off is not None:
            self._latency_off.cancel()
        if self.cluster is not None:
            self.cluster.stop()
        else:
            self.network.stop()

    def watch(self, topics: tuple[str, ...]) -> None:
        """The topics of the running job: broker-kill kills their leader."""
        self.watched = topics

    @property
    def proxy(self) -> FaultProxy:
        if self.network.proxy is None:
            raise ClusterNotStarted("the faulty network is not started: start() it first")
        return self.network.proxy

    def over(self) -> bool:
        """The last fault is over: its time passed, the broker runs, no reset is pending."""
        if self.cluster is not None:  # and the killed node caught up again
            return (
                time.monotonic() >= self._until
                and not self.cluster.restarting()
                and self.cluster.in_sync(self.watched)
            )
        return (
            time.monotonic() >= self._until
            and not self.network.paused()
            and not self.network.restarting()
            and self.proxy.pending_resets == 0
        )

    def disarm(self) -> None:
        """Drop a connection reset still waiting for its request: once a run's input has
        stopped, that request may never come, and ``over`` would wait for it forever. Its
        failure stays armed, never fired."""
        if self.cluster is None:
            self.proxy.reset_next(None, 0)

    def inject(self, kind: str, failure: InjectedFailure) -> None:
        """Inject ``kind`` now; ``failure`` says whether it fired (or is armed)."""
        seconds = self.options.seconds
        if (kind in CLUSTER_KINDS) != (self.cluster is not None):
            raise ConfigurationError(
                f"{kind} needs {'a three-node cluster' if kind in CLUSTER_KINDS else 'the proxy'}"
                ": broker-kill and the proxy's faults do not mix in one run"
            )
        if kind == "broker-kill":
            assert self.cluster is not None
            self._until = time.monotonic() + seconds
            failure.pause_s = seconds
            kill = self.cluster.kill_leader(self.watched, seconds)
            self._kills.append((failure, kill))
            failure.detail = self._kill_detail(kill)
            return
        if kind == "net-reset":
            since = len(self.proxy.stats.resets)
            self.proxy.reset_next(RESET_APIS[self.options.reset_api], count=1)
            failure.status, failure.fired_ms = FailureStatus.ARMED, None
            failure.probe = lambda: self._reset_fired(since)
            failure.detail = {"api": self.options.reset_api}
            return
        self._until = time.monotonic() + seconds
        failure.pause_s = seconds
        if kind == "net-blackhole":
            self.proxy.blackhole(seconds)
            failure.detail = {"dropped_frames": 0, "reset_connections": 0}
            self._blackholes.append((failure, self.proxy.stats.blackholes[-1]))
        elif kind == "net-latency":
            self.proxy.set_latency(self.options.latency_ms / 1000, self.options.jitter_ms / 1000)
            self._latency_off = threading.Timer(seconds, self.proxy.set_latency, (0.0, 0.0))
            self._latency_off.daemon = True
            self._latency_off.start()
            failure.detail = {
                "latency_ms": self.options.latency_ms,
                "jitter_ms": self.options.jitter_ms,
            }
        elif kind == "broker-pause":
            self.network.pause_broker(seconds)
        elif kind == "broker-restart":
            restart = self.network.restart_broker(seconds)
            failure.detail = {"down_s": seconds, "restarted_ms": None, "restart_error": None}
            self._restarts.append((failure, restart))
        else:
            raise ConfigurationError(
                f"{kind!r} is not a network fault; choose one of {', '.join(NETWORK_KINDS)}"
            )

    def _reset_fired(self, since: int) -> int | None:
        resets = self.proxy.stats.resets[since:]
        return resets[0].ts_ms if resets else None

    @staticmethod
    def _kill_detail(kill: LeaderKill) -> dict[str, Any]:
        return {
            "node": kill.node_id,
            "led": kill.led,
            "election_s": kill.election_s,
            "new_leaders": kill.new_leaders,
            "down_s": kill.down_s,
            "restarted_ms": kill.restarted_ms,
            "restart_error": kill.error,
        }

    def summary(self) -> dict[str, Any]:
        """For the report: what went through the proxy, and where the topics were."""
        if self.cluster is not None:
            return {
                "broker": self.bootstrap,
                "nodes": len(self.cluster.broker.state.nodes)
                if self.cluster.broker is not None and self.cluster.broker.state is not None
                else None,
                "leader_kills": len(self.cluster.kills),
                "note": "the output topics lived on the experiment's own cluster and are gone "
                "with it; the verdict was reached before it stopped",
            }
        stats = self.proxy.stats
        return {
            "broker": self.bootstrap,
            "connections": stats.connections,
            "frames_up": stats.frames_up,
            "frames_down": stats.frames_down,
            "resets": len(stats.resets),
            "blackholes": len(stats.blackholes),
            "broker_pauses": len(self.network.pauses),
            "broker_restarts": len(self.network.restarts),
            "note": "the output topics lived on the experiment's own broker and are gone with "
            "it; the verdict was reached before it stopped",
        }

    def refresh(self) -> None:
        """Copy what each blackhole, broker restart and leader kill did into its failure's
        entry."""
        for failure, kill in self._kills:
            failure.detail = self._kill_detail(kill)
        for failure, restart in self._restarts:
            failure.detail = {
                "down_s": restart.down_s,
                "restarted_ms": restart.restarted_ms,
                "restart_error": restart.error,
            }
        for failure, fired in self._blackholes:
            failure.detail = {
                "dropped_frames": fired.dropped_frames,
                "reset_connections": fired.reset_connections,
            }
