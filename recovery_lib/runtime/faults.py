"""Deterministic fault hooks placed inside the data path, so a test kills at an exact point
instead of racing a sleep.

``RECOVERY_FAULT_MIDWRITE="batch=3,rows=500"``: the sink task writing micro-batch 3 flushes
its first 500 records to Kafka and then SIGKILLs the whole job (the driver's process group,
named by ``RECOVERY_DRIVER_PGID``, and its own). It fires once: a marker file under
``RECOVERY_FAULT_DIR`` records that it did.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery_lib.errors import ConfigurationError

log = logging.getLogger(__name__)

MIDWRITE_ENV = "RECOVERY_FAULT_MIDWRITE"
FAULT_DIR_ENV = "RECOVERY_FAULT_DIR"
DRIVER_PGID_ENV = "RECOVERY_DRIVER_PGID"


@dataclass(frozen=True)
class MidWriteKill:
    batch: int
    rows: int

    @classmethod
    def from_env(cls) -> MidWriteKill | None:
        spec = os.environ.get(MIDWRITE_ENV)
        if not spec:
            return None
        fields = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
        try:
            return cls(batch=int(fields["batch"]), rows=int(fields["rows"]))
        except (KeyError, ValueError) as exc:
            raise ConfigurationError(
                f"{MIDWRITE_ENV}={spec!r} is malformed; expected 'batch=N,rows=M'"
            ) from exc

    @property
    def marker(self) -> Path:
        base = Path(os.environ.get(FAULT_DIR_ENV, "/tmp"))
        return base / f"midwrite-batch{self.batch}.fired"

    def should_fire(self, batch_id: int | None, rows_written: int) -> bool:
        return batch_id == self.batch and rows_written >= self.rows and not self.marker.exists()

    def fire(self) -> None:
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        self.marker.write_text(f"{time.time()}\n")
        kill_job()


def kill_job() -> None:
    """SIGKILL the driver's process group and then ourselves (a real crash of the whole job).

    In local mode this Python worker belongs to the driver's group. On a cluster it belongs to
    the Spark worker's group, which must survive (it is the cluster, not the job): there only
    this process dies, and the executor is released when its driver is gone.
    """
    driver_pgid = os.environ.get(DRIVER_PGID_ENV)
    if driver_pgid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(driver_pgid), signal.SIGKILL)
    if not driver_pgid or int(driver_pgid) == os.getpgid(0):
        os.killpg(os.getpgid(0), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def mark_driver_process_group() -> None:
    """Called by a job's driver before Spark starts, so executor-side hooks can find it."""
    os.environ[DRIVER_PGID_ENV] = str(os.getpgid(0))


# -- faults armed at run time -----------------------------------------------------------------
# The experiment arms a fault by writing a file into RECOVERY_FAULT_ARM_DIR; the hook in the
# data path fires at its exact point the next time it runs (deterministic place, chosen time).

ARM_DIR_ENV = "RECOVERY_FAULT_ARM_DIR"
MIDWRITE_ARM = "midwrite.arm"
TASKFAIL_ARM = "taskfail.arm"
WRITEFAIL_ARM = "writefail.arm"
AFTERLOG_ARM = "afterlog.arm"
TORN_ARM = "torn.arm"
MIDPAUSE_ARM = "midpause.arm"
MIDPAUSE_PGID = "midpause.pgid"  # the process group the hook stopped, for whoever resumes it
MIDPAUSE_WHERE = "midpause.where"  # the task it stopped in: {"batch": b, "partition": p}


class InjectedTaskFailure(RuntimeError):
    """Raised on a task's first attempt so that Spark retries the task."""


def _arm_dir() -> Path | None:
    value = os.environ.get(ARM_DIR_ENV)
    return Path(value) if value else None


def arm(directory: str | os.PathLike[str], name: str, spec: str = "") -> None:
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / f".{name}.tmp"
    tmp.write_text(spec)
    os.replace(tmp, path / name)


def armed_midwrite() -> MidWriteKill | None:
    """A mid-write kill armed at run time: fires in the next batch reaching ``rows``."""
    return _armed(MIDWRITE_ARM, "midwrite.fired", _ArmedMidWrite)


def _armed(arm_name: str, fired: str, kind: type[Any]) -> Any:
    """The sink fault armed as ``arm_name`` (spec ``rows=N``) unless it fired already."""
    directory = _arm_dir()
    if directory is None:
        return None
    path = directory / arm_name
    if not path.exists() or (directory / fired).exists():
        return None
    fields = dict(p.split("=", 1) for p in path.read_text().split(",") if "=" in p)
    return kind(batch=-1, rows=int(fields.get("rows", "1")), directory=directory)


@dataclass(frozen=True)
class _ArmedMidWrite(MidWriteKill):
    directory: Path = Path("/tmp")

    @property
    def marker(self) -> Path:
        return self.directory / "midwrite.fired"

    def should_fire(self, batch_id: int | None, rows_written: int) -> bool:
        return rows_written >= self.rows and not self.marker.exists()


@dataclass(frozen=True)
class _ArmedWriteFailure(_ArmedMidWrite):
    """A sink task that fails (raises) after writing ``rows`` records: Spark retries the task,
    whose new attempt writes the same outputs again (the task-level mid-write failure)."""

    @property
    def marker(self) -> Path:
        return self.directory / "writefail.fired"

    def fire(self) -> None:
        if _claim(self.directory, "writefail.fired"):
            raise InjectedTaskFailure(
                f"injected failure after {self.rows} records were written (write-retry fault)"
            )


def armed_write_failure() -> _ArmedWriteFailure | None:
    return _armed(WRITEFAIL_ARM, "writefail.fired", _ArmedWriteFailure)


@dataclass(frozen=True)
class _ArmedMidWritePause(_ArmedMidWrite):
    """The whole job stopped (SIGSTOP) in the middle of a sink write, as a long GC pause or a
    frozen VM would stop it: the driver's process group and this task's own (PySpark's worker
    daemon puts its workers in a group of their own, so stopping the driver's alone leaves
    the writer running). Whoever armed it resumes them (SIGCONT of the groups listed in
    ``midpause.pgid``). Local mode only: on a cluster the executor is not the job's."""

    @property
    def marker(self) -> Path:
        return self.directory / "midpause.fired"

    def fire(self) -> None:
        if _claim(self.directory, "midpause.fired"):
            from recovery_lib.io.task import task_info

            task = task_info()
            where = f"batch {task['batch_id']}, partition {task['partition']}"
            own = os.getpgid(0)
            groups = [int(os.environ.get(DRIVER_PGID_ENV) or own), own]
            groups = list(dict.fromkeys(groups))  # the driver's first, this one's last
            (self.directory / MIDPAUSE_WHERE).write_text(
                json.dumps({"batch": task["batch_id"], "partition": task["partition"]})
            )
            (self.directory / MIDPAUSE_PGID).write_text(" ".join(map(str, groups)))
            stopped = time.monotonic()
            signal_groups(groups, signal.SIGSTOP)  # the last one stops this process too
            log.warning(
                "mid-write pause: resumed after %.1f s in %s, after %d rows; writing the rest "
                "of the task",
                time.monotonic() - stopped,
                where,
                self.rows,
            )


def armed_midwrite_pause() -> _ArmedMidWritePause | None:
    return _armed(MIDPAUSE_ARM, "midpause.fired", _ArmedMidWritePause)


def resume_when_paused(directory: Path, pause_s: float, timeout_s: float) -> list[int] | None:
    """Wait for an armed mid-write pause to fire in ``directory``, then SIGCONT the stopped
    groups ``pause_s`` later; returns their pgids (None if it never fired within
    ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    path = directory / MIDPAUSE_PGID
    while not path.exists() or not path.read_text().strip():
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)
    time.sleep(pause_s)
    pgids = [int(p) for p in path.read_text().split()]
    signal_groups(pgids, signal.SIGCONT)
    return pgids


def signal_groups(pgids: list[int], sig: int) -> None:
    """Send ``sig`` to each process group in order; a group gone or not ours is skipped."""
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


def _claim(directory: Path, name: str) -> bool:
    """True for exactly one caller across processes (the fault fires once)."""
    try:
        fd = os.open(directory / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, f"{time.time()}\n".encode())
    os.close(fd)
    return True


def maybe_kill_after_log() -> None:
    """In a causal operator, after its determinants were flushed and before the output that
    depends on them leaves: kill the job between the two writes."""
    directory = _arm_dir()
    armed = directory is not None and (directory / AFTERLOG_ARM).exists()
    if armed and _claim(directory, "afterlog.fired"):
        kill_job()


def maybe_fail_task(attempt: int | None) -> None:
    """Inside a UDF: fail the first attempt of the first task that runs after arming."""
    directory = _arm_dir()
    if directory is None or attempt != 0:
        return
    if (directory / TASKFAIL_ARM).exists() and _claim(directory, "taskfail.fired"):
        raise InjectedTaskFailure("injected failure on the task's first attempt (task-retry fault)")


# A poison record: an input whose value carries this field makes the job's code raise on
# every attempt (it stands for a user's code that cannot handle one record). Only where an
# experiment set the arm directory: a production job never raises here.
POISON_FIELD = "__poison__"
POISON_FIRED = "poison.fired"  # written (with the record's position) when it first raised


class PoisonedInput(RuntimeError):
    """The job's code raised on a record (the experiment's poison record)."""


def raise_on_poison(batch: Any) -> None:
    """Inside the dead-letter router (a Python operator every input row passes): raise on a
    row whose value holds the poison field, naming its position."""
    directory = _arm_dir()
    if directory is None or batch.num_rows == 0:
        return
    import pyarrow.compute as pc

    hits = pc.match_substring(batch.column("value"), f'"{POISON_FIELD}"')  # binary or string
    if not pc.any(hits).as_py():
        return
    row = batch.filter(hits).slice(0, 1).to_pylist()[0]
    position = f"{row['topic']}/{row['partition']}@{row['offset']}"
    directory.mkdir(parents=True, exist_ok=True)  # nothing was armed there: it may not exist
    if _claim(directory, POISON_FIRED):
        (directory / POISON_FIRED).write_text(f"{time.time()}\n{position}\n")
    raise PoisonedInput(f"the job's code cannot process the record at {position}")


@dataclass(frozen=True)
class _ArmedTornWrite(_ArmedMidWrite):
    """A CEC footprint written damaged (a torn write), then the job killed."""

    @property
    def marker(self) -> Path:
        return self.directory / "torn.fired"


def armed_torn_write() -> _ArmedTornWrite | None:
    """A torn-write kill armed at run time: the next CEC footprint after ``rows`` records."""
    return _armed(TORN_ARM, "torn.fired", _ArmedTornWrite)


def sink_write_fault() -> MidWriteKill | None:
    """Sink option ``writeFault`` hook (io.hooks.WriteFault): the mid-write kill set in the
    environment or armed in the experiment's arm directory, an armed write failure, or an
    armed mid-write pause."""
    return (
        MidWriteKill.from_env()
        or armed_midwrite()
        or armed_write_failure()
        or armed_midwrite_pause()
    )


SINK_FAULT_HOOK = f"{__name__}:sink_write_fault"
