"""Active replication (recovery_lib/ha/replication): two live replicas on identical
micro-batches, KaZoo (a leader publishes its cuts) or LiveRobin (both cut at the same
heartbeats); a plain consumer reads the gate's output. A dead replica is replaced from the
survivor's state; the job never restarts. A job whose contract declares nondeterminism or an
order-sensitive operator runs causal on both replicas, which share its determinant streams:
both compute the same outputs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recovery_lib.ha.replication.replica_set import ReplicaSet, replica_checkpoint_roots
from recovery_lib.ha.replication.strategies import (
    REPLICAS,
    LeaderBased,
    Leaderless,
    ReplicationStrategy,
)
from recovery_lib.job.options import input_topic
from recovery_lib.job.runner import job_options
from recovery_lib.job.spec import JobSpec, resolve_job
from recovery_lib.modes.base import GcNeeds, JobPlace, ModeRequest, RecoveryMode
from recovery_lib.modes.standby import replay_process_mode
from recovery_lib.runtime.checkpoint_gc import common_input_floor
from recovery_lib.runtime.launch import JobLaunch, ProcessMode
from recovery_lib.runtime.supervisor import ProcessSpec

if TYPE_CHECKING:
    from recovery_lib.metrics.store import MetricsStore
    from recovery_lib.runtime.supervision import JobSupervisor


class ReplicationMode(RecoveryMode):
    replicated = True

    def __init__(
        self, strategy: type[LeaderBased] | type[Leaderless], summary: str, outage_rank: int
    ) -> None:
        self.strategy = strategy
        self.name = strategy.name
        self.summary = summary
        self.leaderless = "leader" not in strategy.victims
        self.outage_rank = outage_rank
        kind = "leaderless" if self.leaderless else "leader-based"
        self.compute = f"two live replicas (2x compute), {kind}"

    writes_tables = False
    own_sink_refusal = (
        "replicas write through the project's release sink and the replica gate; declare it "
        "as a JobSpec whose build returns its output DataFrame (recovery_lib.job.output), or "
        "run it native or standby"
    )

    def process_mode(self, request: ModeRequest) -> ProcessMode:
        return replay_process_mode(request)

    def problem(self, request: ModeRequest) -> str | None:
        s = request.surface
        job = request.job
        if request.sink_mode != "release":
            return (
                f"replication {self.name} writes both replicas through the release sink and "
                f"the replica gate, whose output a plain consumer reads once: "
                f"{s.sink('release')}"
            )
        mode = self.process_mode(request)
        if mode.own_log:
            return (
                f"replication {self.name}: {s.process('native')} or causal (replication recovers)"
            )
        if job.contract.replay_needs_causal and not mode.causal:
            return (
                f"replication {self.name}: {s.process('causal')}: this job declares "
                "nondeterminism or an order-sensitive operator, and its replicas agree on its "
                "values through shared determinants"
            )
        other = sorted(set(request.failures) & {"executor-kill", "torn-write"})
        if other:
            return (
                f"replication {self.name} fails one replica: driver-kill, mid-write, task-retry, "
                f"write-retry, pause or pause-mid-write (--victim says which), not "
                f"{', '.join(other)}"
            )
        if request.cluster:
            return (
                f"replication {self.name} runs both replicas in local mode: the one-host "
                f"cluster cannot run two applications' executors at once. "
                f"{s.local[0].upper()}{s.local[1:]}"
            )
        options = request.options
        if options.victim is not None and options.victim not in self.strategy.victims:
            return f"--victim {options.victim!r}: choose one of {', '.join(self.strategy.victims)}"
        if options.heartbeat_period_s is not None and options.heartbeat_period_s <= 0:
            return "--heartbeat-period must be positive"
        if options.slow_delay_s and not self.leaderless:
            return "a slow partition's late heartbeats are LiveRobin's (--mode liverobin)"
        return None

    def supervisor(
        self,
        spec: ProcessSpec,
        request: ModeRequest,
        workdir: Path,
        store: MetricsStore | None,
        run_id: str | None,
    ) -> JobSupervisor:
        options = request.options
        return ReplicaSet(
            spec,
            self.strategy(),
            workdir,
            store,
            run_id,
            heartbeat_period_s=options.heartbeat_period_s,
            victim=options.victim,
            replace_after_s=options.replace_after_s,
            slow_delay_s=options.slow_delay_s,
            input_topics=launch_input_topics(request.job, spec.launch),
            settings=request.settings,
        )

    def checkpoint_roots(self, workdir: Path) -> list[Path]:
        """Each replica's (replica a's stands for the job)."""
        return replica_checkpoint_roots(self.supervisor_home(workdir))

    def gc_needs(self, place: JobPlace, keep_batches: int, input_records: bool) -> GcNeeds:
        """Each replica's checkpoint alone, and input records only below what both replicas'
        oldest kept batches start at (a replacement restarts from either)."""

        needs = super().gc_needs(place, keep_batches, input_records)
        if not input_records:
            return needs
        floor = common_input_floor(needs.checkpoints, keep_batches)
        return GcNeeds(needs.checkpoints, input_floor=floor, input_deletable=floor is not None)


def launch_input_topics(job: JobSpec, launch: JobLaunch | None) -> list[str]:
    """The topics a launch of ``job`` reads its inputs from."""
    if launch is None:
        return []
    prefix = job.default_prefix if launch.prefix is None else launch.prefix
    return [input_topic(name, prefix, launch.inputs) for name in job.inputs]


def replica_set_for_job(
    job_ref: str,
    strategy: str | ReplicationStrategy,
    home: str | Path,
    prefix: str,
    output_topic: str,
    inputs: Mapping[str, str] | None = None,
    partitions: int | None = None,
    base: JobLaunch | None = None,
    **kw: Any,
) -> ReplicaSet:
    """A replica set of job ``job_ref`` (module:attr or a name of jobs/) on topics
    ``<prefix>.<input>`` (or ``inputs``), writing ``output_topic``; ``base``: a launch whose
    other settings (params, process mode, run id ...) the replicas keep. The launch is checked
    against the job before any process starts."""

    job = resolve_job(job_ref)
    launch = (base or JobLaunch(job.ref)).replace(
        job=job.ref,
        name=job.name,
        prefix=prefix,
        inputs=dict(inputs or {}),
        output_topic=output_topic,
        partitions=partitions,
    )
    job_options(job, launch.replace(sink_mode="release"))  # raises saying what does not suit
    return ReplicaSet(
        ProcessSpec.for_job(launch),
        strategy,
        home,
        input_topics=launch_input_topics(job, launch),
        **kw,
    )


__all__ = ["REPLICAS", "ReplicationMode", "launch_input_topics", "replica_set_for_job"]
