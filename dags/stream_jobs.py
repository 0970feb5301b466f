"""One DAG per configured streaming job (dags/streaming_jobs.yaml): ``stream_<name>``.

Every run makes sure the job's daemon is up (``ensure_running``: starts it, or, when the
daemon spent its restart budget, fails with the reason unless the job's policy or the
``restart_failed`` param says restart), then watches it for ``watch_minutes`` with a deferrable
operator: the wait happens in the triggerer, not in a worker slot. A failure inside the window
fails the run with the daemon's message: that is the alert. The next scheduled run picks up.
A replicated job (``mode: kazoo|liverobin``) also gets ``replica_health`` after the
watch: its replicas, leader, lag and replacements, failing when a dead replica was not
replaced or its replacement did not catch up (the job itself still serves on one replica).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task

from recovery_lib.ops.airflow_tasks import WatchJobOperator, ensure_running, replica_health
from recovery_lib.ops.config import load_jobs

for job in load_jobs().values():
    with DAG(
        dag_id=f"stream_{job.name}",
        description=f"Launch and supervise {job.query} ({job.mode}, {job.placement})",
        schedule=timedelta(minutes=job.watch_minutes),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        params={
            "restart_failed": Param(
                job.on_exhausted == "restart",
                type="boolean",
                description="Start a fresh daemon even if the last one gave up.",
            ),
            "watch_minutes": Param(job.watch_minutes, type="number", minimum=0),
        },
        tags=["streaming", job.query, job.mode],
        doc_md=__doc__,
    ) as dag:

        @task(task_id="ensure_running")
        def ensure(name: str = job.name, params: dict | None = None) -> dict:
            return ensure_running(name, bool((params or {}).get("restart_failed")))

        watch = WatchJobOperator(
            task_id="watch",
            job=job.name,
            watch_s="{{ params.watch_minutes * 60 }}",
        )
        ensure() >> watch
        if job.recovery_mode.replicated:

            @task(task_id="replica_health")
            def replicas(name: str = job.name) -> dict:
                return replica_health(name)

            watch >> replicas()
    globals()[dag.dag_id] = dag
