"""Run a streaming job as its own OS process, watch it, and restart it by policy.

Death is detected by exit or by a heartbeat older than ``heartbeat_timeout_s``. The restart
policy is native Spark recovery: start the same job on the same checkpoint. Every event goes to
the metrics store: start, failure_injected, failure_detected (with the cause), restart,
ready (the new driver's query is active again), stop. Restart time = failure detected -> ready.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery_lib.errors import ConfigurationError, JobError, JobFailed
from recovery_lib.io.parked import POISON_BATCH_ENV
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.runtime.checkpoint import batch_ids, last_committed
from recovery_lib.runtime.faults import signal_groups
from recovery_lib.runtime.heartbeat import Heartbeat, read_heartbeat
from recovery_lib.runtime.launch import JobLaunch, LaunchRefused
from recovery_lib.runtime.spare import SPARE_GO_ENV, START_AFTER_BATCHES
from recovery_lib.settings import Settings, get_settings

log = logging.getLogger(__name__)

LAUNCHER = "recovery_lib.job.__main__"  # python -m: reads a JobLaunch's argv


@dataclass
class ProcessSpec:
    """How to run one job process: a job through the generic launcher (``launch``, turned
    into argv here and nowhere else), or ``python -m <module> <args>`` (spark-submit of the
    module's file on a cluster). ``name`` is the job's name: its checkpoint subdirectory."""

    module: str  # e.g. "recovery_lib.job.__main__" (with a launch) or "jobs.nexmark.q3"
    args: list[str] = field(default_factory=list)  # after the launch's, if any
    name: str = ""
    cluster_url: str | None = None  # spark-submit --master <url> when set, else local mode
    env: dict[str, str] = field(default_factory=dict)
    spark_conf: dict[str, str] = field(default_factory=dict)  # spark-submit --conf (cluster)
    heartbeat_timeout_s: float = 10.0
    startup_timeout_s: float = 180.0  # until the first heartbeat of a new driver
    max_restarts: int = 3
    launch: JobLaunch | None = None

    @classmethod
    def for_job(cls, launch: JobLaunch, **kw: Any) -> ProcessSpec:
        """A process of the job ``launch.job`` (module:attr) through the generic launcher."""
        if not launch.name:
            raise LaunchRefused(
                f"the launch of {launch.job} has no job name; set its name (the checkpoint "
                "subdirectory)"
            )
        return cls(LAUNCHER, name=launch.name, launch=launch, **kw)

    def with_launch(self, launch: JobLaunch, **changes: Any) -> ProcessSpec:
        """The same process with a derived launch (a standby, a replica, a rewound stage)."""
        return dataclasses.replace(self, launch=launch, **changes)

    def argv(self, heartbeat: str) -> list[str]:
        """The process's arguments, its lease file ``heartbeat`` among them."""
        if self.launch is not None:
            return [*self.launch.replace(heartbeat=heartbeat).to_argv(), *self.args]
        return [*self.args, "--heartbeat", heartbeat]


@dataclass
class Restart:
    cause: str
    detected_ms: int
    ready_ms: int | None = None

    @property
    def restart_time_s(self) -> float | None:
        return (self.ready_ms - self.detected_ms) / 1000 if self.ready_ms else None


class Supervisor:
    def __init__(
        self,
        spec: ProcessSpec,
        workdir: str | os.PathLike[str],
        store: MetricsStore | None = None,
        run_id: str | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        spare: bool = False,
        settings: Settings | None = None,
    ) -> None:
        self.spec = spec
        self.settings = settings or get_settings()  # the caller's; read once
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.heartbeat_path = self.workdir / "heartbeat.json"
        self.store = store
        self.run_id = run_id
        self.on_event = on_event
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_ms = 0
        self.restarts: list[Restart] = []
        self.takeovers: list[dict[str, Any]] = []  # a single process never fails over
        self._log = None
        self._awaiting_ready: Restart | None = None
        self._stopped = False
        # The batch the job died in, and how many times in a row (poison records, job/poison.py).
        self._failed_batch: tuple[int, int] | None = None
        self._next_env: dict[str, str] = {}  # for the next start only
        # A spare process (runtime/spare.py): started once the job serves, handed the job at
        # its death; its go file's name changes with each spare.
        self.spare_wanted = spare
        self.spare: subprocess.Popen[bytes] | None = None
        self._spare_go: Path | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def command(self) -> list[str]:
        argv = self.spec.argv(str(self.heartbeat_path))
        if self.spec.cluster_url:
            import pyspark

            script = Path(
                sys.modules[self.spec.module].__file__
                if self.spec.module in sys.modules
                else _module_path(self.spec.module)
            )
            submit = str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
            return [
                submit,
                "--master",
                self.spec.cluster_url,
                "--conf",
                "spark.driver.host=127.0.0.1",
                "--conf",
                "spark.driver.bindAddress=127.0.0.1",
                "--conf",
                f"spark.pyspark.python={sys.executable}",
                *[arg for k, v in self.spec.spark_conf.items() for arg in ("--conf", f"{k}={v}")],
                str(script),
                *argv,
            ]
        return [sys.executable, "-m", self.spec.module, *argv]

    def start(self) -> None:
        self._stopped = False
        self.heartbeat_path.unlink(missing_ok=True)
        self.proc = self._popen(self._next_env)
        self._next_env = {}
        self.started_ms = now_ms()
        self.event(
            "start" if not self.restarts else "restart",
            {"pid": self.proc.pid, "command": " ".join(self.command()[:4])},
        )

    def _popen(self, extra_env: dict[str, str]) -> subprocess.Popen[bytes]:
        if self._log is None:
            self._log = open(self.workdir / "job.log", "ab")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **self.spec.env, **extra_env}
        return subprocess.Popen(
            self.command(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )

    # -- the spare ---------------------------------------------------------------------------

    def _keep_spare(self) -> None:
        """Start a spare once the job serves and has finished its first batches (not beside
        its start-up or its slow first batch: 2 cores), unless one waits already."""
        if not self.spare_wanted or self._stopped or not self.serving():
            return
        beat = self.heartbeat()
        if beat is None or beat.batches < START_AFTER_BATCHES:
            return
        if self.spare is not None and self.spare.poll() is None:
            return
        if self.spare is not None:  # it died waiting: say so, start another
            self.event("spare_died", {"pid": self.spare.pid, "exit": self.spare.returncode})
        for used in self.workdir.glob("spare-go-*"):  # earlier spares' (read at their go)
            used.unlink(missing_ok=True)
        self._spare_go = self.workdir / f"spare-go-{now_ms()}"
        self.spare = self._popen({SPARE_GO_ENV: str(self._spare_go)})
        self.event("spare_started", {"pid": self.spare.pid})

    def _hand_to_spare(self) -> bool:
        """Make the waiting spare the job (after the job's death); False if there is none."""
        spare, go = self.spare, self._spare_go
        self.spare, self._spare_go = None, None
        if spare is None or go is None or spare.poll() is not None or self._next_env:
            if spare is not None:  # dead, or a poison search needs a fresh start's env
                _end_group(spare)
            return False
        self.heartbeat_path.unlink(missing_ok=True)
        go.touch()
        self.proc = spare
        self.started_ms = now_ms()
        self.event("restart", {"pid": spare.pid, "spare": True})
        return True

    def event(
        self, kind: str, detail: dict[str, Any] | None = None, ts_ms: int | None = None
    ) -> None:
        if self.store is not None and self.run_id is not None:
            self.store.event(self.run_id, kind, detail or {}, ts_ms)
        if self.on_event is not None:
            self.on_event(kind, detail or {})

    @property
    def live_checkpoints(self) -> Path:
        """The job's checkpoint root (its launch's ``checkpoints``; a job module run as a
        program: its ``--checkpoints`` argument)."""
        if self.spec.launch is not None:
            return Path(self.spec.launch.checkpoints)
        args = self.spec.args
        if "--checkpoints" not in args:
            raise ConfigurationError(
                f"job {self.spec.module} runs without --checkpoints; add --checkpoints DIR to "
                "its arguments"
            )
        return Path(args[args.index("--checkpoints") + 1])

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def heartbeat(self) -> Heartbeat | None:
        return read_heartbeat(self.heartbeat_path)

    @property
    def recovering(self) -> bool:
        """A restart is in progress (the job is not back yet)."""
        return self._awaiting_ready is not None

    def serving(self) -> bool:
        """The job serves and no restart is in progress."""
        return self.is_ready() and not self.recovering

    def ready_for_next_failure(self) -> bool:
        """Back from the last failure: a plain job has nothing else to wait for."""
        return self.serving()

    def is_ready(self) -> bool:
        beat = self.heartbeat()
        return (
            beat is not None
            and self.proc is not None
            and beat.belongs_to(self.proc.pid)
            and beat.query_active
        )

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.is_ready():
            if self.proc is not None and self.proc.poll() is not None:
                raise JobFailed(
                    f"job exited with {self.proc.returncode} before it was ready; "
                    f"see {self.workdir / 'job.log'}"
                )
            if time.monotonic() > deadline:
                raise JobFailed(
                    f"job not ready within {timeout_s:.0f} s; see {self.workdir / 'job.log'}"
                )
            time.sleep(0.2)

    # -- watching ----------------------------------------------------------------------------

    def check(self) -> str | None:
        """The cause of death if the job died (exit or missed heartbeats), else None."""
        if self.proc is None:
            return None
        code = self.proc.poll()
        if code is not None:
            return f"exit {code}"
        beat = self.heartbeat()
        if beat is None or not beat.belongs_to(self.proc.pid):  # still starting (JVM, SparkSession)
            if now_ms() - self.started_ms > self.spec.startup_timeout_s * 1000:
                return f"no heartbeat within {self.spec.startup_timeout_s:.0f} s of start"
            return None
        if now_ms() - beat.ts_ms > self.spec.heartbeat_timeout_s * 1000:
            return f"no heartbeat for {self.spec.heartbeat_timeout_s:.0f} s"
        return None

    def tick(self) -> None:
        """One supervision step: detect death, restart by policy, notice readiness."""
        if self._awaiting_ready is not None and self.is_ready():
            self._awaiting_ready.ready_ms = now_ms()
            self.event("ready", {"restart_time_s": self._awaiting_ready.restart_time_s})
            self._awaiting_ready = None
        cause = self.check()
        if cause is None:
            self._keep_spare()
            return
        detected = now_ms()
        self.event("failure_detected", {"cause": cause}, detected)
        self.kill_group(signal.SIGKILL)
        if len(self.restarts) >= self.spec.max_restarts:
            self.event("gave_up", {"restarts": len(self.restarts)})
            raise JobFailed(
                f"job died ({cause}) and the restart budget "
                f"({self.spec.max_restarts}) is spent; see {self.workdir / 'job.log'}"
            )
        restart = Restart(cause, detected)
        self.restarts.append(restart)
        self._awaiting_ready = restart
        self._count_failed_batch()
        if not self._hand_to_spare():
            self.start()

    def _count_failed_batch(self) -> None:
        """After the same batch failed ``poison_attempts`` times in a row, the next start looks
        for a poison record in it (job/poison.py) before its query runs."""
        batch = self._inflight_batch()
        if batch is None:
            return
        before = self._failed_batch
        times = before[1] + 1 if before is not None and before[0] == batch else 1
        self._failed_batch = (batch, times)
        if times >= self.settings.poison_attempts:
            self._next_env = {POISON_BATCH_ENV: str(batch)}
            self._failed_batch = None  # counted anew after the search
            self.event("poison_search", {"batch": batch, "failures": times})

    def _inflight_batch(self) -> int | None:
        """The batch planned in the offset log and not committed, or None."""
        if self.spec.launch is None or not self.spec.launch.name:
            return None
        checkpoint = self.live_checkpoints / self.spec.launch.name
        planned = batch_ids(checkpoint / "offsets")
        if not planned:
            return None
        committed = last_committed(checkpoint)
        return planned[-1] if committed is None or planned[-1] > committed else None

    def supervise(self, until: Callable[[], bool], interval_s: float = 0.2) -> None:
        while not until():
            self.tick()
            time.sleep(interval_s)

    # -- signals -----------------------------------------------------------------------------

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        if sig == signal.SIGKILL:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                raise JobFailed(
                    f"job process {self.proc.pid} survived SIGKILL for 30 s (uninterruptible "
                    "sleep?); it is still running"
                ) from None

    def fault_dir(self, base: Path) -> Path:
        """Fault hooks are armed in the job's own arm directory (one process)."""
        return base

    def pause(self, seconds: float) -> None:
        """SIGSTOP the job for ``seconds``, then SIGCONT: its process group and the groups of
        its descendants (PySpark's worker daemon gives its workers one of their own, which
        would otherwise go on running tasks through the freeze)."""
        if self.proc is None:
            return
        groups = self._process_groups(self.proc.pid)
        signal_groups(groups, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            signal_groups(groups, signal.SIGCONT)

    @staticmethod
    def _process_groups(leader: int) -> list[int]:
        """The job's own group (its leader's pid) first, then every other group among its
        descendants."""
        import psutil

        groups = [leader]
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(leader).children(recursive=True):
                with contextlib.suppress(ProcessLookupError):
                    groups.append(os.getpgid(child.pid))
        return list(dict.fromkeys(groups))

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (Spark stops its queries), then SIGKILL; always by PID of our own child."""
        if self._stopped:
            return
        self._stopped = True
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    self.kill_group(signal.SIGKILL)
                except RuntimeError as exc:  # said, not raised: callers stop in `finally`
                    log.error("supervisor: %s", exc)
                    self.event("stop_failed", {"error": str(exc)})
        if self.spare is not None:
            _end_group(self.spare, timeout_s)
            self.spare = None
        if self.proc is not None:
            self.event("stop", {"exit": self.proc.returncode})
        if self._log is not None:
            self._log.close()
            self._log = None


def _end_group(proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """SIGTERM a child's process group, SIGKILL it after ``timeout_s``; said, not raised."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log.error("supervisor: process %s survived SIGKILL for 30 s", proc.pid)


def _module_path(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise JobError(f"cannot find module {module!r}; is its directory on PYTHONPATH?")
    return spec.origin
