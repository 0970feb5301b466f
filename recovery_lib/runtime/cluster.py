"""A Spark standalone cluster on 127.0.0.1 from the pyspark package: one master, one worker.

``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` (the wheel ships
no sbin scripts, and nothing is downloaded). Both run detached and are recorded in a state
file, so ``recovery cluster stop`` ends them by PID. Executors are separate JVMs launched by
the worker, which is what the executor-kill fault needs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from recovery_lib.errors import RecoveryError
from recovery_lib.processes import free_port, pid_alive, port_answers, stop_pid
from recovery_lib.settings import Settings, get_settings


class ClusterError(RecoveryError, RuntimeError):
    pass


@dataclass
class ClusterState:
    master_pid: int
    worker_pid: int
    master_port: int
    master_ui_port: int
    worker_ui_port: int
    work_dir: str
    log_dir: str

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _state_file(settings: Settings) -> Path:
    return settings.home / "cluster" / "cluster.json"


def cluster_state(settings: Settings | None = None) -> ClusterState | None:
    settings = settings or get_settings()
    path = _state_file(settings)
    try:
        state = ClusterState(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if pid_alive(state.master_pid) and pid_alive(state.worker_pid):
        return state
    return None


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_NO_DAEMONIZE": "1",
    }


def start_cluster(
    cores: int = 2, memory: str = "6g", settings: Settings | None = None, timeout_s: float = 60.0
) -> ClusterState:
    settings = settings or get_settings()
    existing = cluster_state(settings)
    if existing is not None:
        raise ClusterError(
            f"a cluster is already running at {existing.url}; stop it with `recovery cluster stop`"
        )
    base = settings.home / "cluster"
    log_dir, work_dir = base / "logs", base / "work"
    log_dir.mkdir(parents=True, exist_ok=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    spark_class = str(spark_home() / "bin" / "spark-class")
    master_port, master_ui, worker_ui = free_port(), free_port(), free_port()
    master = _launch(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(master_port),
            "--webui-port",
            str(master_ui),
        ],
        log_dir / "master.log",
    )
    started = [master]
    try:  # whatever stops the start (a timeout, SIGTERM as an exception) stops what it started
        _wait(
            lambda: port_answers("127.0.0.1", master_port),
            timeout_s,
            "the Spark master",
            master,
            log_dir / "master.log",
        )
        worker = _launch(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                f"spark://127.0.0.1:{master_port}",
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(worker_ui),
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--work-dir",
                str(work_dir),
            ],
            log_dir / "worker.log",
        )
        started.append(worker)
        _wait(
            lambda: "Successfully registered with master" in (log_dir / "worker.log").read_text(),
            timeout_s,
            "the Spark worker to register",
            worker,
            log_dir / "worker.log",
        )
    except BaseException:
        for proc in reversed(started):
            stop_pid(proc.pid, process=proc)
        raise
    state = ClusterState(
        master.pid, worker.pid, master_port, master_ui, worker_ui, str(work_dir), str(log_dir)
    )
    _state_file(settings).write_text(json.dumps(asdict(state)))
    return state


def _launch(args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """A Spark daemon in its own session (our SIGKILLs of a job's group must not reach it)."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_env(),
            start_new_session=True,
        )


def _wait(cond, timeout_s: float, what: str, proc: subprocess.Popen, log: Path) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ClusterError(f"{what} exited with code {proc.returncode}; see {log}")
        if cond():
            return
        time.sleep(0.2)
    stop_pid(proc.pid)
    raise ClusterError(f"{what} did not come up within {timeout_s:.0f} s; see {log}")


def stop_cluster(settings: Settings | None = None) -> ClusterState | None:
    settings = settings or get_settings()
    path = _state_file(settings)
    try:
        state = ClusterState(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    for pid in executor_pids(state) + [state.worker_pid, state.master_pid]:
        stop_pid(pid)
    path.unlink(missing_ok=True)
    return state


def executor_pids(state: ClusterState) -> list[int]:
    """PIDs of executor JVMs (CoarseGrainedExecutorBackend) launched by the worker."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            ppid = int((proc / "stat").read_text().split(")")[-1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"CoarseGrainedExecutorBackend" in cmdline and ppid == state.worker_pid:
            pids.append(int(proc.name))
    return pids
