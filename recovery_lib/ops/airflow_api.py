"""Airflow's REST API (v2) as the operations code uses it: log in, wait until the dag-processor
parsed a DAG, pause or unpause it, trigger a run and wait for its end."""

from __future__ import annotations

import time
from typing import Any

import httpx

from recovery_lib.errors import RecoveryError


class AirflowApiError(RecoveryError, RuntimeError):
    """Airflow answered with an error, or a DAG or run did not get where it was awaited."""


class AirflowApi:
    def __init__(self, url: str, user: str, password: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        answer = httpx.post(
            f"{self.url}/auth/token",
            json={"username": user, "password": password},
            timeout=timeout_s,
        )
        if answer.status_code not in (200, 201):
            raise AirflowApiError(f"Airflow at {url} refused the login of {user}: {answer.text}")
        self.headers = {"Authorization": f"Bearer {answer.json()['access_token']}"}

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(
            method,
            f"{self.url}/api/v2/{path}",
            headers=self.headers,
            timeout=self.timeout_s,
            **kwargs,
        )

    def wait_parsed(self, dag_id: str, timeout_s: float = 300.0) -> None:
        """Until the dag-processor has parsed ``dag_id``."""
        deadline = time.monotonic() + timeout_s
        while self._call("GET", f"dags/{dag_id}").status_code != 200:
            if time.monotonic() > deadline:
                raise AirflowApiError(
                    f"DAG {dag_id} not parsed within {timeout_s:.0f} s: see the dag-processor's "
                    "log and `airflow dags list-import-errors`"
                )
            time.sleep(2.0)

    def set_paused(self, dag_id: str, paused: bool) -> None:
        answer = self._call("PATCH", f"dags/{dag_id}", json={"is_paused": paused})
        if answer.status_code != 200:
            raise AirflowApiError(
                f"could not {'pause' if paused else 'unpause'} {dag_id}: {answer.text}"
            )

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        answer = self._call(
            "POST", f"dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf or {}}
        )
        if answer.status_code not in (200, 201):
            raise AirflowApiError(f"could not trigger {dag_id}: {answer.text}")
        return str(answer.json()["dag_run_id"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self._call("GET", f"dags/{dag_id}/dagRuns/{run_id}").json()["state"])

    def wait_run(self, dag_id: str, run_id: str, timeout_s: float = 900.0) -> str:
        """The run's final state (success, failed); raises when it has none in time."""
        deadline = time.monotonic() + timeout_s
        while (state := self.run_state(dag_id, run_id)) not in ("success", "failed"):
            if time.monotonic() > deadline:
                raise AirflowApiError(
                    f"{dag_id} run {run_id} still {state} after {timeout_s:.0f} s"
                )
            time.sleep(2.0)
        return state

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        """The DAG's runs (newest first, at most 100)."""
        answer = self._call(
            "GET", f"dags/{dag_id}/dagRuns", params={"order_by": "-logical_date", "limit": 100}
        )
        return list(answer.json().get("dag_runs", [])) if answer.status_code == 200 else []
