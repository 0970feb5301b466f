"""The configured long-running jobs: one YAML file (dags/streaming_jobs.yaml by default,
``RECOVERY_JOBS_FILE`` to override), validated into typed ``StreamJob`` entries. Everything a
job needs on disk lives under ``<RECOVERY_HOME>/jobs/<name>/``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from recovery_lib.causal.log import CausalConfig
from recovery_lib.errors import ConfigurationError
from recovery_lib.io.sinks.modes import sink_mode
from recovery_lib.io.sinks.table_target import TableTarget
from recovery_lib.job.options import input_topic
from recovery_lib.job.spec import JobSpec, resolve_job
from recovery_lib.kafka.clients import client_config
from recovery_lib.modes import JobPlace, ModeRequest, RecoveryMode, get_mode, job_entry, mode_names
from recovery_lib.runtime.launch import JobLaunch, ProcessMode
from recovery_lib.settings import Settings, get_settings

# What an entry of the old ``replication:`` key said for "no replicas".
LEGACY_NO_REPLICATION = "none"

log = logging.getLogger(__name__)


class StreamJob(BaseModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    # The job: module:attr of its JobSpec (its directory on PYTHONPATH), or the name of a job
    # of this repository (q3, prices).
    job: str
    input_prefix: str = "nexmark"
    placement: Literal["local", "cluster"] = "local"
    # The recovery mode, one name from the registry (recovery_lib/modes): native | causal |
    # standby | cec | kazoo | liverobin (``recovery experiment run --help`` lists them all).
    mode: str = "native"
    # What the job's processes run where the mode leaves it open (standby, kazoo, liverobin):
    # native or causal. Default: causal when the job's contract needs a replay to recompute.
    process: ProcessMode | None = None
    heartbeat_period_s: float | None = Field(default=None, gt=0)  # liverobin's batch interval
    # How outputs reach consumers (recovery_lib/io/sinks/modes.py); release needs a
    # deterministic job or mode causal.
    sink_mode: str = "dedup"
    output_topic: str | None = None
    # Or a lakehouse table instead of the output topic (io/sinks/table_target.py): delta or
    # iceberg, at ``table`` (default <RECOVERY_HOME>/jobs/<name>/table; iceberg: the catalog
    # and warehouse root, #namespace.table to name the table). Native, causal or standby.
    sink: Literal["topic", "delta", "iceberg"] = "topic"
    table: str | None = None
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
    # The settings the entry was loaded with (load_jobs'), else the process's.
    _settings: Settings | None = PrivateAttr(default=None)
    _spec: JobSpec | None = PrivateAttr(default=None)  # resolved once (validation asks often)

    @field_validator("job")
    @classmethod
    def _known_job(cls, value: str) -> str:
        resolve_job(value)  # raises saying how to name a job
        return value

    @field_validator("sink_mode")
    @classmethod
    def _known_sink_mode(cls, value: str) -> str:
        return sink_mode(value)  # raises naming the sink modes

    @model_validator(mode="before")
    @classmethod
    def _one_mode_key(cls, data: Any) -> Any:
        """Entries written before the one ``mode`` key (``standby: true``, ``replication:
        kazoo``, beside ``mode`` as the process) still load, as they ran."""
        if not isinstance(data, dict) or not {"standby", "replication"} & data.keys():
            return data
        data = dict(data)
        name = data.get("name", "?")
        standby = TypeAdapter(bool).validate_python(data.pop("standby", False))  # "false" too
        replication = data.pop("replication", LEGACY_NO_REPLICATION)
        if standby and replication != LEGACY_NO_REPLICATION:
            raise ValueError(
                f"job {name}: a standby or replication {replication}, not both: leave standby "
                "off (replication recovers)"
            )
        chosen = "standby" if standby else replication
        if chosen != LEGACY_NO_REPLICATION:
            log.warning(
                "jobs file: job %s chooses its mode with standby/replication; write "
                "`mode: %s` instead (the old keys will go)",
                name,
                chosen,
            )
            old = data.get("mode", ProcessMode.NATIVE.value)
            if "process" not in data and old in {m.value for m in ProcessMode}:
                data["process"] = old  # the old `mode` said what the processes run
            data["mode"] = chosen
        return data

    @field_validator("mode")
    @classmethod
    def _registered_mode(cls, value: str) -> str:
        if value not in mode_names():
            raise ValueError(f"mode {value!r}: choose one of {', '.join(mode_names())}")
        return value

    @model_validator(mode="after")
    def _its_recovery_mode_accepts_it(self, info: ValidationInfo) -> StreamJob:
        if info.context and info.context.get("settings") is not None:
            self._settings = info.context["settings"]
        if self.process is not None and self.process_mode is not self.process:
            raise ValueError(
                f"job {self.name}: mode {self.mode} runs its processes "
                f"{self.process_mode.value}; leave process out (or choose the mode that runs "
                f"{self.process.value})"
            )
        self.recovery_mode.validate(self.mode_request)
        return self

    @property
    def settings(self) -> Settings:
        """The settings this entry runs with (where its files are, how it logs causally)."""
        return self._settings if self._settings is not None else get_settings()

    @property
    def recovery_mode(self) -> RecoveryMode:
        """The registry's mode (recovery_lib/modes) this entry names."""
        return get_mode(self.mode)

    @property
    def process_mode(self) -> ProcessMode:
        """What the job's processes run under its recovery mode."""
        return self.recovery_mode.process_mode(self.mode_request)

    @property
    def mode_request(self) -> ModeRequest:
        return ModeRequest(
            job=self.spec,
            sink_mode=self.sink_mode,
            table_sink=self.table_target is not None,
            cluster=self.placement == "cluster",
            process=self.process,
            settings=self.settings,
            surface=job_entry(self.name),
        )

    @property
    def table_target(self) -> TableTarget | None:
        """The table the job writes (None: its output topic)."""
        if self.sink == "topic":
            return None
        return TableTarget.parse(f"{self.sink}:{self.table or self.workdir / 'table'}")

    @property
    def table_app_id(self) -> str:
        """Whose commits in the table are the job's (the sink's app id)."""
        return TableTarget.app_id(self.input_prefix, self.query)

    @property
    def spec(self) -> JobSpec:
        if self._spec is None:
            self._spec = resolve_job(self.job)
        return self._spec

    @property
    def query(self) -> str:
        """The job's name (its checkpoint subdirectory and metrics name)."""
        return self.spec.name

    @property
    def job_ref(self) -> str:
        return self.spec.ref

    @property
    def workdir(self) -> Path:
        return self.settings.home / "jobs" / self.name

    @property
    def checkpoint_dir(self) -> Path:
        """The checkpoint root that stands for the job (a standby pair's current primary's,
        replica a's)."""
        return self.recovery_mode.checkpoint_roots(self.workdir)[0]

    @property
    def replica_checkpoint_dirs(self) -> list[Path]:
        """Each replica's checkpoint root (empty: the job is not replicated)."""
        mode = self.recovery_mode
        return mode.checkpoint_roots(self.workdir) if mode.replicated else []

    @property
    def standby_dir(self) -> Path | None:
        """Where the standby's shipped copies are (None: the job has no standby)."""
        return self.recovery_mode.standby_dir(self.workdir)

    @property
    def supervisor_home(self) -> Path:
        return self.recovery_mode.supervisor_home(self.workdir)

    @property
    def input_topics(self) -> dict[str, str]:
        """Each input of the job and the topic it is read from."""
        return {n: input_topic(n, self.input_prefix, self.inputs) for n in self.spec.inputs}

    @property
    def place(self) -> JobPlace:
        return JobPlace(self.workdir, self.query, self.out_topic, self.input_topics)

    @property
    def checkpoint(self) -> Path:
        """The Spark checkpoint of the query (``<checkpoints>/<query>``, see JobOptions)."""
        return self.checkpoint_dir / self.query

    @property
    def out_topic(self) -> str:
        return self.output_topic or f"{self.input_prefix}.out.{self.name}"

    def causal_config(self):  # noqa: ANN201 - CausalConfig, as the job itself builds it

        settings = self.settings
        return CausalConfig(
            job=self.out_topic,
            state_dir=f"{self.checkpoint}.causal",
            kafka=client_config(settings=settings),
            on_missing=settings.causal_on_missing,
            storage=settings.causal_storage,
            output_topic=self.out_topic,
        )

    def launch(self) -> JobLaunch:
        """The job's launch as its recovery mode runs it (its supervisor derives each
        process's: a standby's, a replica's)."""
        missing = [p for p in self.spec.params if p not in self.params]
        if missing:
            raise ConfigurationError(
                f"job {self.name} ({self.job}) needs params: {missing}; add them to its params"
            )
        base = JobLaunch(
            job=self.job_ref,
            name=self.query,
            prefix=self.input_prefix,
            inputs=dict(self.inputs),
            params=dict(self.params),
            checkpoints=str(self.workdir / "checkpoints"),
            output_topic=self.out_topic,
            sink_mode=self.sink_mode,
            table_sink=self.table_target.spell() if self.table_target is not None else None,
        )
        if self.extra_args:  # the launcher's own flags, as a user would type them
            base = JobLaunch.from_argv([*base.to_argv(), *self.extra_args]).replace(name=self.query)
        return self.recovery_mode.launch(base, self.mode_request)


class JobsFile(BaseModel):
    jobs: list[StreamJob]


def jobs_file(settings: Settings | None = None) -> Path:
    """The jobs file: the setting ``jobs_file``, else dags/streaming_jobs.yaml."""
    configured = (settings or get_settings()).jobs_file
    if configured is not None:
        return configured
    return Path(__file__).resolve().parents[2] / "dags" / "streaming_jobs.yaml"


def load_jobs(
    path: str | Path | None = None, settings: Settings | None = None
) -> dict[str, StreamJob]:
    """The jobs of ``path`` (default ``jobs_file``), each checked by its mode and run with
    ``settings`` (default: the process's)."""
    path = Path(path) if path is not None else jobs_file(settings)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigurationError(
            f"jobs file {path} does not exist (set RECOVERY_JOBS_FILE)"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"jobs file {path} is not valid YAML: {exc}") from exc
    try:
        parsed = JobsFile.model_validate(data or {"jobs": []}, context={"settings": settings})
    except ValidationError as exc:
        raise ConfigurationError(f"jobs file {path}: {exc}") from exc
    names = [j.name for j in parsed.jobs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigurationError(
            f"jobs file {path}: duplicate job names {duplicates}; give each job its own name"
        )
    return {j.name: j for j in parsed.jobs}


def get_job(
    name: str, path: str | Path | None = None, settings: Settings | None = None
) -> StreamJob:
    jobs = load_jobs(path, settings)
    if name not in jobs:
        raise ConfigurationError(
            f"no job {name!r} in {path or jobs_file(settings)}; configured: {sorted(jobs)}"
        )
    return jobs[name]
