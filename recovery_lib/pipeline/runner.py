"""Run a pipeline: one supervised process per stage (or one Spark application hosting every
stage as a query: placement ``shared``, pipeline/host.py), the protocol's coordinator (COOR),
and recovery by the protocol's plan when stages die.

Everything of a pipeline lives under ``<home>``:

    checkpoints/<stage>/<job>   each stage's Spark checkpoint
    protocol/                   the protocol's records (protocols/stage_log.py)
    stages/<stage>/             each stage's process log and heartbeat

Recovery after stage deaths: the protocol's plan names the stages to roll back and where;
live ones among them are stopped, every planned checkpoint is rewound (runtime/rewind.py, or
moved aside entirely to start from the beginning), and the stages restart following their
moved offset-log tail so the re-run batches keep their boundaries and output ids; the release
sink then drops what was already written. Stages the plan does not name keep running.
"""

from __future__ import annotations

import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery_lib.errors import JobFailed
from recovery_lib.io.sinks.modes import output_partitions
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.pipeline.host import HostedStage, StageHost
from recovery_lib.pipeline.spec import PipelineSpec, StageSpec
from recovery_lib.protocols.base import PipelineView, RecoveryPlan, protocol
from recovery_lib.protocols.checkpoints import INITIAL, Stage
from recovery_lib.protocols.coordinated import inject_epoch, last_epoch
from recovery_lib.protocols.hooks import topic_ends
from recovery_lib.protocols.recovery_line import invalid_checkpoints
from recovery_lib.runtime.checkpoint import last_committed, source_offsets
from recovery_lib.runtime.launch import JobLaunch
from recovery_lib.runtime.rewind import rewind
from recovery_lib.runtime.supervisor import ProcessSpec, Supervisor
from recovery_lib.settings import get_settings


@dataclass
class Recovery:
    failed: list[str]
    causes: dict[str, str]
    detected_ms: int
    plan: RecoveryPlan
    ready_ms: dict[str, int] = field(default_factory=dict)

    @property
    def restart_time_s(self) -> float | None:
        """Failure detected -> every restarted stage serving again."""
        if not self.plan.restart or set(self.ready_ms) < self.plan.restart:
            return None
        return (max(self.ready_ms.values()) - self.detected_ms) / 1000


def stage_checkpoint(home: Path, stage: StageSpec) -> Path:
    """The Spark checkpoint of ``stage`` of the pipeline run living in ``home``."""
    return Path(home) / "checkpoints" / stage.name / stage.spec().name


class PipelineRun:
    def __init__(
        self,
        spec: PipelineSpec,
        home: str | Path,
        kafka: dict[str, str] | None = None,
        input_prefix: str = "nexmark",
        store: MetricsStore | None = None,
        run_id: str | None = None,
        max_recoveries: int = 5,
        metrics_path: str | Path | None = None,
    ) -> None:
        self.spec = spec
        self.home = Path(home)
        self.kafka = kafka or client_config()
        self.input_prefix = input_prefix
        self.store = store
        self.run_id = run_id
        self.max_recoveries = max_recoveries
        self.metrics_path = metrics_path
        self.protocol = protocol(spec.protocol)
        self.view = self._view()
        # shared: every stage a query of one Spark application (pipeline/host.py)
        self.placement = spec.placement or get_settings().pipeline_placement
        self.host = (
            StageHost(self.home, f"pipeline_{spec.name}") if self.placement == "shared" else None
        )
        self.supervisors: dict[str, Supervisor | HostedStage] = {
            s.name: self._supervisor(s) for s in spec.stages
        }
        self.recoveries: list[Recovery] = []
        self._coordinator: threading.Thread | None = None
        self._stop = threading.Event()
        self.epochs_injected = 0

    # -- layout ------------------------------------------------------------------------------

    def checkpoint(self, stage: StageSpec) -> Path:
        return stage_checkpoint(self.home, stage)

    def _view(self) -> PipelineView:
        stages = []
        for stage in self.spec.stages:
            stages.append(
                Stage(
                    stage.name,
                    reads=tuple(self.spec.input_topics(stage, self.input_prefix).values()),
                    writes=(self.spec.output_topic(stage),),
                    # Every stage re-runs deterministically: native if its job is, causal
                    # (logged nondeterminism) otherwise; its release sink drops re-sent copies.
                    replays_outputs=True,
                )
            )
        return PipelineView(
            stages=tuple(stages),
            checkpoints={s.name: self.checkpoint(s) for s in self.spec.stages},
            protocol_dir=self.home / "protocol",
            kafka=dict(self.kafka),
            checkpoint_interval_ms=int(self.spec.checkpoint_interval_s * 1000),
            strict=self.spec.rollback == "strict",
            unaligned=frozenset(self.spec.unaligned),
        )

    def launch(self, stage: StageSpec) -> JobLaunch:
        """A stage's job: its checkpoint, its topics, the release sink, the protocol's cut
        policy and commit hook; a nondeterministic or order-sensitive job runs causal (a
        rollback re-executes its batches)."""
        job = stage.spec()
        launch = JobLaunch(
            job=job.ref,
            name=stage.name,
            prefix=self.spec.name,
            inputs=self.spec.input_topics(stage, self.input_prefix),
            params=dict(stage.params),
            partitions=stage.partitions,
            checkpoints=str(self.home / "checkpoints" / stage.name),
            output_topic=self.spec.output_topic(stage),
            sink_mode="release",
            trigger_interval=stage.trigger_interval,
            causal=job.contract.replay_needs_causal,
            source_options=self.protocol.source_options(self.view, stage.name),
            sink_options=self.protocol.sink_options(self.view, stage.name),
        )
        if self.metrics_path is not None:  # each stage's micro-batches under <run>-<stage>
            launch = launch.replace(
                metrics=str(self.metrics_path),
                run_id=f"{self.run_id or self.spec.name}-{stage.name}",
            )
        return launch

    def _supervisor(self, stage: StageSpec) -> Supervisor | HostedStage:
        process = ProcessSpec.for_job(self.launch(stage))
        workdir = self.home / "stages" / stage.name
        if self.host is not None:
            return HostedStage(self.host, process, workdir, self.store, self.run_id)
        return Supervisor(process, workdir, self.store, self.run_id)

    def event(self, kind: str, detail: dict[str, Any]) -> None:
        if self.store is not None and self.run_id is not None:
            self.store.event(self.run_id, kind, {"pipeline": self.spec.name, **detail})

    # -- lifecycle ---------------------------------------------------------------------------

    def create_topics(self) -> None:
        admin = TopicAdmin(self.kafka)
        for stage in self.spec.stages:  # the release sink writes output task p to partition p
            admin.create(
                self.spec.output_topic(stage), output_partitions("release", stage.partitions)
            )
        admin.create(f"{self.spec.name}.deadletter", 1)

    def start(self) -> None:
        self.create_topics()
        for sup in self.supervisors.values():
            sup.start()
        if self.protocol.coordinated:
            self._coordinator = threading.Thread(
                target=self._coordinate, name=f"coordinator-{self.spec.name}", daemon=True
            )
            self._coordinator.start()

    def wait_ready(self, timeout_s: float = 240.0) -> None:
        for sup in self.supervisors.values():
            sup.wait_ready(timeout_s)

    def caught_up(self) -> bool:
        """Every stage's newest committed batch read its input topics to their ends (on a
        cycle, the loop's fixpoint: nothing left for any stage to carry)."""

        for stage in self.spec.stages:
            checkpoint = self.view.checkpoints[stage.name]
            batch = last_committed(checkpoint)
            if batch is None:
                return False
            read = source_offsets(checkpoint, batch)
            for topic in self.spec.input_topics(stage, self.input_prefix).values():
                done = read.get(topic, {})
                ends = topic_ends(dict(self.kafka), topic)
                if any(int(done.get(str(p), 0)) < end for p, end in ends.items()):
                    return False
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._coordinator is not None:
            self._coordinator.join(timeout=10)
        for sup in self.supervisors.values():
            sup.stop()
        if self.host is not None:
            self.host.stop()

    def __enter__(self) -> PipelineRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- COOR's coordinator ------------------------------------------------------------------

    def _coordinate(self) -> None:
        epoch = last_epoch(self.view.protocol_dir)
        sources = self.view.source_topics()
        while not self._stop.wait(self.spec.marker_interval_s):
            epoch += 1
            ends = {t: topic_ends(dict(self.kafka), t) for t in sources}
            inject_epoch(self.view.protocol_dir, ends, epoch)
            self.epochs_injected += 1

    # -- supervision -------------------------------------------------------------------------

    def tick(self) -> Recovery | None:
        """Notice restarted stages being ready; on deaths, recover by the protocol's plan."""
        for recovery in self.recoveries:
            for stage in recovery.plan.restart - set(recovery.ready_ms):
                if self.supervisors[stage].is_ready():
                    recovery.ready_ms[stage] = now_ms()
                    if set(recovery.ready_ms) >= recovery.plan.restart:
                        self.event("pipeline_ready", {"restart_time_s": recovery.restart_time_s})
        causes = {name: c for name, sup in self.supervisors.items() if (c := sup.check())}
        if not causes:
            return None
        return self.recover(causes)

    def recover(self, causes: dict[str, str]) -> Recovery:
        detected = now_ms()
        if len(self.recoveries) >= self.max_recoveries:
            raise JobFailed(
                f"pipeline {self.spec.name}: stages {sorted(causes)} died and the recovery "
                f"budget ({self.max_recoveries}) is spent; see {self.home / 'stages'}"
            )
        failed = set(causes)
        host_pid = self.host.pid if self.host is not None else None
        for name in failed:
            self.supervisors[name].kill_group(signal.SIGKILL)
        if self.host is not None and self.host.gone_since(host_pid):
            # The host died (or was killed, not answering) while these stages were being
            # stopped: every stage it ran died with it, and the plan must know.
            for name, sup in self.supervisors.items():
                if name not in failed:
                    causes[name] = f"host: died during the recovery of {', '.join(sorted(failed))}"
                    sup.kill_group(signal.SIGKILL)
            failed = set(causes)
        plan = self.protocol.plan(self.view, failed)
        recovery = Recovery(sorted(failed), causes, detected, plan)
        self.recoveries.append(recovery)
        self.event(
            "pipeline_recovery",
            {
                "protocol": self.spec.protocol,
                "failed": sorted(failed),
                "causes": causes,
                "rewind": plan.rewind,
                "restart": sorted(plan.restart),
                "local": plan.local,
                **{k: v for k, v in plan.detail.items() if k != "failed"},
            },
        )
        for name in sorted(plan.restart - failed):
            self.supervisors[name].kill_group(signal.SIGKILL)
        for name, batch in sorted(plan.rewind.items()):
            tail = self._rewind(name, batch)
            sup = self.supervisors[name]
            if tail is not None:  # re-run the rewound batches as they were cut
                assert sup.spec.launch is not None
                sup.spec = sup.spec.with_launch(sup.spec.launch.replace(follow_log=str(tail)))
        for name in sorted(plan.restart):
            self.supervisors[name].start()
        return recovery

    def _rewind(self, stage: str, batch: int) -> Path | None:
        """Rewind ``stage``'s checkpoint to ``batch`` (INITIAL: move it all aside); returns the
        moved offset-log tail to follow, if any."""

        checkpoint = self.view.checkpoints[stage]
        if batch == INITIAL:
            if not checkpoint.exists():
                return None
            target = checkpoint.with_name(checkpoint.name + ".rewound") / (
                f"{time.strftime('%Y%m%dT%H%M%S')}-reset"
            )
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(checkpoint), str(target))
            tail = target / "offsets"
        else:
            moved = rewind(checkpoint, batch).moved_to
            tail = Path(moved) / "offsets" if moved else None
        self.event("stage_rewound", {"stage": stage, "to_batch": batch, "tail": str(tail)})
        return tail if tail is not None and tail.exists() else None


def needed_from(run: PipelineRun) -> dict[str, int]:
    """Per stage, the oldest batch a recovery can roll it back to (INITIAL: from scratch)."""
    return run.protocol.needed_from(run.view)


def snapshot(run: PipelineRun) -> dict[str, Any]:
    """What the dashboard shows of a pipeline: per stage its last commit, its checkpoints
    and where the recovery line (every stage failed: the oldest any recovery can need) puts
    it; invalid checkpoints under the recovery rule and the strict rule; COOR's newest
    complete epoch; the recoveries so far."""

    view = run.view
    graph = view.graph()
    live = {name for name, sup in run.supervisors.items() if sup.is_ready()}
    current = view.current(live)
    line = needed_from(run)
    checkpoints = list(graph.checkpoints())
    stages = []
    for stage in view.stages:
        own = [c for c in checkpoints if c.stage == stage.name]
        stages.append(
            {
                "stage": stage.name,
                "serving": stage.name in live,
                "last_commit": last_committed(view.checkpoints[stage.name]),
                "checkpoints": len(own),
                "forced": sum(1 for c in own if c.forced),
                "line": line.get(stage.name),
            }
        )
    out: dict[str, Any] = {
        "pipeline": run.spec.name,
        "protocol": run.spec.protocol,
        "placement": run.placement,
        "stages": stages,
        "checkpoints": len(checkpoints),
        "invalid": len(invalid_checkpoints(graph, view.strict, current)),
        "invalid_strict": len(invalid_checkpoints(graph, True, current)),
        "recoveries": len(run.recoveries),
    }
    if run.protocol.coordinated:
        from recovery_lib.protocols.coordinated import global_checkpoint

        found = global_checkpoint(view.protocol_dir, view.checkpoints)
        out["epoch"] = found[0] if found else None
    return out
