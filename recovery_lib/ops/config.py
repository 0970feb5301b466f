"""The configured long-running jobs: one YAML file (dags/streaming_jobs.yaml by default,
``RECOVERY_JOBS_FILE`` to override), validated into typed ``StreamJob`` entries. Everything a
job needs on disk lives under ``<RECOVERY_HOME>/jobs/<name>/``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from recovery_lib.ha.replication.replica_set import replica_checkpoint_roots
from recovery_lib.job.runner import check_sink_mode
from recovery_lib.job.spec import JobSpec, resolve_job
from recovery_lib.settings import get_settings


class StreamJob(BaseModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    # The job: module:attr of its JobSpec (its directory on PYTHONPATH), or the name of a job
    # of this repository (q3, prices).
    job: str
    input_prefix: str = "nexmark"
    placement: Literal["local", "cluster"] = "local"
    # native | causal (recovery_lib/causal) | cec (a job whose build returns a CEC aggregate,
    # recovery_lib/cec)
    mode: Literal["native", "causal", "cec"] = "native"
    # A warm standby fed by shipped checkpoints takes over when the job's lease expires
    # (recovery_lib/ha/standby); the checkpoint then lives in the new primary's directory.
    standby: bool = False
    # Two live replicas on identical micro-batches (recovery_lib/ha/replication): kazoo (a
    # leader publishes its cuts) or liverobin (heartbeats cut both); needs sink_mode release.
    replication: Literal["none", "kazoo", "liverobin"] = "none"
    heartbeat_period_s: float | None = Field(default=None, gt=0)  # liverobin's batch interval
    # How outputs reach consumers (recovery_lib/io/sinks/modes.py); release needs a
    # deterministic job or mode causal.
    sink_mode: Literal["at_least_once", "dedup", "release", "two_phase"] = "dedup"
    output_topic: str | None = None
    heartbeat_timeout_s: float = Field(default=10.0, gt=0)
    max_restarts: int = Field(default=3, ge=0)
    keep_batches: int = Field(default=10, ge=1)
    # When the daemon spent its restart budget: alert (the DAG fails until someone acts) or
    # restart (the next DAG run starts a fresh daemon).
    on_exhausted: Literal["alert", "restart"] = "alert"
    watch_minutes: float = Field(default=10.0, gt=0)
    params: dict[str, str] = Field(default_factory=dict)  # the job's --param name=value
    inputs: dict[str, str] = Field(default_factory=dict)  # input name -> topic (overrides)
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("job")
    @classmethod
    def _known_job(cls, value: str) -> str:
        resolve_job(value)  # raises saying how to name a job
        return value

    @model_validator(mode="after")
    def _cec_writes_its_own_log(self) -> StreamJob:
        if self.mode == "cec" and (self.standby or self.sink_mode != "dedup"):
            raise ValueError(
                f"job {self.name}: mode cec writes its output log itself and recovers from it; "
                "leave sink_mode at dedup and standby off"
            )
        return self

    @model_validator(mode="after")
    def _replicas_compute_the_same(self) -> StreamJob:
        if self.replication == "none":
            return self
        problem = None
        if self.sink_mode != "release":
            problem = "set sink_mode: release (both replicas write through the replica gate)"
        elif self.standby or self.mode == "cec":
            problem = "leave standby off and mode at native or causal (replication recovers)"
        elif self.placement != "local":
            problem = "use placement: local (the one-host cluster runs one application at once)"
        elif self.spec.contract.replay_needs_causal and self.mode != "causal":
            problem = (
                "set mode: causal: this job declares nondeterminism or an order-sensitive "
                "operator, and its replicas agree on its values through shared determinants"
            )
        if problem:
            raise ValueError(f"job {self.name}: replication {self.replication}: {problem}")
        return self

    @model_validator(mode="after")
    def _release_needs_a_replayable_job(self) -> StreamJob:
        check_sink_mode(
            self.spec,
            self.sink_mode,
            self.mode == "causal",
            fix=f"In job {self.name}, set mode: causal, or sink_mode: two_phase or dedup",
        )
        return self

    @property
    def spec(self) -> JobSpec:
        return resolve_job(self.job)

    @property
    def query(self) -> str:
        """The job's name (its checkpoint subdirectory and metrics name)."""
        return self.spec.name

    @property
    def job_ref(self) -> str:
        return self.spec.ref

    @property
    def workdir(self) -> Path:
        return get_settings().home / "jobs" / self.name

    @property
    def checkpoint_dir(self) -> Path:
        if self.standby:  # the current primary's (the pair keeps the link up to date)
            return self.workdir / "supervisor" / "primary" / "ck"
        if self.replication != "none":  # replica a's (each replica has its own)
            return self.replica_checkpoint_dirs[0]
        return self.workdir / "checkpoints"

    @property
    def replica_checkpoint_dirs(self) -> list[Path]:
        """Each replica's checkpoint root (empty: the job is not replicated); the layout is
        ReplicaSet's under ``<workdir>/supervisor``."""
        if self.replication == "none":
            return []
        return replica_checkpoint_roots(self.workdir / "supervisor")

    @property
    def standby_dir(self) -> Path | None:
        """Where the standby's shipped copies are (None: the job has no standby)."""
        return self.workdir / "supervisor" / "standby" / "ship" if self.standby else None

    @property
    def checkpoint(self) -> Path:
        """The Spark checkpoint of the query (``<checkpoints>/<query>``, see JobOptions)."""
        return self.checkpoint_dir / self.query

    @property
    def out_topic(self) -> str:
        return self.output_topic or f"{self.input_prefix}.out.{self.name}"

    def causal_config(self):  # noqa: ANN201 - CausalConfig, as the job itself builds it
        from recovery_lib.causal.log import CausalConfig
        from recovery_lib.kafka.clients import client_config

        settings = get_settings()
        return CausalConfig(
            job=self.out_topic,
            state_dir=f"{self.checkpoint}.causal",
            kafka=client_config(),
            on_missing=settings.causal_on_missing,
            storage=settings.causal_storage,
            output_topic=self.out_topic,
        )

    def job_args(self) -> list[str]:
        args = [
            "--prefix",
            self.input_prefix,
            "--checkpoints",
            str(self.checkpoint_dir),
            "--output-topic",
            self.out_topic,
            "--sink-mode",
            self.sink_mode,
            "--mode",
            self.mode,
        ]
        missing = [p for p in self.spec.params if p not in self.params]
        if missing:
            raise ValueError(f"job {self.name} ({self.job}) needs params: {missing}")
        args += [arg for k, v in self.params.items() for arg in ("--param", f"{k}={v}")]
        args += [arg for k, v in self.inputs.items() for arg in ("--input", f"{k}={v}")]
        return [*args, *self.extra_args]


class JobsFile(BaseModel):
    jobs: list[StreamJob]


def jobs_file() -> Path:
    configured = get_settings().jobs_file
    if configured is not None:
        return configured
    return Path(__file__).resolve().parents[2] / "dags" / "streaming_jobs.yaml"


def load_jobs(path: str | Path | None = None) -> dict[str, StreamJob]:
    path = Path(path) if path is not None else jobs_file()
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"jobs file {path} does not exist (set RECOVERY_JOBS_FILE)") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"jobs file {path} is not valid YAML: {exc}") from exc
    try:
        parsed = JobsFile.model_validate(data or {"jobs": []})
    except ValidationError as exc:
        raise ValueError(f"jobs file {path}: {exc}") from exc
    names = [j.name for j in parsed.jobs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"jobs file {path}: duplicate job names {duplicates}")
    return {j.name: j for j in parsed.jobs}


def get_job(name: str, path: str | Path | None = None) -> StreamJob:
    jobs = load_jobs(path)
    if name not in jobs:
        raise ValueError(f"no job {name!r} in {path or jobs_file()}; configured: {sorted(jobs)}")
    return jobs[name]
