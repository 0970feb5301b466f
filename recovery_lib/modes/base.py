"""A recovery mode, the one extension point of the layers above the mechanisms: it owns its
name, what it accepts (``validate``, with the error text), what it adds to a job's launch,
its supervisor, where its checkpoints live and what checkpoint GC must keep for it.

The experiment runner, the jobs file and its daemon, the DAGs, the advisor, the reproduction
extractors and the dashboard ask the registry (registry.py); none compares mode names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from recovery_lib.errors import ConfigurationError
from recovery_lib.io.sinks.modes import sink_flag
from recovery_lib.job.runner import check_sink_mode
from recovery_lib.job.spec import JobSpec
from recovery_lib.runtime.launch import JobLaunch, ProcessMode
from recovery_lib.settings import Settings

if TYPE_CHECKING:
    from recovery_lib.metrics.store import MetricsStore
    from recovery_lib.runtime.supervision import JobSupervisor
    from recovery_lib.runtime.supervisor import ProcessSpec


# The sink modes a job that writes its output itself runs under: nothing of the project's sink
# is used, and the oracle reads every record (its output carries no lineage ids to dedup by).
OWN_SINK_MODES = frozenset({"dedup", "at_least_once"})
# Failures fired by hooks in the project's frames and sink (experiment/runner.py HOOK_FAULTS)
# or found through its sink (poison): a job that writes its output itself never reaches them.
PROJECT_CODE_FAILURES = frozenset(
    {"mid-write", "task-retry", "write-retry", "torn-write", "pause-mid-write", "poison"}
)


class ModeRefused(ConfigurationError):
    """A mode does not accept what was asked of it; the message says what to change."""


@dataclass(frozen=True)
class Surface:
    """How the user names things where the request was made, for the fix in an error."""

    sink: Callable[[str], str]  # sink mode -> how to choose it ("use --sink release")
    process: Callable[[str], str]  # process mode -> how to choose it
    local: str  # how to run in local mode
    release_fix: str  # how to make a nondeterministic job's release sink safe
    prefix: str = ""


# The experiment's command line (recovery experiment run ...).
COMMAND_LINE = Surface(
    sink=lambda m: f"use --sink {sink_flag(m)}",
    process=lambda m: f"use --mode {m}",
    local="leave out --cluster",
    release_fix="Use --mode causal (or standby), or --sink two-phase or dedup",
)


def job_entry(name: str) -> Surface:
    """A job of the jobs file (dags/streaming_jobs.yaml)."""
    return Surface(
        sink=lambda m: f"set sink_mode: {m}",
        process=lambda m: f"set process: {m}",
        local="use placement: local",
        release_fix=f"In job {name}, set mode: causal, or sink_mode: two_phase or dedup",
        prefix=f"job {name}: ",
    )


@dataclass(frozen=True)
class ModeOptions:
    """What a mode's supervisor is told beyond the job's process (modes ignore what is not
    theirs)."""

    victim: str | None = None  # replication: which replica a failure hits (leader, follower, a, b)
    heartbeat_period_s: float | None = None  # LiveRobin's batch interval
    replace_after_s: float | None = None  # replication: when a dead replica is replaced
    slow_delay_s: float = 0.0  # LiveRobin: heartbeats of one input partition come this late


@dataclass(frozen=True)
class ModeRequest:
    """What is asked of a mode: the job, its sink mode (io/sinks/modes.py), the failures an
    experiment injects, whether it runs on a cluster, and the process mode the user chose
    (the jobs file's ``process``; None: the recovery mode chooses)."""

    job: JobSpec
    sink_mode: str = "dedup"
    table_sink: bool = False  # the output goes to a lakehouse table (io/sinks/table_target.py)
    failures: tuple[str, ...] = ()
    cluster: bool = False
    process: ProcessMode | None = None
    options: ModeOptions = field(default_factory=ModeOptions)
    # The settings of whoever asks (the CLI, the daemon, a DAG task): where a causal job's
    # determinants go, whether a restarting mode keeps a spare process (runtime/spare.py),
    # and the supervisors' tunables. None: the defaults (determinants in their own topic, no
    # spare) and, for the supervisors, the process's settings.
    settings: Settings | None = None
    surface: Surface = COMMAND_LINE

    @property
    def causal_storage(self) -> str:
        return self.settings.causal_storage if self.settings is not None else "kafka"

    @property
    def spare_process(self) -> bool:
        return self.settings.supervisor_spare if self.settings is not None else False


@dataclass(frozen=True)
class JobPlace:
    """Where a configured job lives: its directory, query name, output and input topics."""

    workdir: Path
    query: str
    out_topic: str
    input_topics: dict[str, str]


@dataclass(frozen=True)
class GcNeeds:
    """What checkpoint GC of a job must keep for its mode: each checkpoint collected on its
    own, the newest batch shipped to a standby, and input records below which none is needed
    again (None: the checkpoints' own offsets decide)."""

    checkpoints: list[Path]
    shipped: int | None = None
    input_floor: dict[str, dict[int, int]] | None = None
    input_deletable: bool = True  # False: some checkpoint still needs all its input


class RecoveryMode(ABC):
    """One way a failed job comes back. ``name`` is what users type; ``summary`` one line."""

    name: str
    summary: str
    # Where the mode stands on the advisor's outage ladder, cheapest first (None: not a rung,
    # e.g. causal logging, which any rung runs where a job needs it), and what it costs.
    outage_rank: int | None = None
    compute = ""
    replicated = False  # live replicas, never a restart (the dashboard's replicated runs)
    leaderless = False  # replicas cut at shared heartbeats: no leader to aim a failure at
    keeps_own_log = False  # the job's state lives in its output log (CEC)
    # Its supervisor counts a batch that fails again and again and has the job find and park
    # the poison record in it (job/poison.py): a plain Supervisor, one process.
    parks_poison = False
    # One writer per batch commits to a lakehouse table (the table's marks and epochs keep a
    # re-run or a zombie out); replicas write their own outputs through a gate instead.
    writes_tables = True
    # Why the mode cannot run a job that writes its output itself (a team's unchanged Spark
    # job, JobSpec.own_sink); None: it can.
    own_sink_refusal: str | None = None

    def with_causal_logging(self, causal: bool) -> str:
        """The mode to recommend when the job needs causal logging (``causal``): this one,
        which runs it where needed, unless it is plain native recovery."""
        return self.name

    @property
    def kill_run(self) -> str:
        """The name benchmarks give the run that kills this mode's primary process (a
        leader-based set's leader)."""
        return f"{self.name}-leader" if self.replicated and not self.leaderless else self.name

    # -- what it accepts -----------------------------------------------------------------------

    def process_mode(self, request: ModeRequest) -> ProcessMode:
        """What the job's processes run: the user's choice, else native."""
        return request.process or ProcessMode.NATIVE

    def validate(self, request: ModeRequest) -> None:
        """Raise ``ModeRefused`` saying what to change when the mode cannot run the request."""
        if request.table_sink and not self.writes_tables:
            instead = (
                f"its replicas write through the replica gate; {request.surface.sink('release')}"
                if self.replicated
                else f"its output log is its state; {request.surface.sink('dedup')}"
            )
            raise ModeRefused(
                f"{request.surface.prefix}mode {self.name} cannot write a lakehouse table: "
                f"{instead}, or choose mode native, causal or standby for a table"
            )
        if (
            request.table_sink
            and self.process_mode(request).causal
            and request.causal_storage == "output"
        ):
            raise ModeRefused(
                f"{request.surface.prefix}a table sink with causal determinants piggybacked "
                "on the output (RECOVERY_CAUSAL_STORAGE=output): a table row does not carry "
                "them; set RECOVERY_CAUSAL_STORAGE=kafka"
            )
        problem = self._own_sink_problem(request)
        if problem is None:
            problem = self.problem(request)
        if problem is None and request.cluster and "pause-mid-write" in request.failures:
            problem = (
                "pause-mid-write stops the job's process group, which on a cluster does not "
                f"hold its executors: {request.surface.local}"
            )
        if problem is None and "poison" in request.failures and not self.parks_poison:
            problem = (
                f"poison records are found and parked under one restarting process; mode "
                f"{self.name} does not search for them yet: use --mode native"
            )
        if problem is None and "executor-kill" in request.failures and not request.cluster:
            problem = "executor-kill needs separate executor processes: add --cluster"
        if problem is None:
            try:
                check_sink_mode(
                    request.job,
                    request.sink_mode,
                    self.process_mode(request).causal,
                    fix=request.surface.release_fix,
                )
            except ValueError as exc:
                problem = str(exc)
        if problem is not None:
            raise ModeRefused(f"{request.surface.prefix}{problem}")

    def _own_sink_problem(self, request: ModeRequest) -> str | None:
        job = request.job
        if not job.own_sink:
            return None
        if self.own_sink_refusal is not None:
            return f"job {job.name} writes its output itself: {self.own_sink_refusal}"
        if request.table_sink or request.sink_mode not in OWN_SINK_MODES:
            chosen = "a table sink" if request.table_sink else f"sink mode {request.sink_mode}"
            return (
                f"job {job.name} writes its output itself (Spark's Kafka sink, at-least-once): "
                f"{chosen} needs the project's sink; {request.surface.sink('dedup')} (the "
                "default), or make it a JobSpec whose build returns its output DataFrame "
                "(recovery_lib.job.output) to choose a sink mode"
            )
        hooked = sorted(set(request.failures) & PROJECT_CODE_FAILURES)
        if hooked:
            return (
                f"job {job.name} writes its output itself: {', '.join(hooked)} fire(s) in the "
                "project's frames and sink, which it does not run; use driver-kill, pause, "
                "executor-kill or a network, broker or checkpoint fault"
            )
        if self.process_mode(request).causal:
            return (
                f"job {job.name} writes its output itself and logs no nondeterminism, so its "
                f"processes cannot run causal (mode {self.name} would, for a job whose contract "
                "needs a replay to recompute): run it in mode native"
            )
        return None

    def problem(self, request: ModeRequest) -> str | None:
        """The mode's own refusal (None: accepted)."""
        if "torn-write" in request.failures:
            return "torn-write damages a CEC window footprint: it needs --mode cec"
        return None

    # -- what it runs ---------------------------------------------------------------------------

    def launch(self, base: JobLaunch, request: ModeRequest) -> JobLaunch:
        """The job's launch under this mode (before its supervisor derives its processes')."""
        return base.with_process_mode(self.process_mode(request))

    @abstractmethod
    def supervisor(
        self,
        spec: ProcessSpec,
        request: ModeRequest,
        workdir: Path,
        store: MetricsStore | None,
        run_id: str | None,
    ) -> JobSupervisor:
        """The object that starts, watches and recovers the job's processes."""

    # -- where it keeps things ------------------------------------------------------------------

    def supervisor_home(self, workdir: Path) -> Path:
        """Where the supervisor of a configured job (directory ``workdir``) keeps its nodes."""
        return workdir / "supervisor"

    def checkpoint_roots(self, workdir: Path) -> list[Path]:
        """The live checkpoint roots (the launch's ``checkpoints``) of a configured job whose
        directory is ``workdir``; the first is the one that stands for the job."""
        return [workdir / "checkpoints"]

    def standby_dir(self, workdir: Path) -> Path | None:
        """Where a standby's shipped copies are (None: the mode has no standby)."""
        return None

    def gc_needs(self, place: JobPlace, keep_batches: int, input_records: bool) -> GcNeeds:
        """What GC of a configured job must keep (``input_records``: input records are to be
        deleted too, so their floor matters)."""
        return GcNeeds([root / place.query for root in self.checkpoint_roots(place.workdir)])
