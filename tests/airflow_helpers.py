"""Airflow for tests: an isolated AIRFLOW_HOME (the library's settings: SQLite, LocalExecutor,
parallelism 4, a generated JWT secret, one admin user), ``dag.test()`` in a subprocess (so each
test gets a clean Airflow import with its own configuration), and the real components for
end-to-end."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

from recovery_lib.ops.airflow_env import airflow_env as library_airflow_env
from recovery_lib.ops.airflow_env import write_private

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "recovery-test"


def airflow_env(root: Path, recovery_home: Path, jobs_file: Path) -> dict[str, str]:
    """The library's Airflow environment (recovery_lib/ops/airflow_env.py, also what
    `recovery ops up` runs), with a fixed test password and a fresh JWT secret."""
    home = root / "airflow"
    passwords = home / "passwords.json"
    write_private(passwords, json.dumps({"admin": PASSWORD}))
    return library_airflow_env(
        home,
        passwords_file=passwords,
        jwt_secret=secrets.token_hex(32),
        recovery_home=recovery_home,
        jobs_file=jobs_file,
        spark_master="local[2]",
    )


def airflow(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "airflow", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"airflow {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


DAG_TEST = """
import json, sys
try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:
    from airflow.models.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
if sys.argv[2] == "--import-errors":
    print("RESULT" + json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()},
                                 "dags": sorted(bag.dag_ids),
                                 "tasks": {d: sorted(bag.dags[d].task_ids)
                                           for d in bag.dag_ids}}))
    sys.exit(0)
dag = bag.get_dag(sys.argv[2])
run = dag.test(run_conf=json.loads(sys.argv[3]))
tis = {ti.task_id + (f"[{ti.map_index}]" if ti.map_index >= 0 else ""): str(ti.state)
       for ti in run.get_task_instances()}
print("RESULT" + json.dumps({"state": str(run.state), "tasks": tis}))
"""


def dag_test(env: dict[str, str], dag_id: str, conf: dict | None = None, timeout: float = 600):
    """Run ``dag.test()`` in a fresh interpreter; returns {"state", "tasks"} (and the log)."""
    proc = subprocess.run(
        [sys.executable, "-c", DAG_TEST, str(REPO / "dags"), dag_id, json.dumps(conf or {})],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    if not lines:
        raise RuntimeError(f"dag.test of {dag_id} gave no result:\n{proc.stdout}\n{proc.stderr}")
    result = json.loads(lines[-1][len("RESULT") :])
    result["log"] = proc.stdout[-20_000:] + proc.stderr[-20_000:]
    return result
