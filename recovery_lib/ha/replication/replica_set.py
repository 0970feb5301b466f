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
``<output>.heartbeats``; under LiveRobin this process also runs the heartbeat generator.

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
import json
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from recovery_lib.ha.replication.gate import REPLICA_HEADERS_HOOK, ReplicaGate, raw_topic
from recovery_lib.ha.replication.kazoo import KAZOO_GUARD, KAZOO_POLICY, role_path
from recovery_lib.ha.replication.liverobin import LIVEROBIN_POLICY
from recovery_lib.ha.replication.shared_determinants import SHARED_SOURCE
from recovery_lib.ha.standby.shipping import Shipper, latest_complete, restore
from recovery_lib.job.spec import JobSpec, resolve_job
from recovery_lib.kafka.clients import client_config
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.runtime.checkpoint import last_committed
from recovery_lib.runtime.faults import ARM_DIR_ENV
from recovery_lib.runtime.supervisor import ProcessSpec, Restart, Supervisor, with_arg
from recovery_lib.settings import get_settings

ReplicationMode = Literal["kazoo", "liverobin"]
REPLICATION_MODES: tuple[str, ...] = ("kazoo", "liverobin")
REPLICAS = ("a", "b")
# Which replica a failure hits: KaZoo's current leader or follower, or a replica by name.
VICTIMS = ("leader", "follower", *REPLICAS)


def order_topic(output_topic: str) -> str:
    return f"{output_topic}.order"


def heartbeat_index_topic(output_topic: str) -> str:
    return f"{output_topic}.heartbeats"


def replica_dir(home: str | Path, replica: str) -> Path:
    return Path(home) / "replicas" / replica


def replica_checkpoint_roots(home: str | Path) -> list[Path]:
    """Each replica's ``--checkpoints`` root in the replica set at ``home``."""
    return [replica_dir(home, r) / "checkpoints" for r in REPLICAS]


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

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "replacement", **dataclasses.asdict(self)}


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
            if r.joined_ms is not None or r.died_ms is not None:
                continue
            if r.started_ms is None and now - r.detected_ms > (replace_after_s + 60) * 1000:
                out.append(f"replica {r.replica} died ({r.cause}) and was not replaced")
            elif r.started_ms is not None and now - r.started_ms > join_timeout_s * 1000:
                out.append(
                    f"replica {r.replica}'s replacement has not caught up with {r.survivor} "
                    f"{(now - r.started_ms) / 1000:.0f} s after it started"
                )
        if not any(rep.live for rep in self.replicas.values()):
            out.append("no replica is live")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplicationState:
        fields = {f.name for f in dataclasses.fields(Replacement)}
        return cls(
            **{
                **data,
                "replicas": {r: ReplicaState(**v) for r, v in data["replicas"].items()},
                "replacements": tuple(
                    Replacement(**{k: v for k, v in r.items() if k in fields})
                    for r in data.get("replacements", [])
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
    """Two replicas of the job that ``spec`` runs (a job-launcher process: ``--job``, its
    ``--prefix``/``--input``, ``--output-topic``; ``--checkpoints``, ``--output-topic`` and
    ``--sink-mode`` are set per replica)."""

    def __init__(
        self,
        spec: ProcessSpec,
        mode: ReplicationMode,
        home: str | Path,
        store: MetricsStore | None = None,
        run_id: str | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        heartbeat_period_s: float | None = None,
        victim: str | None = None,
        kafka: Mapping[str, str] | None = None,
        replace_after_s: float | None = None,
        slow_delay_s: float = 0.0,
    ) -> None:
        from recovery_lib.job.runner import parse_options

        if mode not in REPLICATION_MODES:
            raise ValueError(f"replication mode {mode!r}: choose one of {REPLICATION_MODES}")
        victim = victim or ("leader" if mode == "kazoo" else REPLICAS[0])
        if victim not in VICTIMS or (mode == "liverobin" and victim in ("leader", "follower")):
            raise ValueError(
                f"victim {victim!r}: choose {' or '.join(VICTIMS if mode == 'kazoo' else REPLICAS)}"
                + (" (LiveRobin has no leader)" if mode == "liverobin" else "")
            )
        if "--job" not in spec.args:
            raise ValueError("a replica set runs a job-launcher process (ProcessSpec.for_job)")
        self.job: JobSpec = resolve_job(spec.args[spec.args.index("--job") + 1])
        try:  # the job's own reading of its arguments: topics as the replicas will use them
            opts, _ = parse_options(self.job, list(spec.args))
        except SystemExit:  # argparse printed what is wrong
            raise ValueError(
                f"the arguments of job {self.job.name} are refused (the reason is printed above)"
            ) from None
        self.spec = spec
        self.mode = mode
        # Causal replicas (a nondeterministic job) share their determinant streams.
        self.causal = opts.causal is not None
        self.home = Path(home)
        self.output_topic = opts.out_topic
        self.input_topics = [opts.topic_for(name) for name in self.job.inputs]
        self.partitions = opts.partitions
        self._kafka = dict(kafka) if kafka else None
        self.store, self.run_id, self.on_event = store, run_id, on_event
        settings = get_settings()
        self.heartbeat_period_s = heartbeat_period_s or settings.replication_heartbeat_period_s
        self.replace_after_s = (
            settings.replication_replace_after_s if replace_after_s is None else replace_after_s
        )
        self.victim = victim
        self.slow_delay_s = slow_delay_s  # LiveRobin: the first input's partition 0 is late
        self.replicas = {r: _Replica(r, self._supervisor(r)) for r in REPLICAS}
        self.generator: Any = None
        self.beats_written = 0  # heartbeats of generators already stopped
        self.gate: ReplicaGate | None = None
        self.generator_errors: list[str] = []
        self.restarts: list[Restart] = []  # the job never restarts: a replica is replaced
        self.leader_takeovers: list[dict[str, Any]] = []
        self.replacements: list[Replacement] = []
        self._leader_takeovers_seen: set[tuple[str, int]] = set()
        self._retired: list[Supervisor] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._said_single = False
        self._state_reported_ms = 0
        self.state_every_s = settings.job_status_every_s
        self.join_lag_batches = settings.replication_join_lag_batches

    @classmethod
    def for_job(
        cls,
        job_ref: str,
        mode: ReplicationMode,
        home: str | Path,
        prefix: str,
        output_topic: str,
        inputs: Mapping[str, str] | None = None,
        job_args: list[str] | None = None,
        partitions: int | None = None,
        **kw: Any,
    ) -> ReplicaSet:
        """A replica set of job ``job_ref`` (module:attr or a name of jobs/) on topics
        ``<prefix>.<input>`` (or ``inputs``), writing ``output_topic``."""
        job = resolve_job(job_ref)
        args = [
            *(job_args or []),
            "--prefix",
            prefix,
            *[a for name, topic in (inputs or {}).items() for a in ("--input", f"{name}={topic}")],
            "--output-topic",
            output_topic,
        ]
        if partitions:
            args += ["--partitions", str(partitions)]
        return cls(ProcessSpec.for_job(job.ref, job.name, args), mode, home, **kw)

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
            if rep.replacement is not None and rep.replacement.joined_ms is None
        }

    def replica_dir(self, replica: str) -> Path:
        return replica_dir(self.home, replica)

    def checkpoint(self, replica: str) -> Path:
        """The replica's query checkpoint (the job's subdirectory of its --checkpoints)."""
        return self.replica_dir(replica) / "checkpoints" / self.job.name

    def source_options(self, replica: str) -> dict[str, str]:
        if self.mode == "kazoo":
            return {
                "cutPolicy": KAZOO_POLICY,
                "replicaId": replica,
                "epochStore": str(self.home / "epochs"),
                "leaseDir": str(self.home / "replicas"),
                "replicaCheckpoint": str(self.checkpoint(replica)),
                "orderTopic": order_topic(self.output_topic),
            }
        return {
            "cutPolicy": LIVEROBIN_POLICY,
            "heartbeatIndex": heartbeat_index_topic(self.output_topic),
        }

    def args(self, replica: str) -> list[str]:
        args = with_arg(
            self.spec.args, "--checkpoints", str(self.replica_dir(replica) / "checkpoints")
        )
        args = with_arg(args, "--output-topic", raw_topic(self.output_topic))
        args = with_arg(args, "--sink-mode", "release")
        sink = {"recordHeaders": REPLICA_HEADERS_HOOK, "replicaId": replica}
        if self.mode == "kazoo":  # a replica writes batch b only as the leader published it
            options = self.source_options(replica)
            sink |= {
                "writeGuard": KAZOO_GUARD,
                "replicaCheckpoint": options["replicaCheckpoint"],
                "orderTopic": options["orderTopic"],
            }
        for key, value in self.source_options(replica).items():
            args += ["--source-option", f"{key}={value}"]
        for key, value in sink.items():
            args += ["--sink-option", f"{key}={value}"]
        if self.causal:  # one writer per determinant stream, the other replica follows it
            causal = {
                "streamSource": SHARED_SOURCE,
                "replicaId": replica,
                "leaseDir": str(self.home / "replicas"),
            }
            for key, value in causal.items():
                args += ["--causal-option", f"{key}={value}"]
        return args

    def _supervisor(self, replica: str) -> Supervisor:
        # A replica is never restarted in place (max_restarts 0): it is replaced. Its fault
        # hooks are armed in its own directory, so a failure hits the replica it aims at.
        env = dict(self.spec.env)
        if ARM_DIR_ENV in env:
            env[ARM_DIR_ENV] = str(Path(env[ARM_DIR_ENV]) / replica)
        spec = dataclasses.replace(self.spec, args=self.args(replica), env=env, max_restarts=0)
        return Supervisor(spec, self.replica_dir(replica), self.store, self.run_id, self.on_event)

    def event(self, kind: str, detail: dict[str, Any], ts_ms: int | None = None) -> None:
        if self.store is not None and self.run_id is not None:
            self.store.event(self.run_id, kind, detail, ts_ms)
        if self.on_event is not None:
            self.on_event(kind, detail)

    # -- lifecycle ---------------------------------------------------------------------------

    def create_topics(self) -> None:
        from recovery_lib.io.sinks.modes import output_partitions
        from recovery_lib.kafka.admin import TopicAdmin
        from recovery_lib.kafka.control_topic import ControlTopic

        admin = TopicAdmin(self.kafka)
        # The release sink writes task p to partition p; the gate keeps partitions apart.
        count = output_partitions(
            "release", self.partitions or get_settings().spark_shuffle_partitions
        )
        for topic in (raw_topic(self.output_topic), self.output_topic):
            admin.create(topic, count)
        control = (
            order_topic(self.output_topic)
            if self.mode == "kazoo"
            else heartbeat_index_topic(self.output_topic)
        )
        ControlTopic(control, self.kafka).create()

    def start(self) -> None:
        self.create_topics()
        self.gate = ReplicaGate(self.output_topic, self.kafka)
        self._thread(self.gate.run, "gate")
        if self.mode == "liverobin":
            self._start_heartbeats()
        for rep in self.replicas.values():
            rep.sup.start()

    def _thread(self, target: Any, name: str, *args: Any) -> None:
        thread = threading.Thread(target=target, args=(self._stop, *args), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _start_heartbeats(self) -> None:
        from recovery_lib.ha.replication.heartbeats import HeartbeatGenerator

        self.generator = HeartbeatGenerator(
            self.input_topics,
            heartbeat_index_topic(self.output_topic),
            self.heartbeat_period_s,
            self.kafka,
            slow=(self.input_topics[0], 0) if self.slow_delay_s else None,
            slow_delay_s=self.slow_delay_s,
        )

        def failed(exc: Exception) -> None:
            self.generator_errors.append(str(exc))

        def cold() -> bool:  # a replica that never committed a batch: its first is slow
            return any(last_committed(self.checkpoint(r)) is None for r in self.live())

        self._thread(self.generator.run, "heartbeats", failed, cold)

    def wait_ready(self, timeout_s: float = 240.0) -> None:
        for rep in self.replicas.values():
            rep.sup.wait_ready(timeout_s)

    # -- supervision -------------------------------------------------------------------------

    def live(self) -> list[str]:
        return [r for r, rep in self.replicas.items() if not rep.dead]

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
            if pending is None or pending.joined_ms is not None:
                continue
            if pending.started_ms is None:
                if now_ms() - pending.detected_ms >= self.replace_after_s * 1000:
                    survivors = self.live()
                    if survivors:
                        self._replace(rep, survivors[0])
            elif self._caught_up(rep):
                pending.joined_ms = now_ms()
                self.event("replica_joined", pending.to_dict(), pending.joined_ms)
                print(f"replica set {self.output_topic}: replica {rep.name} joined again")
                self._said_single = False
        if self.mode == "kazoo":
            self._record_leader_takeovers()
        if now_ms() - self._state_reported_ms >= self.state_every_s * 1000:
            self._state_reported_ms = now_ms()
            self.event("replication_state", self.status().to_dict(), self._state_reported_ms)
        live = self.live()
        if len(live) < len(self.replicas) and not self._said_single:
            self._said_single = True
            print(f"replica set {self.output_topic}: running on one replica ({live})")
        if not live:
            raise RuntimeError(
                f"both replicas of {self.job.name} died; see {self.home / 'replicas'}/*/job.log"
            )
        return live

    def _failed(self, rep: _Replica, cause: str) -> None:
        rep.sup.kill_group(signal.SIGKILL)
        rep.dead = True
        if rep.replacement is not None and rep.replacement.joined_ms is None:
            rep.replacement.died_ms = now_ms()  # it never joined: a new record follows
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
        if copy is not None:
            manifest = latest_complete(ship_dir)
            if manifest is not None:
                restore(ship_dir, manifest, old / "checkpoints")
                pending.copy_batch = manifest.batch
        # Step 3.
        rep.sup = self._supervisor(rep.name)
        rep.sup.start()
        rep.dead = False
        pending.survivor = survivor
        pending.started_ms = now_ms()
        self.event("replica_replacing", pending.to_dict(), pending.started_ms)
        print(
            f"replica set {self.output_topic}: replacing {rep.name} from {survivor}'s state "
            f"(batch {pending.copy_batch})"
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

    def _record_leader_takeovers(self) -> None:
        for replica, role in self.roles().items():
            for taken in role.get("takeovers", []):
                key = (replica, int(taken.get("epoch", 0)))
                if key in self._leader_takeovers_seen:
                    continue
                self._leader_takeovers_seen.add(key)
                if taken.get("cause") == "no leader yet":
                    continue  # the first election, not a fail-over
                record = {"kind": "leader", "replica": replica, **taken}
                self.leader_takeovers.append(record)
                self.event("leader_takeover", record, taken.get("ts_ms"))

    def roles(self) -> dict[str, dict[str, Any]]:
        """Each replica's last decision (KaZoo: role, epoch, batch); {} before the first."""
        out: dict[str, dict[str, Any]] = {}
        for replica in REPLICAS:
            try:
                out[replica] = json.loads(role_path(self.home / "replicas", replica).read_text())
            except (OSError, ValueError):
                out[replica] = {}
        return out

    def leader(self) -> str | None:
        """KaZoo's current leader among the live replicas (None before the first election)."""
        roles = self.roles()
        leaders = [r for r in self.live() if roles.get(r, {}).get("role") == "leader"]
        if not leaders:
            return None
        return max(leaders, key=lambda r: int(roles[r].get("epoch", 0)))

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
        return (self.leader() if self.mode == "kazoo" else None) or max(
            self.live(), key=lambda r: last_committed(self.checkpoint(r)) or -1
        )

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
            raise RuntimeError(f"no live {self.victim} replica to signal")
        self.event("replica_signalled", {"replica": replica, "signal": int(sig)})
        self.replicas[replica].sup.kill_group(sig)

    def fault_dir(self, base: Path) -> Path:
        """The victim replica's arm directory (its processes read ``base/<replica>``)."""
        replica = self.victim_replica()
        if replica is None:
            raise RuntimeError(f"no live {self.victim} replica to aim a fault at")
        return base / replica

    def pause(self, seconds: float) -> None:
        """SIGSTOP the victim replica for ``seconds`` (past KaZoo's lease: a zombie leader)."""
        replica = self.victim_replica()
        if replica is None:
            raise RuntimeError(f"no live {self.victim} replica to pause")
        self.event("replica_paused", {"replica": replica, "seconds": seconds})
        self.replicas[replica].sup.pause(seconds)

    def stop(self, timeout_s: float = 30.0) -> None:
        for sup in [*self._retired, *(rep.sup for rep in self.replicas.values())]:
            sup.stop(timeout_s)
        self._stop.set()  # after the replicas: the gate forwards what they wrote last
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()
        if self.generator is not None:
            self.generator.close()
            self.beats_written += self.generator.beats  # what the stopped generator wrote
            self.generator = None

    def status(self) -> ReplicationState:
        """Replicas, roles, lag between them, gate and heartbeats, as of now."""
        committed = {r: last_committed(self.checkpoint(r)) for r in self.replicas}
        known = [b for r, b in committed.items() if b is not None and r in self.live()]
        roles = self.roles()
        return ReplicationState(
            job=self.job.name,
            output_topic=self.output_topic,
            mode=self.mode,
            replicas={
                r: ReplicaState(
                    live=not rep.dead,
                    incarnation=rep.incarnation,
                    pid=rep.sup.pid,
                    committed_batch=committed[r],
                    role=roles[r].get("role") if self.mode == "kazoo" else None,
                    epoch=roles[r].get("epoch") if self.mode == "kazoo" else None,
                )
                for r, rep in self.replicas.items()
            },
            lag_batches=(max(known) - min(known)) if len(known) == len(self.replicas) else None,
            gate_forwarded=self.gate.forwarded if self.gate is not None else 0,
            gate_dropped=dict(self.gate.dropped) if self.gate is not None else {},
            heartbeats=self.generator.beats if self.generator is not None else None,
            replacements=tuple(self.replacements),
        )

    def __enter__(self) -> ReplicaSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
