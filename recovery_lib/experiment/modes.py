"""Recovery modes of an experiment's faulty run, behind one small interface.

A mode says what the job process runs in (native Spark or with causal logging) and which
supervisor recovers it. A new mode adds a class here and an entry in ``MODES``. How outputs
reach consumers is the sink's mode (io/sinks/modes.py), chosen beside the recovery mode.
Checkpoint protocols run pipelines of several jobs (recovery_lib/pipeline), not one job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from recovery_lib.ha.replication.replica_set import REPLICATION_MODES, ReplicaSet
from recovery_lib.ha.standby.pair import StandbyPair
from recovery_lib.metrics.store import MetricsStore
from recovery_lib.runtime.supervision import JobSupervisor
from recovery_lib.runtime.supervisor import ProcessSpec, Supervisor
from recovery_lib.verify.contract import ConsistencyContract


@dataclass(frozen=True)
class ModeOptions:
    """What an experiment tells the mode's supervisor beyond the job's process (modes ignore
    what is not theirs)."""

    victim: str | None = None  # replication: which replica a failure hits (leader, follower, a, b)
    heartbeat_period_s: float | None = None  # LiveRobin's batch interval
    replace_after_s: float | None = None  # replication: when a dead replica is replaced
    slow_delay_s: float = 0.0  # LiveRobin: heartbeats of one input partition come this late


class RecoveryMode(Protocol):
    """Called by the experiment runner once per run: ``job_mode`` for the job's ``--mode``
    argument, then ``supervisor`` for the object that starts, watches and recovers it."""

    name: str

    def job_mode(self, contract: ConsistencyContract) -> str: ...

    def supervisor(
        self,
        spec: ProcessSpec,
        workdir: Path,
        store: MetricsStore,
        run_id: str,
        options: ModeOptions = ModeOptions(),
    ) -> JobSupervisor: ...


class NativeMode:
    """Native Spark recovery: restart the same job on the same checkpoint."""

    name = "native"

    def job_mode(self, contract: ConsistencyContract) -> str:
        return "native"

    def supervisor(
        self,
        spec: ProcessSpec,
        workdir: Path,
        store: MetricsStore,
        run_id: str,
        options: ModeOptions = ModeOptions(),
    ) -> JobSupervisor:
        return Supervisor(spec, workdir, store, run_id)


class CausalMode(NativeMode):
    """Causal logging (recovery_lib.causal): the job logs its nondeterminism and a restart
    replays it; the restart itself is native."""

    name = "causal"

    def job_mode(self, contract: ConsistencyContract) -> str:
        return "causal"


class CECMode(NativeMode):
    """Continuous eventual checkpointing (recovery_lib/cec) for a job whose build returns a CEC
    aggregate: its windows live in the driver and are recovered from the output log; the
    restart itself is native. (The reference run computes the same aggregate on Spark's state
    store: an independent implementation.)"""

    name = "cec"

    def job_mode(self, contract: ConsistencyContract) -> str:
        return "cec"


class StandbyMode:
    """A warm standby fed by shipped checkpoints takes over when the primary's lease expires;
    the old primary is fenced (recovery_lib/ha/standby). A takeover re-executes batches, so a job
    whose contract declares nondeterminism or an order-sensitive operator runs causal."""

    name = "standby"

    def job_mode(self, contract: ConsistencyContract) -> str:
        return "causal" if contract.replay_needs_causal else "native"

    def supervisor(
        self,
        spec: ProcessSpec,
        workdir: Path,
        store: MetricsStore,
        run_id: str,
        options: ModeOptions = ModeOptions(),
    ) -> JobSupervisor:
        return StandbyPair(spec, workdir, store, run_id)


class ReplicationMode:
    """Active replication (recovery_lib/ha/replication): two live replicas on identical
    micro-batches, KaZoo (a leader publishes its cuts) or LiveRobin (both cut at the same
    heartbeats); a plain consumer reads the gate's output. A dead replica is replaced from the
    survivor's state; the job never restarts. A job whose contract declares nondeterminism or an
    order-sensitive operator runs causal on both replicas, which share its determinant
    streams (ha/replication/shared_determinants.py): both compute the same outputs."""

    def __init__(self, name: str) -> None:
        self.name = name

    def job_mode(self, contract: ConsistencyContract) -> str:
        return "causal" if contract.replay_needs_causal else "native"

    def supervisor(
        self,
        spec: ProcessSpec,
        workdir: Path,
        store: MetricsStore,
        run_id: str,
        options: ModeOptions = ModeOptions(),
    ) -> JobSupervisor:
        return ReplicaSet(
            spec,
            self.name,  # type: ignore[arg-type]
            workdir,
            store,
            run_id,
            heartbeat_period_s=options.heartbeat_period_s,
            victim=options.victim,
            replace_after_s=options.replace_after_s,
            slow_delay_s=options.slow_delay_s,
        )


MODES: dict[str, RecoveryMode] = {
    m.name: m
    for m in (
        NativeMode(),
        CausalMode(),
        StandbyMode(),
        CECMode(),
        ReplicationMode("kazoo"),
        ReplicationMode("liverobin"),
    )
}
REPLICATION = frozenset(REPLICATION_MODES)
REFERENCE_MODE: RecoveryMode = MODES["native"]  # the failure-free run
