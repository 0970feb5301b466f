"""Pipelines of stages: one YAML file (dags/pipelines.yaml by default,
``RECOVERY_PIPELINES_FILE`` to override), next to the jobs file; a running pipeline keeps
everything under ``<RECOVERY_HOME>/pipelines/<name>``. A stage is a job of the public job API
running as its own Spark query and process; stages are connected by Kafka topics, and the
topic between two stages is the upstream's in-flight log.


    pipelines:
      - name: q1p
        protocol: unc            # coor | unc | cic (recovery_lib/protocols)
        stages:
          - name: route
            job: jobs.pipelines.nexmark:ROUTE_BIDS_BY_AUCTION
            inputs: {bids: nexmark.bids}
          - name: convert
            job: q1
            inputs: {bids: stage:route}          # another stage's output topic

A stage's output topic is ``<pipeline>.<stage>`` unless ``output`` says otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from recovery_lib.errors import ConfigurationError
from recovery_lib.job.spec import JobSpec, resolve_job
from recovery_lib.protocols.base import protocol
from recovery_lib.settings import Settings, get_settings

STAGE_REF = "stage:"


class StageSpec(BaseModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    job: str  # module:attr of its JobSpec, or a job of this repository
    inputs: dict[str, str] = Field(default_factory=dict)  # job input -> topic | stage:<name>
    output: str | None = None
    trigger_interval: str = "0 seconds"
    params: dict[str, str] = Field(default_factory=dict)
    partitions: int = Field(default=2, ge=1)

    @field_validator("job")
    @classmethod
    def _known_job(cls, value: str) -> str:
        resolve_job(value)  # raises saying how to name a job
        return value

    def spec(self) -> JobSpec:
        return resolve_job(self.job)


class PipelineSpec(BaseModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    # A checkpoint protocol of protocols/base.py PROTOCOLS; none: each query alone, as Spark
    # does (the baseline)
    protocol: str = "unc"
    stages: list[StageSpec] = Field(min_length=1)
    # UNC / CIC: a checkpoint per this many seconds (0: every committed batch is one).
    checkpoint_interval_s: float = Field(default=0.0, ge=0)
    # COOR: a marker into the source topics every this many seconds.
    marker_interval_s: float = Field(default=5.0, gt=0)
    # UNC / CIC: "local" trusts that a stage re-running its batches sends what it sent
    # before (deterministic, or causal logging), so only failed stages roll back; "strict"
    # rolls back every receiver of a message sent after the sender's line checkpoint, as the
    # paper's protocols do.
    rollback: Literal["local", "strict"] = "local"
    # COOR on a cycle: the feedback topics no stage aligns on (see protocols/coordinated.py).
    unaligned: list[str] = Field(default_factory=list)
    # process: each stage its own Spark application; shared: every stage a streaming query of
    # one Spark application (pipeline/host.py). None: the setting pipeline_placement.
    placement: Literal["process", "shared"] | None = None

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, value: str) -> str:
        protocol(value)  # raises naming the protocols there are
        return value

    @model_validator(mode="after")
    def _consistent(self) -> PipelineSpec:
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError(f"pipeline {self.name}: stage names repeat: {names}")
        for stage in self.stages:
            job = stage.spec()
            unknown = set(stage.inputs) - set(job.inputs)
            if unknown:
                raise ValueError(
                    f"pipeline {self.name}, stage {stage.name}: inputs {sorted(unknown)} are not "
                    f"inputs of job {job.name} ({list(job.inputs)})"
                )
            for topic in stage.inputs.values():
                if topic.startswith(STAGE_REF) and topic[len(STAGE_REF) :] not in names:
                    raise ValueError(
                        f"pipeline {self.name}, stage {stage.name}: {topic} names no stage "
                        f"(stages: {names})"
                    )
        outputs = [self.output_topic(s) for s in self.stages]
        if len(set(outputs)) != len(outputs):
            raise ValueError(f"pipeline {self.name}: two stages write the same topic {outputs}")
        if protocol(self.protocol).coordinated and self.feedback_topics(skip=set(self.unaligned)):
            raise ValueError(
                f"pipeline {self.name} has a cycle through {sorted(self.feedback_topics())}: "
                "aligned COOR deadlocks there (a stage would wait for a marker that only comes "
                "after itself). Use protocol unc or cic, or list a feedback topic of every "
                "cycle in `unaligned` (epochs then do not cover those channels)"
            )
        return self

    def output_topic(self, stage: StageSpec) -> str:
        return stage.output or f"{self.name}.{stage.name}"

    def stage(self, name: str) -> StageSpec:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise ConfigurationError(
            f"pipeline {self.name} has no stage {name!r}; its stages: "
            f"{[s.name for s in self.stages]}"
        )

    def input_topics(self, stage: StageSpec, prefix: str = "nexmark") -> dict[str, str]:
        """Job input -> topic for ``stage`` (every input of its job; unnamed ones from
        ``<prefix>.<input>``)."""
        out = {}
        for name in stage.spec().inputs:
            topic = stage.inputs.get(name, f"{prefix}.{name}" if prefix else name)
            if topic.startswith(STAGE_REF):
                topic = self.output_topic(self.stage(topic[len(STAGE_REF) :]))
            out[name] = topic
        return out

    def feedback_topics(self, skip: set[str] | None = None) -> set[str]:
        """Topics on a cycle: read by a stage that (transitively) feeds the topic's writer.
        ``skip``: topics left out of the graph (COOR's unaligned edges)."""
        skip = skip or set()
        writer = {self.output_topic(s): s.name for s in self.stages}
        feeds: dict[str, set[str]] = {s.name: set() for s in self.stages}
        for stage in self.stages:
            for topic in self.input_topics(stage).values():
                if topic in writer and topic not in skip:
                    feeds[writer[topic]].add(stage.name)

        def reaches(a: str, b: str) -> bool:
            seen, todo = set(), [a]
            while todo:
                cur = todo.pop()
                if cur == b:
                    return True
                if cur not in seen:
                    seen.add(cur)
                    todo.extend(feeds[cur])
            return False

        return {
            topic
            for stage in self.stages
            for topic in self.input_topics(stage).values()
            if topic in writer and topic not in skip and reaches(stage.name, writer[topic])
        }


class PipelinesFile(BaseModel):
    pipelines: list[PipelineSpec] = Field(default_factory=list)


def pipelines_file(settings: Settings | None = None) -> Path:
    """The pipelines file ``settings`` name (the environment's if None), else dags/'s."""
    configured = (settings or get_settings()).pipelines_file
    if configured is not None:
        return configured
    return Path(__file__).resolve().parents[2] / "dags" / "pipelines.yaml"


def load_pipelines(path: str | Path | None = None) -> dict[str, PipelineSpec]:
    """The pipelines of a file by name; a ConfigurationError says which entry is wrong and why."""
    path = Path(path) if path is not None else pipelines_file()
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigurationError(
            f"pipelines file {path} does not exist (set RECOVERY_PIPELINES_FILE)"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"pipelines file {path} is not valid YAML: {exc}") from None
    try:
        parsed = PipelinesFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigurationError(f"pipelines file {path}: {exc}") from None
    names = [p.name for p in parsed.pipelines]
    if len(set(names)) != len(names):
        raise ConfigurationError(
            f"pipelines file {path}: pipeline names repeat: {names}; give each its own name"
        )
    return {p.name: p for p in parsed.pipelines}


def get_pipeline(name: str, path: str | Path | None = None) -> PipelineSpec:
    pipelines = load_pipelines(path)
    if name not in pipelines:
        raise ConfigurationError(
            f"no pipeline {name!r} in {path or pipelines_file()}; configured: {sorted(pipelines)}"
        )
    return pipelines[name]


def pipeline_home(name: str, settings: Settings | None = None) -> Path:
    """Where pipeline ``name`` keeps its checkpoints and logs, under ``settings``' home."""
    return (settings or get_settings()).home / "pipelines" / name
