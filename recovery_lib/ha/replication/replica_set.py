"""Two live replicas of one job: two supervised Spark applications on the same input, each with
its own checkpoint, both writing the output topic with identical output ids. The supervisor of
experiment and daemon modes ``kazoo`` and ``liverobin`` (a ``JobSupervisor``).

Everything of a replica set lives under ``<home>``:

    replicas/<r>/             replica r's process log, heartbeat (its lease) and role
    replicas/<r>/checkpoints  its Spark checkpoint
    replicas/<r>/ship         the survivor's checkpoint copy a replacement started from
    replicas/<r>.dead-<n>/    a dead incarnation of r, kept for its log
    epochs/                   KaZoo's leadership epochs (ha/fencing.py)

KaZoo's order log is the topic ``<output>.order``, LiveRobin's heartbeat index
``<output>.heartbeats``; under LiveRobin this process also runs the heartbeat generator. What
differs between the two is a strategy object (strategies.py: ``LeaderBased``, ``Leaderless``);
the supervision here is shared.

Both replicas write the raw topic ``<output>.replicas`` with the release sink: ids (batch,
partition, seq) in a replay-stable order, so the two copies of an output carry the same id,
and each writer's barrier skips what the other already wrote to a partition. Two writers can
still race past each other's barrier, so the raw topic may hold an id twice; the gate
(gate.py, a thread of this process) forwards the first copy of each id to ``<output>``, which
a plain consumer reads exactly once. Readers that keep the first copy of an id (the dedup
reader) may read the raw topic directly and skip the gate's hop.

A replica that dies is never restarted from its own checkpoint (it may hold a batch the
survivor cut differently); it is replaced from the survivor's state (``_replace``).

A nondeterministic job runs causal on both replicas with one shared determinant topic: every
determinant stream has one writer, whose values the other replica uses
(shared_determinants.py), so both compute the same outputs under the same ids.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recovery_lib.errors import ConfigurationError, JobFailed, NotStarted, ProtocolError
from recovery_lib.ha.replication.gate import REPLICA_HEADERS_HOOK, ReplicaGate, raw_topic
from recovery_lib.ha.replication.shared_determinants import SHARED_SOURCE
from recovery_lib.ha.replication.strategies import (
    REPLICAS,
    ReplicationStrategy,
    heartbeat_index_topic,
    order_topic,
    replica_roles,
    replication_strategy,
)
from recovery_lib.ha.standby.shipping import Shipper, latest_complete, restore
from recovery_lib.io.sinks.modes import output_partitions
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.control_topic import ControlTopic
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.runtime.checkpoint import last_committed
from recovery_lib.runtime.faults import ARM_DIR_ENV
from recovery_lib.runtime.launch import JobLaunch, LaunchRefused
from recovery_lib.runtime.supervisor import Restart, Supervisor
from recovery_lib.settings import Settings, get_settings

if TYPE_CHECKING:
    from recovery_lib.runtime.supervisor import ProcessSpec

log = logging.getLogger(__name__)

__all__ = [
    "REPLICAS",
    "Replacement",
    "ReplacementOutOfOrder",
    "ReplacementStatus",
    "ReplicaSet",
    "ReplicaState",
    "ReplicationState",
    "heartbeat_index_topic",
    "order_topic",
    "replica_checkpoint_roots",
]

# A fault aimed at the victim while it is dead (not replaced yet) or not elected yet.
_WAIT_FOR_VICTIM = ": it died or is not elected yet; wait until the set is whole (a longer --every)"


def replica_dir(home: str | Path, replica: str) -> Path:
    return Path(home) / "replicas" / replica


def replica_checkpoint_roots(home: str | Path) -> list[Path]:
    """Each replica's ``--checkpoints`` root in the replica set at ``home``."""
    return [replica_dir(home, r) / "checkpoints" for r in REPLICAS]


class ReplacementStatus(StrEnum):
    """Where a dead replica's replacement stands; the transitions are ``Replacement``'s
    methods, each refusing a step out of order."""

    WAITING = "waiting"  # the replica died; its replacement has not started yet
    CATCHING_UP = "catching_up"  # the new incarnation runs from the survivor's copy
    JOINED = "joined"  # level with the survivor: the set is whole again
    DIED = "died"  # the new incarnation died before it joined (a new record follows)


class ReplacementOutOfOrder(ProtocolError):
    """A replacement asked to take a step its status does not allow."""


@dataclass
class Replacement:
    """One dead replica and its replacement, as the metrics store and the report keep it."""

    replica: str
    cause: str
    detected_ms: int
    survivor: str
    started_ms: int | None = None  # the new incarnation's process started
    copy_batch: int | None = None  # the survivor's last committed batch in the copy
    joined_ms: int | None = None  # it committed up to the survivor's batch (minus one)
    died_ms: int | None = None  # the replacement itself died before it joined
    status: ReplacementStatus = ReplacementStatus.WAITING

    @property
    def pending(self) -> bool:
        """The set is not whole: waiting for the replacement, or it is catching up."""
        return self.status in (ReplacementStatus.WAITING, ReplacementStatus.CATCHING_UP)

    def _step(self, allowed: ReplacementStatus, to: ReplacementStatus) -> None:
        if self.status is not allowed:
            raise ReplacementOutOfOrder(
                f"replica {self.replica}'s replacement is {self.status.value}: it cannot "
                f"become {to.value} (only from {allowed.value})"
            )
        self.status = to

    def start(self, survivor: str, copy_batch: int | None, ts_ms: int) -> None:
        self._step(ReplacementStatus.WAITING, ReplacementStatus.CATCHING_UP)
        self.survivor, self.copy_batch, self.started_ms = survivor, copy_batch, ts_ms

    def join(self, ts_ms: int) -> None:
        self._step(ReplacementStatus.CATCHING_UP, ReplacementStatus.JOINED)
        self.joined_ms = ts_ms

    def die(self, ts_ms: int) -> None:
        self._step(ReplacementStatus.CATCHING_UP, ReplacementStatus.DIED)
        self.died_ms = ts_ms

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "replacement", **dataclasses.asdict(self), "status": self.status.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Replacement:
        fields = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in fields}
        if "status" in known:
            known["status"] = ReplacementStatus(known["status"])
        else:  # written before the status was recorded: read it from the timestamps
            known["status"] = (
                ReplacementStatus.JOINED
                if known.get("joined_ms") is not None
                else ReplacementStatus.DIED
                if known.get("died_ms") is not None
                else ReplacementStatus.CATCHING_UP
                if known.get("started_ms") is not None
                else ReplacementStatus.WAITING
            )
        return cls(**known)


@dataclass(frozen=True)
class ReplicaState:
    """One replica in a ``ReplicationState``; role and epoch are KaZoo's (None under
    LiveRobin), as the replica's cut policy last decided them."""

    live: bool
    incarnation: int  # 0 for the first process, +1 per replacement
    pid: int | None
    committed_batch: int | None
    role: str | None = None
    epoch: int | None = None


@dataclass(frozen=True)
class ReplicationState:
    """A replica set's snapshot. Lives in the metrics store as events of kind
    ``replication_state`` (the detail JSON), written by ``ReplicaSet.tick`` every
    ``job_status_every_s``; read by the dashboard's Replicas tab."""

    job: str
    output_topic: str
    mode: str
    replicas: dict[str, ReplicaState]
    lag_batches: int | None  # committed batches between the live replicas (None: one live)
    gate_forwarded: int  # outputs the gate forwarded to the plain consumers' topic
    gate_dropped: dict[str, int]  # copies the gate dropped, by writing replica
    heartbeats: int | None  # LiveRobin: heartbeats written (None under KaZoo)
    replacements: tuple[Replacement, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["replacements"] = [r.to_dict() for r in self.replacements]
        return out

    def problems(self, now: int, replace_after_s: float, join_timeout_s: float) -> list[str]:
        """What an operator must look at: a replica dead longer than its replacement should
        take, or a replacement that has not caught up in time."""
        out = []
        for r in self.replacements:
            if r.status is ReplacementStatus.WAITING:
                if now - r.detected_ms > (replace_after_s + 60) * 1000:
                    out.append(f"replica {r.replica} died ({r.cause}) and was not replaced")
            elif r.status is ReplacementStatus.CATCHING_UP:
                assert r.started_ms is not None
                if now - r.started_ms > join_timeout_s * 1000:
                    out.append(
                        f"replica {r.replica}'s replacement has not caught up with {r.survivor} "
                        f"{(now - r.started_ms) / 1000:.0f} s after it started"
                    )
        if not any(rep.live for rep in self.replicas.values()):
            out.append("no replica is live")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplicationState:
        return cls(
            **{
                **data,
                "replicas": {r: ReplicaState(**v) for r, v in data["replicas"].items()},
                "replacements": tuple(
                    Replacement.from_dict(r) for r in data.get("replacements", [])
                ),
            }
        )


@dataclass
class _Replica:
    """One replica's current incarnation."""

    name: str
    sup: Supervisor
    incarnation: int = 0
    dead: bool = False
    replacement: Replacement | None = field(default=None)


class ReplicaSet:
    """Two replicas of the job that ``spec.launch`` runs (its output topic set); each replica
    gets its own checkpoint, the raw topic through the release sink, and the strategy's cut
    policy and write hooks. ``input_topics``: the job's input topics (LiveRobin's heartbeats
    carry their positions)."""

    def __init__(
        self,
        spec: ProcessSpec,
        strategy: ReplicationStrategy | str,
        home: str | Path,
        store: MetricsStore | None = None,
        run_id: str | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        heartbeat_period_s: float | None = None,
        victim: str | None = None,
        kafka: Mapping[str, str] | None = None,
        replace_after_s: float | None = None,
        slow_delay_s: float = 0.0,
        input_topics: list[str] | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or get_settings()  # the caller's; read once
        self.strategy = replication_strategy(strategy) if isinstance(strategy, str) else strategy
        victim = victim or self.strategy.default_victim
        if victim not in self.strategy.victims:
            raise ConfigurationError(
                f"victim {victim!r}: choose {' or '.join(self.strategy.victims)}"
                + (
                    ""
                    if "leader" in self.strategy.victims
                    else f" ({self.strategy.title} has no leader)"
                )
            )
        if spec.launch is None or not spec.launch.output_topic:
            raise LaunchRefused(
                "a replica set runs a job through the launcher with its output topic set: "
                "build its spec with ProcessSpec.for_job(JobLaunch(..., output_topic=...))"
            )
        self.spec = spec
        self.launch: JobLaunch = spec.launch
        self.name = spec.name or spec.launch.name
        # Causal replicas (a nondeterministic job) share their determinant streams.
        self.causal = self.launch.causal
        self.home = Path(home)
        self.output_topic = self.launch.output_topic
        self.input_topics = list(input_topics or [])
        self.partitions = self.launch.partitions
        self._kafka = dict(kafka) if kafka else None
        self.store, self.run_id, self.on_event = store, run_id, on_event
        settings = self.settings
        self.heartbeat_period_s = heartbeat_period_s or settings.replication_heartbeat_period_s
        self.replace_after_s = (
            settings.replication_replace_after_s if replace_after_s is None else replace_after_s
        )
        self.victim = victim
        self.slow_delay_s = slow_delay_s  # LiveRobin: the first input's partition 0 is late
        self.replicas = {r: _Replica(r, self._supervisor(r)) for r in REPLICAS}
        self.gate: ReplicaGate | None = None
        self.generator_errors: list[str] = []
        self.restarts: list[Restart] = []  # the job never restarts: a replica is replaced
        self.replacements: list[Replacement] = []
        self._retired: list[Supervisor] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._said_single = False
        self._state_reported_ms = 0
        self.state_every_s = settings.job_status_every_s
        self.join_lag_batches = settings.replication_join_lag_batches

    @property
    def mode(self) -> str:
        return self.strategy.name

    # -- layout ------------------------------------------------------------------------------

    @property
    def kafka(self) -> dict[str, str]:
        """The broker's client settings, looked up when first needed (not to build a set)."""
        if self._kafka is None:
            self._kafka = dict(client_config())
        return self._kafka

    @property
    def supervisors(self) -> dict[str, Supervisor]:
        """Each replica's current incarnation."""
        return {r: rep.sup for r, rep in self.replicas.items()}

    @property
    def failed(self) -> dict[str, Replacement]:
        """Replicas dead and not replaced yet (or still catching up), by name."""
        return {
            r: rep.replacement
            for r, rep in self.replicas.items()
            if rep.replacement is not None and rep.replacement.pending
        }

    def replica_dir(self, replica: str) -> Path:
        return replica_dir(self.home, replica)

    def checkpoint(self, replica: str) -> Path:
        """The replica's query checkpoint (the job's subdirectory of its checkpoints)."""
        return self.replica_dir(replica) / "checkpoints" / self.name

    def replica_launch(self, replica: str) -> JobLaunch:
        sink = {
            "recordHeaders": REPLICA_HEADERS_HOOK,
            "replicaId": replica,
            **self.strategy.sink_options(self, replica),
        }
        causal = {  # one writer per determinant stream, the other replica follows it
            "streamSource": SHARED_SOURCE,
            "replicaId": replica,
            "leaseDir": str(self.home / "replicas"),
        }
        return self.launch.as_replica(
            checkpoints=str(self.replica_dir(replica) / "checkpoints"),
            output_topic=raw_topic(self.output_topic),
            source_options=self.strategy.source_options(self, replica),
            sink_options=sink,
            causal_options=causal,
        )

    def args(self, replica: str) -> list[str]:
        """The replica's process arguments (its launch on argv)."""
        return self.replica_launch(replica).to_argv()

    def _supervisor(self, replica: str) -> Supervisor:
        # A replica is never restarted in place (max_restarts 0): it is replaced. Its fault
        # hooks are armed in its own directory, so a failure hits the replica it aims at.
        env = dict(self.spec.env)
        if ARM_DIR_ENV in env:
            env[ARM_DIR_ENV] = str(Path(env[ARM_DIR_ENV]) / replica)
        spec = self.spec.with_launch(self.replica_launch(replica), env=env, max_restarts=0)
        return Supervisor(
            spec,
            self.replica_dir(replica),
            self.store,
            self.run_id,
            self.on_event,
            settings=self.settings,
        )

    def event(self, kind: str, detail: dict[str, Any], ts_ms: int | None = None) -> None:
        if self.store is not None and self.run_id is not None:
            self.store.event(self.run_id, kind, detail, ts_ms)
        if self.on_event is not None:
            self.on_event(kind, detail)

    # -- lifecycle ---------------------------------------------------------------------------

    def create_topics(self) -> None:
        admin = TopicAdmin(self.kafka)
        # The release sink writes task p to partition p; the gate keeps partitions apart.
        count = output_partitions(
            "release", self.partitions or self.settings.spark_shuffle_partitions
        )
        for topic in (raw_topic(self.output_topic), self.output_topic):
            admin.create(topic, count)
        ControlTopic(self.strategy.control_topic(self.output_topic), self.kafka).create()

    def start(self) -> None:
        self.create_topics()
        self.gate = ReplicaGate(self.output_topic, self.kafka, settings=self.settings)
        self.thread(self.gate.run, "gate")
        self.strategy.start(self)
        for rep in self.replicas.values():
            rep.sup.start()

    def thread(self, target: Callable[..., Any], name: str, *args: Any) -> None:
        """Run ``target(stop_event, *args)`` beside the replicas until the set stops."""
        thread = threading.Thread(target=target, args=(self._stop, *args), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def wait_ready(self, timeout_s: float = 240.0) -> None:
        for rep in self.replicas.values():
            rep.sup.wait_ready(timeout_s)

    # -- supervision -------------------------------------------------------------------------

    def live(self) -> list[str]:
        return [r for r, rep in self.replicas.items() if not rep.dead]

    def in_step(self) -> list[str]:
        """The live replicas but a replacement still catching up: LiveRobin's heartbeats
        wait for the slowest of these (a replacement catches up on the survivor's cuts)."""
        return [
            r
            for r, rep in self.replicas.items()
            if not rep.dead and (rep.replacement is None or not rep.replacement.pending)
        ]

    def tick(self) -> list[str]:
        """One supervision step: a replica that died is stopped for good and recorded; its
        replacement starts ``replace_after_s`` later and joins once it caught up; KaZoo's
        leader takeovers are recorded. Returns the live replicas."""
        for rep in self.replicas.values():
            if rep.dead:
                continue
            cause = rep.sup.check()
            if cause is not None:
                self._failed(rep, cause)
        for rep in self.replicas.values():
            pending = rep.replacement
            if pending is None or not pending.pending:
                continue
            if pending.status is ReplacementStatus.WAITING:
                if now_ms() - pending.detected_ms >= self.replace_after_s * 1000:
                    survivors = self.live()
                    if survivors:
                        self._replace(rep, survivors[0])
            elif self._caught_up(rep):
                pending.join(now_ms())
                self.event("replica_joined", pending.to_dict(), pending.joined_ms)
                log.info("replica set %s: replica %s joined again", self.output_topic, rep.name)
                self._said_single = False
        self.strategy.tick(self)
        if now_ms() - self._state_reported_ms >= self.state_every_s * 1000:
            self._state_reported_ms = now_ms()
            self.event("replication_state", self.status().to_dict(), self._state_reported_ms)
        live = self.live()
        if len(live) < len(self.replicas) and not self._said_single:
            self._said_single = True
            log.warning("replica set %s: running on one replica (%s)", self.output_topic, live)
        if not live:
            raise JobFailed(
                f"both replicas of {self.name} died; see {self.home / 'replicas'}/*/job.log"
            )
        return live

    def _failed(self, rep: _Replica, cause: str) -> None:
        rep.sup.kill_group(signal.SIGKILL)
        rep.dead = True
        if rep.replacement is not None and rep.replacement.pending:
            # It never joined: a new record follows. (Dead again while still waiting cannot
            # happen: a waiting replica runs no process.)
            rep.replacement.die(now_ms())
        survivors = self.live()
        record = Replacement(rep.name, cause, now_ms(), survivors[0] if survivors else "")
        rep.replacement = record
        self.replacements.append(record)
        self.event("replica_failed", {"replica": rep.name, "cause": cause}, record.detected_ms)

    def _replace(self, rep: _Replica, survivor: str) -> None:
        """Replace dead replica ``rep`` from ``survivor``'s state.

        1. Move the dead incarnation's directory aside (its log stays readable; its role and
           lease files must not speak for the new one).
        2. Ship the survivor's checkpoint (standby shipping: offset and commit logs up to its
           last committed batch N, then state up to version N + 1) and restore it as the new
           incarnation's checkpoint.
        3. Start the new incarnation. It plans batch N + 1, which the survivor already cut:
           under KaZoo it follows the order log, under LiveRobin it cuts at the same
           heartbeats, and its release barrier skips every output already written; so it
           joins at a batch boundary without writing a copy a reader would keep.
        If the survivor committed nothing yet, the new incarnation starts from the beginning,
        which the same rules make safe.
        """
        pending = rep.replacement
        assert pending is not None
        # Step 1.
        old = self.replica_dir(rep.name)
        rep.incarnation += 1
        if old.exists():
            old.replace(old.with_name(f"{rep.name}.dead-{rep.incarnation}"))
        self._retired.append(rep.sup)
        # Step 2.
        ship_dir = old / "ship"
        copy = Shipper(self.checkpoint(survivor), ship_dir).ship()
        copy_batch = None
        if copy is not None:
            manifest = latest_complete(ship_dir)
            if manifest is not None:
                restore(ship_dir, manifest, old / "checkpoints")
                copy_batch = manifest.batch
        # Step 3.
        rep.sup = self._supervisor(rep.name)
        rep.sup.start()
        rep.dead = False
        pending.start(survivor, copy_batch, now_ms())
        self.event("replica_replacing", pending.to_dict(), pending.started_ms)
        log.info(
            "replica set %s: replacing %s from %s's state (batch %s)",
            self.output_topic,
            rep.name,
            survivor,
            pending.copy_batch,
        )

    def _caught_up(self, rep: _Replica) -> bool:
        """The new incarnation serves and is level with the others, or ran a batch of its own
        past the copy and is at most ``join_lag_batches`` behind (the copy alone proves
        nothing: it would count as joined before it ever processed a record). It catches up
        only if it runs a batch faster than the others cut one: under LiveRobin every batch
        ends at the next heartbeat, so a replica whose batch takes longer than the heartbeat
        period never catches up (raise the period)."""
        if not rep.sup.is_ready():
            return False
        mine = last_committed(self.checkpoint(rep.name))
        if mine is None:
            return False
        others = max(
            (
                last_committed(self.checkpoint(r)) or -1
                for r, other in self.replicas.items()
                if other is not rep and not other.dead
            ),
            default=-1,
        )
        copied = -1 if rep.replacement is None else rep.replacement.copy_batch
        ran_its_own = mine > (-1 if copied is None else copied)
        return mine >= others or (ran_its_own and mine >= others - self.join_lag_batches)

    def roles(self) -> dict[str, dict[str, Any]]:
        """Each replica's last decision (KaZoo: role, epoch, batch); {} before the first."""
        return replica_roles(self.home)

    def leader(self) -> str | None:
        """The current leader among the live replicas (None: leaderless, or no election yet)."""
        return self.strategy.leader(self)

    @property
    def leader_takeovers(self) -> list[dict[str, Any]]:
        return self.strategy.leader_takeovers

    @property
    def beats_written(self) -> int:
        """LiveRobin: heartbeats its stopped generators wrote (0 under KaZoo)."""
        return getattr(self.strategy, "beats_written", 0)

    def victim_replica(self) -> str | None:
        """The replica a failure hits now (``victim``), among the live ones."""
        live = self.live()
        if self.victim in REPLICAS:
            return self.victim if self.victim in live else None
        leader = self.leader()
        if leader is None:
            return None
        if self.victim == "leader":
            return leader
        return next((r for r in live if r != leader), None)

    # -- the JobSupervisor interface (runtime/supervision.py) --------------------------------

    @property
    def takeovers(self) -> list[dict[str, Any]]:
        """KaZoo's leader takeovers and the replacements of dead replicas, in time order."""
        both = [*self.leader_takeovers, *(r.to_dict() for r in self.replacements)]
        return sorted(both, key=lambda t: t.get("ts_ms") or t.get("detected_ms") or 0)

    def front(self) -> str:
        """The replica that stands for the set (status, pid, heartbeat, checkpoints for GC and
        shipping): the leader (KaZoo), else the live replica that committed most (not a
        replacement still catching up)."""
        return self.strategy.front(self)

    @property
    def live_checkpoints(self) -> Path:
        return self.replica_dir(self.front()) / "checkpoints"

    def is_ready(self) -> bool:
        return any(self.replicas[r].sup.is_ready() for r in self.live())

    def serving(self) -> bool:
        """The job serves: one live replica is enough (the other may be being replaced)."""
        return self.is_ready()

    def heartbeat(self) -> Any:
        return self.replicas[self.front()].sup.heartbeat()

    @property
    def pid(self) -> int | None:
        return self.replicas[self.front()].sup.pid

    def ready_for_next_failure(self) -> bool:
        """Both replicas up and none catching up: the next failure hits a full set."""
        return not self.failed and all(rep.sup.is_ready() for rep in self.replicas.values())

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the victim replica (a whole Spark application)."""
        replica = self.victim_replica()
        if replica is None:
            raise NotStarted(f"no live {self.victim} replica to signal{_WAIT_FOR_VICTIM}")
        self.event("replica_signalled", {"replica": replica, "signal": int(sig)})
        self.replicas[replica].sup.kill_group(sig)

    def fault_dir(self, base: Path) -> Path:
        """The victim replica's arm directory (its processes read ``base/<replica>``)."""
        replica = self.victim_replica()
        if replica is None:
            raise NotStarted(f"no live {self.victim} replica to aim a fault at{_WAIT_FOR_VICTIM}")
        return base / replica

    def pause(self, seconds: float) -> None:
        """SIGSTOP the victim replica for ``seconds`` (past KaZoo's lease: a zombie leader)."""
        replica = self.victim_replica()
        if replica is None:
            raise NotStarted(f"no live {self.victim} replica to pause{_WAIT_FOR_VICTIM}")
        self.event("replica_paused", {"replica": replica, "seconds": seconds})
        self.replicas[replica].sup.pause(seconds)

    def stop(self, timeout_s: float = 30.0) -> None:
        for sup in [*self._retired, *(rep.sup for rep in self.replicas.values())]:
            sup.stop(timeout_s)
        self._stop.set()  # after the replicas: the gate forwards what they wrote last
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()
        self.strategy.stop()

    def status(self) -> ReplicationState:
        """Replicas, roles, lag between them, gate and heartbeats, as of now."""
        committed = {r: last_committed(self.checkpoint(r)) for r in self.replicas}
        known = [b for r, b in committed.items() if b is not None and r in self.live()]
        roles = self.roles()
        return ReplicationState(
            job=self.name,
            output_topic=self.output_topic,
            mode=self.mode,
            replicas={
                r: ReplicaState(
                    live=not rep.dead,
                    incarnation=rep.incarnation,
                    pid=rep.sup.pid,
                    committed_batch=committed[r],
                    role=self.strategy.role(roles[r])[0],
                    epoch=self.strategy.role(roles[r])[1],
                )
                for r, rep in self.replicas.items()
            },
            lag_batches=(max(known) - min(known)) if len(known) == len(self.replicas) else None,
            gate_forwarded=self.gate.forwarded if self.gate is not None else 0,
            gate_dropped=dict(self.gate.dropped) if self.gate is not None else {},
            heartbeats=self.strategy.heartbeats,
            replacements=tuple(self.replacements),
        )

    def __enter__(self) -> ReplicaSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
