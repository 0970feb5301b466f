"""Airflow 3 on one machine, the settings known to work here: SQLite, ``LocalExecutor`` with
parallelism 4, a JWT secret, the simple auth manager with one admin, components bound to
127.0.0.1, this repository's ``dags/``, and the Spark connection the consistency DAG submits
through. ``recovery ops up`` (ops/stack.py) and the tests (tests/airflow_helpers.py) both build
their environment here."""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from recovery_lib.settings import Settings, get_settings

REPO = Path(__file__).resolve().parents[2]
DAGS_FOLDER = REPO / "dags"
ADMIN_USER = "admin"


def spark_bin() -> Path:
    """pyspark's ``bin/`` (spark-submit): the Spark provider's hook looks for it on PATH."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin"


def write_private(path: Path, text: str) -> None:
    """Write a secret readable by its owner only (mode 0600 from the start, no window)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)  # an older file keeps its mode through O_TRUNC


@dataclass(frozen=True)
class AirflowCredentials:
    """The admin's password and the secrets every component must share."""

    password: str
    jwt_secret: str
    fernet_key: str
    passwords_file: Path

    @property
    def user(self) -> str:
        return ADMIN_USER


def ensure_credentials(home: Path) -> AirflowCredentials:
    """Generate the admin password, the JWT secret and the Fernet key once (files of mode 0600
    in ``home``); later calls read them back, so tokens and encrypted values stay valid across
    restarts."""
    passwords_file = home / "passwords.json"
    secrets_file = home / "secrets.json"
    if not passwords_file.exists():
        write_private(passwords_file, json.dumps({ADMIN_USER: secrets.token_urlsafe(12)}))
    if not secrets_file.exists():
        fernet = base64.urlsafe_b64encode(os.urandom(32)).decode()
        write_private(
            secrets_file, json.dumps({"jwt_secret": secrets.token_hex(32), "fernet_key": fernet})
        )
    stored = json.loads(secrets_file.read_text())
    return AirflowCredentials(
        password=json.loads(passwords_file.read_text())[ADMIN_USER],
        jwt_secret=stored["jwt_secret"],
        fernet_key=stored["fernet_key"],
        passwords_file=passwords_file,
    )


def airflow_env(
    home: Path,
    *,
    passwords_file: Path,
    jwt_secret: str,
    fernet_key: str | None = None,
    api_port: int | None = None,
    recovery_home: Path | None = None,
    jobs_file: Path | None = None,
    spark_master: str | None = None,
    settings: Settings | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of every Airflow command and component: ``base`` (default: this
    process's environment) plus Airflow's settings. With ``api_port`` the api-server's URL and
    the Execution API URL (where LocalExecutor's task processes report) point at that port."""
    settings = settings or get_settings()
    home.mkdir(parents=True, exist_ok=True)
    venv_bin = Path(sys.executable).parent
    base_env = dict(os.environ if base is None else base)
    conn_var = f"AIRFLOW_CONN_{settings.airflow_spark_conn_id.upper()}"
    env = {
        **base_env,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__CORE__AUTH_MANAGER": (
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
        ),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        conn_var: json.dumps({"conn_type": "spark", "host": spark_master or settings.spark_master}),
        "PATH": f"{spark_bin()}{os.pathsep}{venv_bin}{os.pathsep}" + base_env.get("PATH", ""),
        "RECOVERY_HOME": str(recovery_home or settings.home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": str(REPO),
    }
    if fernet_key:
        env["AIRFLOW__CORE__FERNET_KEY"] = fernet_key
    if jobs_file is not None:
        env["RECOVERY_JOBS_FILE"] = str(jobs_file)
    if api_port is not None:
        url = f"http://127.0.0.1:{api_port}"
        env["AIRFLOW__API__PORT"] = str(api_port)
        env["AIRFLOW__API__BASE_URL"] = url
        env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"{url}/execution/"
    return env
