"""The operations stack on one machine without Docker (``recovery ops up|status|down``).

Components, started in this order and stopped in the reverse one:

- ``broker``: the embedded Kafka-protocol broker, unless ``KAFKA_BOOTSTRAP`` names a cluster or
  an embedded broker already runs (then that one is used and left alone by ``down``);
- Airflow 3: ``api-server``, ``scheduler``, ``dag-processor``, ``triggerer`` on 127.0.0.1 (the
  scheduler's and triggerer's log servers, which bind every interface, are not started) with
  the settings of ``ops/airflow_env.py`` (SQLite, LocalExecutor, this repository's ``dags/``),
  ``AIRFLOW_HOME`` = ``<RECOVERY_HOME>/ops/airflow``, an admin password and a JWT secret
  generated once (files of mode 0600);
- ``dashboard``: the Streamlit app of ``dashboard/app.py`` on 127.0.0.1.

Each runs detached in its own session (process group = its PID) with ``<name>.log`` and
``<name>.pid`` in ``<RECOVERY_HOME>/ops/``; ``stack.json`` keeps the ports and each process's
start time, so a recycled PID is never taken for ours. ``up`` starts only what is not running
(twice is harmless) and waits until Airflow's API and the dashboard answer; ``down`` stops by
PID: SIGTERM, wait, then SIGTERM/SIGKILL to what is left of the process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from recovery_lib.errors import RecoveryError
from recovery_lib.files import write_atomic
from recovery_lib.kafka import broker as broker_mod
from recovery_lib.ops.airflow_env import (
    REPO,
    AirflowCredentials,
    airflow_env,
    ensure_credentials,
)
from recovery_lib.processes import free_port, pid_alive, stop_pid
from recovery_lib.settings import Settings, get_settings

AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
COMPONENTS = ("broker", *AIRFLOW_COMPONENTS, "dashboard")
DASHBOARD_APP = REPO / "dashboard" / "app.py"


class OpsStackError(RecoveryError, RuntimeError):
    """The stack could not be started; the message says which component and where its log is."""


@dataclass
class ComponentStatus:
    name: str
    pid: int | None
    alive: bool
    url: str | None
    log: Path | None
    note: str = ""


@dataclass
class StackInfo:
    airflow_url: str
    dashboard_url: str
    user: str
    password: str
    passwords_file: Path
    bootstrap: str
    started: list[str] = field(default_factory=list)
    already_running: list[str] = field(default_factory=list)


# Progress callback: (step, message, done).
Step = Callable[[str, str, bool], None]


def _start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot): with the PID, its identity."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _choose_port(configured: int) -> int:
    if configured and _port_free(configured):
        return configured
    return free_port()


def _http_ok(url: str, timeout_s: float = 3.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - loopback
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # exited while we looked
    return members


def _log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class OpsStack:
    """Start, inspect and stop the operations stack; everything it owns is in ``ops_dir``."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()
        self.dir = self.settings.ops_dir
        self.airflow_home = self.dir / "airflow"
        self.state_file = self.dir / "stack.json"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # ------------------------------------------------------------------ files and identity
    def pid_file(self, name: str) -> Path:
        return self.dir / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.dir / f"{name}.log"

    def _state(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def _save_state(self, state: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.state_file, json.dumps(state, indent=2))

    def _recorded_pid(self, name: str) -> int | None:
        try:
            return int(self.pid_file(name).read_text().strip())
        except (OSError, ValueError):
            return None

    def running_pid(self, name: str) -> int | None:
        """The PID of the component this stack started, if that very process still runs."""
        pid = self._recorded_pid(name)
        if pid is None or not pid_alive(pid):
            return None
        recorded = self._state().get("start_ticks", {}).get(name)
        if recorded is None or _start_ticks(pid) != recorded:
            return None  # not the process we started (a recycled PID): never signal it
        return pid

    def _record(self, name: str, pid: int) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pid_file(name).write_text(f"{pid}\n")
        state = self._state()
        state.setdefault("start_ticks", {})[name] = _start_ticks(pid)
        self._save_state(state)

    def _forget(self, name: str) -> None:
        self.pid_file(name).unlink(missing_ok=True)
        state = self._state()
        if name in state.get("start_ticks", {}):
            del state["start_ticks"][name]
            self._save_state(state)

    # ------------------------------------------------------------------ URLs
    @property
    def airflow_url(self) -> str | None:
        port = self._state().get("airflow_port")
        return f"http://127.0.0.1:{port}" if port else None

    @property
    def dashboard_url(self) -> str | None:
        port = self._state().get("dashboard_port")
        return f"http://127.0.0.1:{port}" if port else None

    def credentials(self) -> AirflowCredentials:
        return ensure_credentials(self.airflow_home)

    def _env(self, credentials: AirflowCredentials, api_port: int) -> dict[str, str]:
        return airflow_env(
            self.airflow_home,
            passwords_file=credentials.passwords_file,
            jwt_secret=credentials.jwt_secret,
            fernet_key=credentials.fernet_key,
            api_port=api_port,
            settings=self.settings,
        )

    # ------------------------------------------------------------------ up
    def up(self, step: Step | None = None) -> StackInfo:
        """Start what is not running, wait until Airflow's API and the dashboard answer."""
        report: Step = step or (lambda _name, _message, _done: None)
        self.dir.mkdir(parents=True, exist_ok=True)
        started: list[str] = []
        already: list[str] = []
        try:
            bootstrap = self._up_broker(report, started, already)
            state = self._state()
            # A recorded port is kept while it can be: running components know it.
            for name, key, configured in (
                ("api-server", "airflow_port", self.settings.ops_airflow_port),
                ("dashboard", "dashboard_port", self.settings.ops_dashboard_port),
            ):
                recorded = state.get(key)
                if self.running_pid(name) is None and not (recorded and _port_free(recorded)):
                    state[key] = _choose_port(configured)
            self._save_state(state)
            credentials = self.credentials()
            env = self._env(credentials, int(state["airflow_port"]))
            missing = [c for c in AIRFLOW_COMPONENTS if self.running_pid(c) is None]
            if missing:
                report("airflow db", "airflow db migrate (SQLite) ...", False)
                self._migrate(env)
                report("airflow db", "airflow db migrated", True)
            for component in AIRFLOW_COMPONENTS:
                args = [sys.executable, "-m", "airflow", component]
                if component == "api-server":
                    args += ["--host", "127.0.0.1", "--port", str(state["airflow_port"])]
                elif component in ("scheduler", "triggerer"):
                    # Their log servers bind 0.0.0.0 on fixed ports (8793, 8794); with
                    # LocalExecutor the api-server reads task and trigger logs from disk.
                    args.append("--skip-serve-logs")
                self._up_process(component, args, env, report, started, already)
            dashboard_args = [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                str(DASHBOARD_APP),
                "--server.address",
                "127.0.0.1",
                "--server.port",
                str(state["dashboard_port"]),
                "--server.headless",
                "true",
                "--server.fileWatcherType",
                "none",
                "--browser.gatherUsageStats",
                "false",
            ]
            dashboard_env = {
                **os.environ,
                "RECOVERY_HOME": str(self.settings.home),
                "PYTHONPATH": str(REPO),
            }
            self._up_process("dashboard", dashboard_args, dashboard_env, report, started, already)
            airflow_url, dashboard_url = self.airflow_url, self.dashboard_url
            assert airflow_url is not None and dashboard_url is not None
            self._wait_http(
                "api-server", f"{airflow_url}/api/v2/monitor/health", "Airflow API", report
            )
            self._wait_http("dashboard", f"{dashboard_url}/_stcore/health", "dashboard", report)
        except BaseException as exc:
            for name in reversed(started):  # leave nothing half-started behind
                try:
                    self._stop_component(name)
                except Exception as stop_exc:  # noqa: BLE001 - the start-up error is the one
                    exc.add_note(f"stopping {name} afterwards failed too: {stop_exc!r}")
            raise
        return StackInfo(
            airflow_url=airflow_url,
            dashboard_url=dashboard_url,
            user=credentials.user,
            password=credentials.password,
            passwords_file=credentials.passwords_file,
            bootstrap=bootstrap,
            started=started,
            already_running=already,
        )

    def _up_broker(self, report: Step, started: list[str], already: list[str]) -> str:
        if self.settings.kafka_bootstrap:
            report("broker", f"external Kafka: {self.settings.kafka_bootstrap}", True)
            return self.settings.kafka_bootstrap
        running = broker_mod.running_state(self.settings)
        if running is not None:
            ours = self.running_pid("broker") == running.pid
            report("broker", f"running: {running.bootstrap} (pid {running.pid})", True)
            if ours:
                already.append("broker")
            return running.bootstrap
        report("broker", "starting the embedded broker ...", False)
        broker = broker_mod.EmbeddedBroker(self.settings)  # Kafka: the durable <home>/kafka
        state = broker.start(detached=True)
        # The broker's log, under a stable name next to the other components' logs.
        log = self.log_file("broker")
        log.unlink(missing_ok=True)
        log.symlink_to(os.path.relpath(state.log_file, log.parent))
        self._record("broker", state.pid)
        started.append("broker")
        report("broker", f"embedded broker on {state.bootstrap} (pid {state.pid})", True)
        return state.bootstrap

    def _migrate(self, env: dict[str, str]) -> None:
        log = self.log_file("airflow-db-migrate")
        with open(log, "wb") as out:
            done = subprocess.run(
                [sys.executable, "-m", "airflow", "db", "migrate"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=REPO,
                timeout=self.settings.ops_start_timeout_s,
                check=False,
            )
        if done.returncode != 0:
            raise OpsStackError(
                f"`airflow db migrate` failed (exit {done.returncode}); see {log}:\n"
                + _log_tail(log)
            )

    def _up_process(
        self,
        name: str,
        args: list[str],
        env: dict[str, str],
        report: Step,
        started: list[str],
        already: list[str],
    ) -> None:
        pid = self.running_pid(name)
        if pid is not None:
            already.append(name)
            report(name, f"already running (pid {pid})", True)
            return
        report(name, f"starting {name} ...", False)
        self.dir.mkdir(parents=True, exist_ok=True)
        log = self.log_file(name)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                args,
                env=env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopped as one
            )
        self._procs[name] = proc
        self._record(name, proc.pid)
        started.append(name)
        report(name, f"started (pid {proc.pid})", True)

    def _wait_http(self, owner: str, url: str, what: str, report: Step) -> None:
        report(f"wait {what}", f"waiting for the {what} at {url} ...", False)
        started = time.monotonic()
        deadline = started + self.settings.ops_start_timeout_s
        while time.monotonic() < deadline:
            if _http_ok(url):
                report(
                    f"wait {what}",
                    f"{what} answers ({time.monotonic() - started:.0f} s)",
                    True,
                )
                return
            dead = [n for n in self._expected() if self.running_pid(n) is None]
            if dead:
                name = dead[0]
                raise OpsStackError(
                    f"{name} exited during start-up; see {self.log_file(name)}:\n"
                    + _log_tail(self.log_file(name))
                )
            time.sleep(1.0)
        raise OpsStackError(
            f"the {what} did not answer at {url} within {self.settings.ops_start_timeout_s:.0f} s;"
            f" see {self.log_file(owner)}"
        )

    def _expected(self) -> list[str]:
        """The components this stack runs (the broker only when it started it)."""
        names = list(AIRFLOW_COMPONENTS) + ["dashboard"]
        if self._recorded_pid("broker") is not None:
            names.insert(0, "broker")
        return names

    # ------------------------------------------------------------------ status
    def status(self) -> list[ComponentStatus]:
        rows = [self._broker_status()]
        urls = {"api-server": self.airflow_url, "dashboard": self.dashboard_url}
        for name in (*AIRFLOW_COMPONENTS, "dashboard"):
            pid = self._recorded_pid(name)
            rows.append(
                ComponentStatus(
                    name=name,
                    pid=pid,
                    alive=self.running_pid(name) is not None,
                    url=urls.get(name),
                    log=self.log_file(name),
                    note="" if pid is not None else "not started",
                )
            )
        return rows

    def _broker_status(self) -> ComponentStatus:
        if self.settings.kafka_bootstrap:
            external = self.settings.kafka_bootstrap
            return ComponentStatus("broker", None, True, external, None, "KAFKA_BOOTSTRAP")
        running = broker_mod.running_state(self.settings)
        ours = self._recorded_pid("broker")
        if running is not None and running.pid != ours:
            return ComponentStatus(
                "broker",
                running.pid,
                True,
                running.bootstrap,
                Path(running.log_file),
                "started outside the stack: `down` leaves it",
            )
        return ComponentStatus(
            "broker",
            ours,
            self.running_pid("broker") is not None,
            running.bootstrap if running is not None else None,
            self.log_file("broker"),
            "" if ours is not None else "not started",
        )

    # ------------------------------------------------------------------ down
    def down(self, step: Step | None = None) -> list[tuple[str, int]]:
        """Stop every component this stack started, in reverse order, by PID; returns
        (name, pid) of what was stopped. Stale pid files are removed."""
        report: Step = step or (lambda _name, _message, _done: None)
        stopped = []
        for name in reversed(COMPONENTS):
            pid = self.running_pid(name)
            if pid is None:
                self._forget(name)
                continue
            report(name, f"stopping {name} (pid {pid}) ...", False)
            self._stop_component(name)
            stopped.append((name, pid))
            report(name, f"stopped {name} (pid {pid})", True)
        state = self._state()
        if not state.get("start_ticks"):
            self.state_file.unlink(missing_ok=True)
        return stopped

    def _stop_component(self, name: str) -> None:
        pid = self.running_pid(name)
        if pid is not None:
            stop_group(pid, self.settings.ops_stop_timeout_s, self._procs.pop(name, None))
        if name == "broker":
            recorded = broker_mod.read_state(self.settings)
            if recorded is not None and recorded.pid == pid:
                self.settings.broker_state_file.unlink(missing_ok=True)
        self._forget(name)


def stop_group(pid: int, timeout_s: float, process: subprocess.Popen[bytes] | None = None) -> None:
    """Stop a process that leads its own process group (started with a new session): SIGTERM
    to it, wait up to ``timeout_s`` for it to exit (it stops its own children), then SIGTERM
    and finally SIGKILL to whatever is left in its group."""

    def wait(cond: Callable[[], bool], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if process is not None:
                process.poll()
            if cond():
                return True
            time.sleep(0.1)
        return cond()

    try:
        leads_group = os.getpgid(pid) == pid
    except ProcessLookupError:
        leads_group = False
    if not leads_group:  # a process alone: SIGTERM, then SIGKILL
        stop_pid(pid, timeout_s, process)
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    wait(lambda: not pid_alive(pid), timeout_s)
    for sig, seconds in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if not group_members(pid):
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        wait(lambda: not group_members(pid), seconds)
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=1)
