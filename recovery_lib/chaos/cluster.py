"""A Kafka cluster the experiment can hurt: three private Apache Kafka nodes (replication 3,
``min.insync.replicas`` 2, unclean leader election off, kafka/apache.py) whose partition
leaders can be SIGKILLed mid-run, like a broker host that crashed. The cluster elects new
leaders among the in-sync replicas, and clients, bootstrapped with every node, follow them.
The killed node starts again on its log dir once they have (the controller notices a dead node
after ``broker.session.timeout.ms``, 9 s by default) and ``down_s`` passed, so that the next
kill finds three nodes again (with two, a kill would leave fewer in-sync replicas than acks=all
needs).

Private like chaos/network.py's broker: not recorded as the machine's broker, started and
stopped by its owner only; ``use()`` points this process and its children at it.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient, PartitionMetadata

from recovery_lib.chaos.private import PrivateKafka
from recovery_lib.chaos.proxy import now_ms
from recovery_lib.errors import RecoveryError
from recovery_lib.kafka.apache import CLUSTER_NODES
from recovery_lib.kafka.broker import EmbeddedBroker
from recovery_lib.settings import Settings, get_settings

log = logging.getLogger(__name__)

ELECTION_POLL_S = 0.1  # how often the keeper asks who leads the killed node's partitions


class ClusterNotStarted(RecoveryError, RuntimeError):
    """The faulty cluster (or network) was asked for a fault before ``start()`` or after
    ``stop()``."""


@dataclass
class LeaderKill:
    """One SIGKILL of the node that led the most of the watched partitions, the election of
    their new leaders, and the node's start on its log dir after the election, ``down_s``
    after the kill at the earliest."""

    killed_ms: int
    node_id: int
    led: list[str]  # "topic/partition" the node led when it was killed
    down_s: float
    elected_ms: int | None = None  # every partition it led had another leader
    new_leaders: dict[str, int] = field(default_factory=dict)
    restarted_ms: int | None = None
    error: str | None = None

    @property
    def election_s(self) -> float | None:
        return None if self.elected_ms is None else (self.elected_ms - self.killed_ms) / 1000


class FaultyCluster(PrivateKafka):
    def __init__(self, log_dir: Path, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()
        self.log_dir = log_dir
        self.broker: EmbeddedBroker | None = None
        self.kills: list[LeaderKill] = []
        self._data_dir: Path | None = None
        self._keeper: threading.Thread | None = None
        self._due: queue.Queue[LeaderKill | None] = queue.Queue()
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # the keeper's node start and stop() use the broker
        self._admin: AdminClient | None = None

    @property
    def bootstrap(self) -> str:
        if self.broker is None or self.broker.state is None:
            raise ClusterNotStarted("the faulty cluster is not started")
        return self.broker.state.bootstrap

    def start(self) -> str:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._data_dir = Path(tempfile.mkdtemp(prefix="cluster-", dir=self.log_dir))
        self.broker = EmbeddedBroker(
            self.settings, log_dir=self._data_dir, private=True, kind="kafka", nodes=CLUSTER_NODES
        )
        state = self.broker.start()
        # log_level 0: a killed node's refused connections are the point, not news.
        self._admin = AdminClient({"bootstrap.servers": state.bootstrap, "log_level": 0})
        log.info("a private %d-node Kafka cluster at %s", CLUSTER_NODES, state.bootstrap)
        return state.bootstrap

    def stop(self) -> None:
        """Stop every node and the keeper, remove the cluster's data; safe to call twice."""
        self._stopping.set()  # no node start from now on; one under way finishes first (lock)
        with self._lock:
            if self.broker is not None:
                self.broker.stop()
                self.broker = None
        if self._keeper is not None:  # after the nodes: a node dies with the keeper thread
            self._due.put(None)
            self._keeper.join(timeout=10)
            self._keeper = None
        if self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    # -- leaders -------------------------------------------------------------------------------

    def _partitions(self, topics: Iterable[str]) -> dict[str, PartitionMetadata]:
        """``topic/partition`` -> its metadata now, for the topics that exist."""
        if self._admin is None:
            raise ClusterNotStarted("the faulty cluster is not started")
        metadata = self._admin.list_topics(timeout=self.settings.kafka_request_timeout_s)
        found: dict[str, PartitionMetadata] = {}
        for topic in topics:
            meta = metadata.topics.get(topic)
            if meta is not None and meta.error is None:
                found.update({f"{topic}/{p.id}": p for p in meta.partitions.values()})
        return found

    def leaders(self, topics: Iterable[str]) -> dict[str, int]:
        """``topic/partition`` -> the node id leading it (-1: none now), for the topics that
        exist."""
        return {tp: part.leader for tp, part in self._partitions(topics).items()}

    def in_sync(self, topics: Iterable[str]) -> bool:
        """Every partition of ``topics`` has all its replicas in sync: a node started again
        has caught up (killing another before would leave fewer than min.insync.replicas)."""
        try:
            parts = self._partitions(topics).values()
        except Exception:  # noqa: BLE001 - not known now (or not started): not in sync
            return False
        return all(p.leader >= 0 and set(p.isrs) == set(p.replicas) for p in parts)

    def kill_leader(self, topics: Iterable[str], down_s: float) -> LeaderKill:
        """SIGKILL the node that leads the most partitions of ``topics`` now; the keeper
        thread records when they have new leaders and then starts the node again, ``down_s``
        after the kill at the earliest."""
        broker = self.broker
        if broker is None or broker.state is None:
            raise ClusterNotStarted("the faulty cluster is not started")
        if self.restarting():
            raise ClusterNotStarted("the last killed node is not back yet")
        leaders = self.leaders(topics)
        counts = Counter(node for node in leaders.values() if node >= 0)
        if not counts:
            raise ClusterNotStarted(f"no partition of {sorted(set(topics))} has a leader")
        victim = counts.most_common(1)[0][0]
        kill = LeaderKill(
            now_ms(),
            victim,
            sorted(tp for tp, node in leaders.items() if node == victim),
            down_s,
        )
        os.kill(broker.state.node(victim).pid, signal.SIGKILL)
        self.kills.append(kill)
        log.info("node %d killed (SIGKILL), the leader of %s", victim, ", ".join(kill.led))
        if self._keeper is None:
            self._keeper = threading.Thread(target=self._keep, name="cluster keeper", daemon=True)
            self._keeper.start()
        self._due.put(kill)
        return kill

    def restarting(self) -> bool:
        last = self.kills[-1] if self.kills else None
        return last is not None and last.restarted_ms is None and last.error is None

    def _keep(self) -> None:
        """For each kill: watch the election, then start the node again when due. (A node
        back before the election would make the kill a restart: no leader would move.)"""
        while (kill := self._due.get()) is not None:
            due = time.monotonic() + kill.down_s - (now_ms() - kill.killed_ms) / 1000
            self._watch_election(kill, time.monotonic() + self.settings.kafka_outage_budget_s)
            if self._stopping.wait(max(0.0, due - time.monotonic())):
                return
            self._start_again(kill)

    def _watch_election(self, kill: LeaderKill, until: float) -> None:
        topics = {tp.rsplit("/", 1)[0] for tp in kill.led}
        while time.monotonic() < until and not self._stopping.is_set():
            try:
                now = {tp: n for tp, n in self.leaders(topics).items() if tp in kill.led}
            except Exception:  # noqa: BLE001 - asked again until the node is due back
                now = {}
            if len(now) == len(kill.led) and all(
                n >= 0 and n != kill.node_id for n in now.values()
            ):
                kill.elected_ms, kill.new_leaders = now_ms(), now
                log.info("new leaders after %.2f s: %s", kill.election_s, now)
                return
            self._stopping.wait(ELECTION_POLL_S)

    def _start_again(self, kill: LeaderKill) -> None:
        with self._lock:
            if self.broker is None:  # stopped meanwhile
                return
            try:
                self.broker.start_node(kill.node_id)
            except Exception as exc:  # noqa: BLE001 - the report says it; the run goes on
                kill.error = repr(exc)
                log.error("killed node %d did not start again: %s", kill.node_id, exc)
                return
        kill.restarted_ms = now_ms()
        log.info("node %d started again on its log dir", kill.node_id)
