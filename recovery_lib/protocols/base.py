"""One interface for every checkpoint protocol of a pipeline (CheckMate's COOR, UNC, CIC).

A protocol tells each stage's query how to cut and commit (source and sink options naming
its hooks) and, after failures, which stages roll back to which checkpoint. The pipeline
runner (recovery_lib/pipeline) does the rest: processes, rewinds, restarts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery_lib.errors import ConfigurationError
from recovery_lib.protocols.checkpoints import INITIAL, CheckpointGraph, Stage, StageCheckpoint
from recovery_lib.protocols.coordinated import global_checkpoint
from recovery_lib.protocols.hooks import COMMIT_HOOK, RECORD_HEADERS, topic_ends
from recovery_lib.protocols.recovery_line import invalid_checkpoints, recovery_line
from recovery_lib.protocols.stage_log import stage_checkpoints, volatile_state
from recovery_lib.runtime.checkpoint import last_committed


@dataclass(frozen=True)
class PipelineView:
    """What a protocol knows of a pipeline: its stages in order (the first reads the sources),
    their checkpoints, where the protocol keeps its files, and how to reach Kafka."""

    stages: tuple[Stage, ...]
    checkpoints: Mapping[str, Path]
    protocol_dir: Path
    kafka: Mapping[str, str] = field(repr=False)  # holds SASL passwords: not shown
    checkpoint_interval_ms: int = 0  # UNC / CIC: 0 = every batch is a checkpoint
    strict: bool = False  # UNC / CIC: roll back receivers of orphans even from replaying senders
    unaligned: frozenset[str] = frozenset()  # COOR: feedback topics not aligned on

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def index(self, name: str) -> int:
        return [s.name for s in self.stages].index(name)

    @property
    def writers(self) -> dict[str, str]:
        return {t: s.name for s in self.stages for t in s.writes}

    def source_topics(self) -> list[str]:
        """Topics read by some stage and written by none: the pipeline's inputs."""
        writers = self.writers
        return sorted({t for s in self.stages for t in s.reads if t not in writers})

    def graph(self) -> CheckpointGraph:
        return CheckpointGraph(
            self.stages,
            {
                s.name: stage_checkpoints(self.protocol_dir, s.name, self.checkpoints[s.name])
                for s in self.stages
            },
        )

    def current(self, live: set[str]) -> dict[str, StageCheckpoint]:
        """Live stages' present positions (offset log + their output topics' ends)."""
        kafka = dict(self.kafka)
        return {
            s.name: volatile_state(
                s,
                self.checkpoints[s.name],
                {t: topic_ends(kafka, t) for t in s.writes},
            )
            for s in self.stages
            if s.name in live
        }


@dataclass
class RecoveryPlan:
    """Stages to roll back: stage -> the batch to rewind to (INITIAL: from the beginning).
    A failed stage absent here restarts where Spark left it (its last commit)."""

    rewind: dict[str, int] = field(default_factory=dict)
    restart: set[str] = field(default_factory=set)  # failed or rolled back: (re)started
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.restart <= set(self.detail.get("failed", ()))


class CheckpointProtocol(ABC):
    name: str = ""
    cut_policy: str = "free"
    # COOR: a coordinator writes markers into the sources and stages align on them; the
    # pipeline's recovery point is the newest complete global checkpoint (an epoch).
    coordinated = False
    # CIC: the commit hook keeps the clocks the cut policy computed for each batch.
    keeps_clocks = False
    baseline = False  # Spark alone, no protocol: what the others are normalised to

    def source_options(self, view: PipelineView, stage: str) -> dict[str, str]:
        """Options every input source of ``stage`` gets."""
        return {
            "cutPolicy": self.cut_policy,
            "protocolDir": str(view.protocol_dir),
            "protocolStage": stage,
            "stageCheckpoint": str(view.checkpoints[stage]),
        }

    def sink_options(self, view: PipelineView, stage: str) -> dict[str, str]:
        """Options the sink of ``stage`` gets."""
        return {
            "commitHook": COMMIT_HOOK,
            "protocol": self.name,
            # What the commit hook does beside recording the checkpoint (protocols/hooks.py).
            "checkpointOnEpochs": str(self.coordinated).lower(),
            "keepClocks": str(self.keeps_clocks).lower(),
            "protocolDir": str(view.protocol_dir),
            "protocolStage": stage,
            "stageCheckpoint": str(view.checkpoints[stage]),
            "checkpointIntervalMs": str(view.checkpoint_interval_ms),
        }

    @abstractmethod
    def plan(self, view: PipelineView, failed: set[str]) -> RecoveryPlan:
        """Which stages roll back where after ``failed`` died."""

    def needed_from(self, view: PipelineView) -> dict[str, int]:
        """Per stage, the oldest batch a recovery can roll it back to (INITIAL: from scratch):
        the recovery line of every stage failed."""
        names = {s.name for s in view.stages}
        line = recovery_line(view.graph(), names, strict=view.strict)
        return {n: p.index for n, p in line.points.items()}


class Uncoordinated(CheckpointProtocol):
    """UNC: stages checkpoint on their own; recovery runs rollback propagation to the recovery
    line over the checkpoint graph and rewinds every stage the line moved."""

    name = "unc"

    def plan(self, view: PipelineView, failed: set[str]) -> RecoveryPlan:
        graph = view.graph()
        live = {s.name for s in view.stages} - failed
        current = view.current(live)
        line = recovery_line(graph, failed, current, strict=view.strict)
        plan = RecoveryPlan(detail={"failed": sorted(failed), "steps": line.steps})
        for stage, index in line.rolled_back.items():
            plan.restart.add(stage)
            last = last_commit(view, stage)
            if index != last:  # the failed stage at its last commit: Spark resumes there
                plan.rewind[stage] = index
        plan.detail["line"] = {s: p.index for s, p in line.points.items()}
        # What the paper's rule (every sender's later messages are orphans) would roll back.
        strict = line if view.strict else recovery_line(graph, failed, current, strict=True)
        plan.detail["strict_rollback"] = sorted(strict.rolled_back)
        # Invalid under the rule recovery follows, and under the paper's (strict) rule.
        plan.detail["invalid"] = len(invalid_checkpoints(graph, view.strict, current))
        plan.detail["invalid_strict"] = len(invalid_checkpoints(graph, True, current))
        plan.detail["checkpoints"] = sum(1 for _ in graph.checkpoints())
        return plan


class CommunicationInduced(Uncoordinated):
    """CIC (HMNR): UNC's recovery; during the run the clocks travel on every record and the
    forced cut breaks Z-cycles (communication_induced.py)."""

    name = "cic"
    cut_policy = "recovery_lib.protocols.communication_induced:ForcedCut"
    keeps_clocks = True

    def source_options(self, view: PipelineView, stage: str) -> dict[str, str]:
        return {
            **super().source_options(view, stage),
            "protocolStageIndex": str(view.index(stage)),
            "protocolStages": str(len(view.stages)),
        }

    def sink_options(self, view: PipelineView, stage: str) -> dict[str, str]:
        writes = set(view.stage(stage).writes)
        receivers = [i for i, s in enumerate(view.stages) if writes & set(s.reads)]
        return {
            **super().sink_options(view, stage),
            "recordHeaders": RECORD_HEADERS,
            "protocolReceivers": ",".join(str(i) for i in receivers),
        }


class Coordinated(CheckpointProtocol):
    """COOR: epochs by markers, aligned cuts; recovery rolls every stage back to the newest
    epoch all of them committed (coordinated.py)."""

    name = "coor"
    coordinated = True

    def needed_from(self, view: PipelineView) -> dict[str, int]:
        """The newest complete global checkpoint: every stage rolls back to it together."""

        found = global_checkpoint(view.protocol_dir, view.checkpoints)
        return dict(found[1]) if found else dict.fromkeys((s.name for s in view.stages), INITIAL)

    cut_policy = "recovery_lib.protocols.coordinated:MarkerCut"

    def aligned(self, view: PipelineView, stage: str) -> list[str]:
        return [t for t in view.stage(stage).reads if t not in view.unaligned]

    def source_options(self, view: PipelineView, stage: str) -> dict[str, str]:
        return {**super().source_options(view, stage), "markerTopics": self._topics(view, stage)}

    def sink_options(self, view: PipelineView, stage: str) -> dict[str, str]:
        return {**super().sink_options(view, stage), "markerTopics": self._topics(view, stage)}

    def _topics(self, view: PipelineView, stage: str) -> str:
        return ",".join(self.aligned(view, stage))

    def plan(self, view: PipelineView, failed: set[str]) -> RecoveryPlan:
        found = global_checkpoint(view.protocol_dir, view.checkpoints)
        plan = RecoveryPlan(detail={"failed": sorted(failed)})
        plan.detail["epoch"] = found[0] if found else None
        for stage in view.stages:
            target = found[1][stage.name] if found else INITIAL
            plan.restart.add(stage.name)
            if target != last_commit(view, stage.name):
                plan.rewind[stage.name] = target
        return plan


class SparkOnly(CheckpointProtocol):
    """No protocol: what a chain of Spark queries does today. Each query checkpoints alone
    and a failed one restarts from its own last commit; nobody computes a recovery line. The
    baseline the others are normalised to (its stages run no protocol hook)."""

    name = "none"
    baseline = True

    def source_options(self, view: PipelineView, stage: str) -> dict[str, str]:
        return {}

    def sink_options(self, view: PipelineView, stage: str) -> dict[str, str]:
        return {}

    def plan(self, view: PipelineView, failed: set[str]) -> RecoveryPlan:
        return RecoveryPlan(restart=set(failed), detail={"failed": sorted(failed)})

    def needed_from(self, view: PipelineView) -> dict[str, int]:
        """Each stage's own last commit: nobody computes a recovery line."""
        return {s.name: last_commit(view, s.name) for s in view.stages}


def last_commit(view: PipelineView, stage: str) -> int:
    last = last_committed(view.checkpoints[stage])
    return INITIAL if last is None else last


PROTOCOLS: dict[str, CheckpointProtocol] = {
    p.name: p for p in (SparkOnly(), Coordinated(), Uncoordinated(), CommunicationInduced())
}
# The protocols of the CheckMate paper (every one but the baseline), in its order.
CHECKMATE_PROTOCOLS = tuple(name for name, p in PROTOCOLS.items() if not p.baseline)


def protocol(name: str) -> CheckpointProtocol:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown protocol {name!r}; choose one of {sorted(PROTOCOLS)}"
        ) from None
