"""Detached daemons: a process in its own session that outlives whoever started it (an
Airflow task), writes its status to a JSON file, and is stopped by SIGTERM (SIGKILL of its
group after a timeout). A configured job's daemon (ops/daemon.py) and a pipeline's
(pipeline/daemon.py) are two of them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from recovery_lib.errors import JobFailed, NotStarted
from recovery_lib.processes import pid_alive as _alive

ACTIVE = ("starting", "running", "restarting")


@dataclass
class DaemonStatus:
    job: str
    status: str  # starting | running | restarting | failed | stopped
    supervisor_pid: int
    ts_ms: int
    run_id: str | None = None
    job_pid: int | None = None
    restarts: int = 0
    heartbeat_ms: int | None = None
    committed_batch: int | None = None
    message: str = ""
    standby_lag_batches: int | None = None
    standby_lag_bytes: int | None = None
    metrics_port: int | None = None  # its /metrics (OpenMetrics) on 127.0.0.1

    @property
    def alive(self) -> bool:
        return pid_alive(self.supervisor_pid)


def pid_alive(pid: int | None) -> bool:
    return bool(pid) and _alive(pid)


def describe(status: DaemonStatus | None) -> dict[str, Any]:
    return {} if status is None else {**asdict(status), "alive": status.alive}


def start_detached(
    module: str,
    name: str,
    workdir: Path,
    read: Callable[[], DaemonStatus | None],
    what: str,
) -> DaemonStatus:
    """Start ``python -m module name`` in its own session (it outlives the Airflow task that
    started it), logging to ``workdir/daemon.log``; returns its first status."""
    with open(workdir / "daemon.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, name],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = read()
        if status is not None and status.supervisor_pid == proc.pid:
            return status
        if proc.poll() is not None:
            raise JobFailed(
                f"the daemon of {what} exited with {proc.returncode} at start; "
                f"see {workdir / 'daemon.log'}"
            )
        time.sleep(0.2)
    raise JobFailed(f"the daemon of {what} wrote no status in 30 s; see {workdir / 'daemon.log'}")


def seen_alive(status: DaemonStatus | None, log: Path, never_started: str) -> DaemonStatus:
    """``status`` as seen now; a daemon that died without saying so is 'failed'."""
    if status is None:
        raise NotStarted(never_started)
    if status.status in ACTIVE and not status.alive:
        status.status = "failed"
        status.message = (
            f"the daemon (pid {status.supervisor_pid}) is gone without a final status; see {log}"
        )
    return status


def stop_daemon(status: DaemonStatus | None, timeout_s: float) -> None:
    """SIGTERM the daemon and wait for it to stop what it runs; SIGKILL its group after."""
    if status is None or not status.alive:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(status.supervisor_pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pid_alive(status.supervisor_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if pid_alive(status.supervisor_pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(status.supervisor_pid, signal.SIGKILL)
