"""``recovery ops up|status|down`` end to end in a fresh RECOVERY_HOME: the embedded broker,
Airflow's four components and the dashboard come up detached (twice is one copy), a DAG
triggered over the REST API runs to success through the LocalExecutor, the dashboard answers,
and ``down`` leaves no process of the stack behind. Cheap tests of stopping by PID and of the
generated credentials come first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recovery_lib.metrics.store import read_frame
from recovery_lib.ops.stack import COMPONENTS, OpsStack, _start_ticks, group_members, stop_group
from recovery_lib.processes import pid_alive
from recovery_lib.settings import Settings
from tests.helpers import wait_for

DAG = "checkpoint_gc"  # one dry-run GC task per configured job: cheap, no Spark, no Kafka


def ops(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recovery_lib.cli.main", "ops", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def logs(stack: OpsStack) -> str:
    return "\n".join(
        f"--- {path.name}\n{path.read_text(errors='replace')[-2500:]}"
        for path in sorted(stack.dir.glob("*.log"))
    )


CHILD_AND_SLEEP = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"
)


def test_down_stops_a_component_with_its_children_by_pid_and_leaves_foreign_pids(tmp_path):
    stack = OpsStack(Settings(home=tmp_path))
    steps: list[tuple[str, str, bool]] = []
    started: list[str] = []
    stack._up_process(
        "dashboard",
        [sys.executable, "-c", CHILD_AND_SLEEP],
        dict(os.environ),
        lambda *step: steps.append(step),
        started,
        [],
    )
    pid = stack.running_pid("dashboard")
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert pid is not None and started == ["dashboard"]
        wait_for(lambda: len(group_members(pid)) == 2, 10, "the component's child")
        # A pid file naming a process the stack did not start (a recycled PID) is not trusted.
        stack.pid_file("triggerer").write_text(f"{stranger.pid}\n")
        assert stack.running_pid("triggerer") is None
        rows = {row.name: row for row in stack.status()}
        assert rows["dashboard"].alive and rows["dashboard"].pid == pid
        assert not rows["triggerer"].alive
        assert stack.down() == [("dashboard", pid)]
        assert not pid_alive(pid) and not group_members(pid)
        assert stranger.poll() is None  # never signalled
        assert not list(stack.dir.glob("*.pid")) and not stack.state_file.exists()
    finally:
        stranger.kill()
        stranger.wait()
        if pid is not None and group_members(pid):
            stop_group(pid, 5.0)


def test_credentials_are_generated_once_and_private(tmp_path):
    from recovery_lib.ops.airflow_env import airflow_env, ensure_credentials

    first = ensure_credentials(tmp_path / "airflow")
    again = ensure_credentials(tmp_path / "airflow")
    assert first == again and len(first.password) >= 12 and len(first.jwt_secret) == 64
    for name in ("passwords.json", "secrets.json"):
        assert (tmp_path / "airflow" / name).stat().st_mode & 0o777 == 0o600
    env = airflow_env(
        tmp_path / "airflow",
        passwords_file=first.passwords_file,
        jwt_secret=first.jwt_secret,
        api_port=18080,
        settings=Settings(home=tmp_path),
    )
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:18080/execution/"
    assert env["AIRFLOW__CORE__DAGS_FOLDER"].endswith("dags")
    assert env["RECOVERY_HOME"] == str(tmp_path.resolve())


@pytest.mark.slow
def test_ops_up_runs_a_dag_triggered_over_rest_and_down_stops_every_pid(tmp_path: Path) -> None:
    import httpx

    home = tmp_path / "home"
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: gc_only, job: q3, input_prefix: nx}\n")
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}  # its own broker
    env.update(
        RECOVERY_HOME=str(home),
        RECOVERY_JOBS_FILE=str(jobs),
        RECOVERY_OPS_AIRFLOW_PORT="0",  # free ports: a stack of the user's may hold 8080/8501
        RECOVERY_OPS_DASHBOARD_PORT="0",
        SPARK_LOCAL_IP="127.0.0.1",
    )
    stack = OpsStack(Settings(home=home))
    started: dict[str, tuple[int, int | None]] = {}  # name -> (pid, start time): ours only
    began = time.monotonic()
    try:
        up = ops(env, "up")
        for name in COMPONENTS:
            pid = stack.running_pid(name)
            if pid is not None:
                started[name] = (pid, _start_ticks(pid))
        assert up.returncode == 0, up.stdout + up.stderr + logs(stack)
        assert set(started) == set(COMPONENTS), (started, up.stdout)
        password = json.loads((stack.airflow_home / "passwords.json").read_text())["admin"]
        assert (stack.airflow_home / "passwords.json").stat().st_mode & 0o777 == 0o600
        assert (stack.airflow_home / "secrets.json").stat().st_mode & 0o777 == 0o600
        airflow, dashboard = stack.airflow_url, stack.dashboard_url
        assert airflow and dashboard
        for shown in (airflow, dashboard, password):
            assert shown in up.stdout, up.stdout
        assert "in memory only" in " ".join(up.stdout.split()), up.stdout  # embedded broker
        print(f"ops up: {time.monotonic() - began:.0f} s")

        again = ops(env, "up")  # idempotent: the same processes, nothing new
        assert again.returncode == 0, again.stdout + again.stderr
        assert "already running" in again.stdout
        assert {n: stack.running_pid(n) for n in COMPONENTS} == {
            n: pid for n, (pid, _) in started.items()
        }
        status = ops(env, "status")
        assert status.returncode == 0, status.stdout
        assert all(str(pid) in status.stdout for pid, _ in started.values()), status.stdout

        token = httpx.post(
            f"{airflow}/auth/token", json={"username": "admin", "password": password}, timeout=10
        )
        assert token.status_code in (200, 201), token.text
        headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        api = f"{airflow}/api/v2/dags/{DAG}"

        def parsed() -> bool:
            return httpx.get(api, headers=headers, timeout=10).status_code == 200

        wait_for(parsed, 180, f"the dag-processor to parse {DAG}", interval_s=2)
        r = httpx.patch(api, headers=headers, json={"is_paused": False}, timeout=10)
        assert r.status_code == 200, r.text
        r = httpx.post(
            f"{api}/dagRuns",
            headers=headers,
            json={"logical_date": None, "conf": {"dry_run": True}},
            timeout=10,
        )
        assert r.status_code in (200, 201), r.text
        run_id = r.json()["dag_run_id"]
        state: dict[str, str] = {}

        def finished() -> bool:
            run = httpx.get(f"{api}/dagRuns/{run_id}", headers=headers, timeout=10).json()
            state["run"] = run["state"]
            return run["state"] in ("success", "failed")

        wait_for(finished, 300, "the triggered DAG run", interval_s=2)
        assert state["run"] == "success", logs(stack)
        rows = read_frame(home / "metrics.duckdb", "SELECT job, dry_run FROM gc_runs")
        assert ("gc_only", True) in set(zip(rows["job"], rows["dry_run"], strict=True))
        assert httpx.get(dashboard, timeout=10).status_code == 200
        print(f"DAG run done: {time.monotonic() - began:.0f} s")

        down = ops(env, "down")
        assert down.returncode == 0, down.stdout + down.stderr
        for name, (pid, _) in started.items():
            assert not pid_alive(pid), f"{name} (pid {pid}) survived `ops down`"
            assert not group_members(pid), f"{name}'s process group survived `ops down`"
        assert not list(stack.dir.glob("*.pid"))
        assert ops(env, "status").returncode == 3
    finally:
        for name in reversed(COMPONENTS):  # by PID, and only processes this test started
            if name in started:
                pid, ticks = started[name]
                if ticks is not None and _start_ticks(pid) == ticks:
                    stop_group(pid, 10.0)
