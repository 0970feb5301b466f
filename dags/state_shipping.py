"""``state_shipping``: every few minutes, for every configured job with a standby, one state-
shipping round (a checksummed, incremental copy of the primary's checkpoint into the standby's
storage; the standby's own shipper also copies continuously), recorded with the lag it leaves
(metrics table standby_shipments, shown on the dashboard). Fails when a job's standby lags more
than ``max_lag_batches`` behind, so the alert reaches whoever watches Airflow."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task

from recovery_lib.ops.config import load_jobs

with DAG(
    dag_id="state_shipping",
    description="Ship checkpoints to standby jobs and watch their lag",
    schedule=timedelta(minutes=5),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "max_lag_batches": Param(
            50, type="integer", minimum=0, description="Fail when a standby is further behind."
        ),
    },
    tags=["standby", "checkpoints"],
    doc_md=__doc__,
) as dag:

    @task
    def ship(name: str, params: dict | None = None) -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from recovery_lib.ops.shipping import NoStandby, ship_job

        try:
            result = ship_job(name)
        except NoStandby as exc:
            raise AirflowFailException(str(exc)) from exc
        limit = int((params or {}).get("max_lag_batches", 50))
        if result["lag"]["batches"] > limit:
            raise AirflowFailException(
                f"standby of {name} is {result['lag']['batches']} batches behind (limit "
                f"{limit}); see `recovery standby status {name}`"
            )
        return result

    ship.expand(name=sorted(n for n, job in load_jobs().items() if job.standby_dir is not None))
