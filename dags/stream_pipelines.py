"""One DAG per configured pipeline of stages (dags/pipelines.yaml): ``pipeline_<name>``.

Every run makes sure the pipeline's daemon is up (it supervises every stage and recovers
failed ones by the pipeline's checkpoint protocol: recovery_lib/pipeline, docs/protocols.md),
then watches it for ``watch_minutes`` with a deferrable operator (the wait is in the
triggerer, not a worker slot). A failure inside the window fails the run with the daemon's
message: that is the alert. The next scheduled run picks up.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task

from recovery_lib.ops.airflow_tasks import WatchJobOperator, ensure_pipeline_running
from recovery_lib.pipeline.spec import load_pipelines

WATCH_MINUTES = 10.0

for pipeline in load_pipelines().values():
    with DAG(
        dag_id=f"pipeline_{pipeline.name}",
        description=(
            f"Launch and supervise pipeline {pipeline.name} ({len(pipeline.stages)} stages, "
            f"protocol {pipeline.protocol})"
        ),
        schedule=timedelta(minutes=WATCH_MINUTES),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        params={
            "restart_failed": Param(
                False, type="boolean", description="Start a fresh daemon if the last one failed."
            ),
            "watch_minutes": Param(WATCH_MINUTES, type="number", minimum=0),
        },
        tags=["streaming", "pipeline", pipeline.protocol],
        doc_md=__doc__,
    ) as dag:

        @task(task_id="ensure_running")
        def ensure(name: str = pipeline.name, params: dict | None = None) -> dict:
            return ensure_pipeline_running(name, bool((params or {}).get("restart_failed")))

        watch = WatchJobOperator(
            task_id="watch",
            job=pipeline.name,
            kind="pipeline",
            watch_s="{{ params.watch_minutes * 60 }}",
        )
        ensure() >> watch
    globals()[dag.dag_id] = dag
