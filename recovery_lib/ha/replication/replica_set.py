"""Two live replicas of one job: two supervised Spark applications on the same input, each with
its own checkpoint, both writing the output topic with identical output ids.

Everything of a replica set lives under ``<home>``:

    replicas/<r>/             replica r's process log, heartbeat (its lease) and role
    replicas/<r>/checkpoints  its Spark checkpoint
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
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from recovery_lib.ha.replication.gate import REPLICA_HEADERS_HOOK, ReplicaGate, raw_topic
from recovery_lib.kafka.clients import client_config
from recovery_lib.metrics.store import MetricsStore
from recovery_lib.runtime.supervisor import ProcessSpec, Supervisor

ReplicationMode = Literal["kazoo", "liverobin"]
REPLICATION_MODES: tuple[str, ...] = ("kazoo", "liverobin")
REPLICAS = ("a", "b")


def order_topic(output_topic: str) -> str:
    return f"{output_topic}.order"


def heartbeat_index_topic(output_topic: str) -> str:
    return f"{output_topic}.heartbeats"


class ReplicaSet:
    def __init__(
        self,
        job_ref: str,
        mode: ReplicationMode,
        home: str | Path,
        prefix: str,
        output_topic: str,
        inputs: Mapping[str, str] | None = None,
        job_args: list[str] | None = None,
        kafka: Mapping[str, str] | None = None,
        store: MetricsStore | None = None,
        run_id: str | None = None,
        heartbeat_period_s: float | None = None,
        partitions: int | None = None,
    ) -> None:
        from recovery_lib.job.spec import resolve_job
        from recovery_lib.settings import get_settings

        if mode not in REPLICATION_MODES:
            raise ValueError(f"replication mode {mode!r}: choose one of {REPLICATION_MODES}")
        self.job = resolve_job(job_ref)
        self.mode = mode
        self.home = Path(home)
        self.prefix = prefix
        self.inputs = dict(inputs or {})
        self.job_args = list(job_args or [])
        self.output_topic = output_topic
        self.partitions = partitions
        self.kafka = dict(kafka or client_config())
        self.store, self.run_id = store, run_id
        self.heartbeat_period_s = (
            heartbeat_period_s or get_settings().replication_heartbeat_period_s
        )
        self.supervisors = {r: self._supervisor(r) for r in REPLICAS}
        self.generator: Any = None
        self.gate: Any = None
        self.generator_errors: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.failed: dict[str, dict[str, Any]] = {}
        self._said_single = False

    # -- layout ------------------------------------------------------------------------------

    @property
    def input_topics(self) -> list[str]:
        from recovery_lib.job.options import input_topic

        return [input_topic(name, self.prefix, self.inputs) for name in self.job.inputs]

    def replica_dir(self, replica: str) -> Path:
        return self.home / "replicas" / replica

    def checkpoint(self, replica: str) -> Path:
        """The replica's query checkpoint (the job's subdirectory of its --checkpoints)."""
        return self.replica_dir(replica) / "checkpoints" / self.job.name

    def source_options(self, replica: str) -> dict[str, str]:
        if self.mode == "kazoo":
            from recovery_lib.ha.replication.kazoo import KAZOO_POLICY

            return {
                "cutPolicy": KAZOO_POLICY,
                "replicaId": replica,
                "epochStore": str(self.home / "epochs"),
                "leaseDir": str(self.home / "replicas"),
                "replicaCheckpoint": str(self.checkpoint(replica)),
                "orderTopic": order_topic(self.output_topic),
            }
        from recovery_lib.ha.replication.liverobin import LIVEROBIN_POLICY

        return {
            "cutPolicy": LIVEROBIN_POLICY,
            "heartbeatIndex": heartbeat_index_topic(self.output_topic),
        }

    def args(self, replica: str) -> list[str]:
        args = [
            *self.job_args,
            "--prefix",
            self.prefix,
            *[arg for name, topic in self.inputs.items() for arg in ("--input", f"{name}={topic}")],
            "--checkpoints",
            str(self.replica_dir(replica) / "checkpoints"),
            "--output-topic",
            raw_topic(self.output_topic),
            "--sink-mode",
            "release",
            "--sink-option",
            f"recordHeaders={REPLICA_HEADERS_HOOK}",
            "--sink-option",
            f"replicaId={replica}",
        ]
        if self.partitions:
            args += ["--partitions", str(self.partitions)]
        for key, value in self.source_options(replica).items():
            args += ["--source-option", f"{key}={value}"]
        if self.mode == "kazoo":  # a replica writes batch b only as the leader published it
            from recovery_lib.ha.replication.kazoo import KAZOO_GUARD

            args += ["--sink-option", f"writeGuard={KAZOO_GUARD}"]
            for key in ("replicaCheckpoint", "orderTopic"):
                args += ["--sink-option", f"{key}={self.source_options(replica)[key]}"]
        return args

    def _supervisor(self, replica: str) -> Supervisor:
        process = ProcessSpec.for_job(self.job.ref, self.job.name, self.args(replica))
        return Supervisor(process, self.replica_dir(replica), self.store, self.run_id)

    # -- lifecycle ---------------------------------------------------------------------------

    def create_topics(self) -> None:
        from recovery_lib.ha.replication.control_topic import ControlTopic
        from recovery_lib.io.sinks.modes import output_partitions
        from recovery_lib.kafka.admin import TopicAdmin
        from recovery_lib.settings import get_settings

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
        for sup in self.supervisors.values():
            sup.start()

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
        )

        def failed(exc: Exception) -> None:
            self.generator_errors.append(str(exc))

        self._thread(self.generator.run, "heartbeats", failed)

    def wait_ready(self, timeout_s: float = 240.0) -> None:
        for sup in self.supervisors.values():
            sup.wait_ready(timeout_s)

    def tick(self) -> list[str]:
        """One supervision step: a replica that died is stopped for good (it is replaced from
        the survivor's state, never restarted from its own checkpoint, which may hold a
        batch the survivor cut differently) and recorded; returns the live replicas."""
        from recovery_lib.metrics.store import now_ms

        for replica, sup in self.supervisors.items():
            if replica in self.failed:
                continue
            cause = sup.check()
            if cause is not None:
                sup.kill_group(signal.SIGKILL)
                self.failed[replica] = {"cause": cause, "detected_ms": now_ms()}
                sup.event("replica_failed", {"replica": replica, "cause": cause})
        live = [r for r in self.supervisors if r not in self.failed]
        if len(live) < len(self.supervisors) and not self._said_single:
            self._said_single = True
            print(f"replica set {self.output_topic}: running on one replica ({live})")
        return live

    def roles(self) -> dict[str, dict[str, Any]]:
        """Each replica's last decision (KaZoo: role, epoch, batch); {} before the first."""
        import json

        from recovery_lib.ha.replication.kazoo import role_path

        out: dict[str, dict[str, Any]] = {}
        for replica in REPLICAS:
            try:
                out[replica] = json.loads(role_path(self.home / "replicas", replica).read_text())
            except (OSError, ValueError):
                out[replica] = {}
        return out

    def stop(self) -> None:
        for sup in self.supervisors.values():
            sup.stop()
        self._stop.set()  # after the replicas: the gate forwards what they wrote last
        for thread in self._threads:
            thread.join(timeout=30)
        if self.generator is not None:
            self.generator.close()

    def __enter__(self) -> ReplicaSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
