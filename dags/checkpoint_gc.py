"""``checkpoint_gc``: hourly, for every configured job, remove checkpoint entries, state files,
determinants (and optionally input records) that no recovery can need: never past the
recovery line or the newest checkpoint shipped to a standby, keeping ``keep_batches``.
For every pipeline that has run here, the same per stage below the pipeline's recovery line,
and the in-flight topics between stages below what every downstream line can re-read
(recovery_lib/pipeline/gc.py). ``dry_run`` lists what it would delete. Bytes freed go to the
metrics store (gc_runs), whose own per-batch and per-second rows older than
``metrics_keep_hours`` go too."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task

from recovery_lib.ops.config import load_jobs
from recovery_lib.pipeline.spec import load_pipelines
from recovery_lib.settings import get_settings

with DAG(
    dag_id="checkpoint_gc",
    description="Checkpoint, state and determinant-log garbage collection",
    schedule=timedelta(minutes=get_settings().ops_gc_every_min),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "dry_run": Param(False, type="boolean", description="Only list what would go."),
        "keep_batches": Param(
            0, type="integer", minimum=0, description="0: each job's own keep_batches."
        ),
        "delete_input_records": Param(
            get_settings().ops_gc_delete_input_records,
            type="boolean",
            description="Also DeleteRecords on input topics (unshared).",
        ),
    },
    tags=["checkpoints"],
    doc_md=__doc__,
) as dag:

    @task
    def gc_job(name: str, params: dict | None = None) -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from recovery_lib.ops.gc import gc_job as run

        params = params or {}
        result = run(
            name,
            dry_run=bool(params.get("dry_run")),
            keep_batches=int(params.get("keep_batches") or 0) or None,
            delete_input_records=bool(params.get("delete_input_records")),
        )
        if result["errors"]:
            raise AirflowFailException(f"GC of {name}: {result['errors']}")
        return result

    @task
    def gc_pipeline(name: str, params: dict | None = None) -> dict:
        from recovery_lib.pipeline.gc import pipeline_gc, record
        from recovery_lib.pipeline.spec import get_pipeline, pipeline_home

        params = params or {}
        home = pipeline_home(name)
        if not (home / "checkpoints").exists():
            return {"pipeline": name, "notes": ["never ran here"]}
        dry_run = bool(params.get("dry_run"))
        keep = int(params.get("keep_batches") or 0) or 10
        report = pipeline_gc(get_pipeline(name), home, keep, dry_run)
        record(report, dry_run)
        return report

    @task
    def prune_metrics(params: dict | None = None) -> dict:
        """The metrics store's time series older than RECOVERY_METRICS_KEEP_HOURS."""
        from recovery_lib.metrics.store import init_store, prune

        settings = get_settings()
        store = settings.home / "metrics.duckdb"
        if (params or {}).get("dry_run"):
            return {"dry_run": True}
        init_store(store)
        return prune(store, settings.metrics_keep_hours)

    gc_job.expand(name=sorted(load_jobs()))
    gc_pipeline.expand(name=sorted(load_pipelines()))
    prune_metrics()
