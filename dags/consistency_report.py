"""``consistency_report``: daily, for every configured job that has committed batches,
snapshot its last committed batch, submit a failure-free reference run of the same query
bounded to that batch's offsets (SparkSubmitOperator, the apache-spark provider; connection
``spark_default``: ``local[2]`` or the standalone master), then judge the job's output with the
oracle and the query's Great Expectations suite. Every stage of every configured pipeline
(checkpoint protocols coor, unc, cic) is judged the same way against its own input topics: a
stage consistent with what it read, for every stage, makes the pipeline's output one a
failure-free run could produce. Also runs the metrics-table suites. Reports go to the metrics
store; an inconsistency or a failed expectation fails the task."""

from __future__ import annotations

import sys
from datetime import timedelta

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, TaskGroup, task

from recovery_lib.ops.airflow_tasks import application_path
from recovery_lib.ops.config import load_jobs
from recovery_lib.pipeline.spec import load_pipelines
from recovery_lib.settings import get_settings
from recovery_lib.spark.session import kafka_connector_jars

SETTINGS = get_settings()
SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.pyspark.python": sys.executable,
    "spark.pyspark.driver.python": sys.executable,
}


def reference_run(group: str) -> SparkSubmitOperator:
    """The failure-free reference run of ``group``, with the arguments its snapshot task
    computed (the generic job launcher; its args name the job)."""
    return SparkSubmitOperator(
        task_id="reference_run",
        application=application_path(group),
        application_args="{{ ti.xcom_pull(task_ids='" + group + ".snapshot')['args'] }}",
        conn_id=SETTINGS.airflow_spark_conn_id,
        conf=SPARK_CONF,
        # spark-submit starts the JVM: Spark's Kafka connector goes on its --jars.
        jars=",".join(kafka_connector_jars(SETTINGS)) or None,
        env_vars={"SPARK_LOCAL_IP": "127.0.0.1", "RECOVERY_HOME": str(SETTINGS.home)},
        name=f"reference_{group}",
    )


with DAG(
    dag_id="consistency_report",
    description="Oracle + Great Expectations on every job's output against a reference run",
    schedule=timedelta(minutes=SETTINGS.ops_consistency_every_min),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,  # the reference's argument list comes from XCom
    tags=["consistency"],
    doc_md=__doc__,
) as dag:
    for job in load_jobs().values():
        with TaskGroup(group_id=job.name):

            @task(task_id="snapshot")
            def snapshot(name: str = job.name, run_id: str | None = None) -> dict:
                import re

                from airflow.sdk.exceptions import AirflowSkipException

                from recovery_lib.ops.airflow_tasks import reference_submit_args
                from recovery_lib.ops.config import get_job
                from recovery_lib.runtime.checkpoint import last_committed

                if last_committed(get_job(name).checkpoint) is None:
                    raise AirflowSkipException(f"job {name} has no committed batch yet")
                tag = re.sub(r"[^A-Za-z0-9]+", "_", run_id or "manual")[-40:]
                return reference_submit_args(name, tag)

            reference = reference_run(job.name)

            @task(task_id="compare")
            def compare(info: dict, name: str = job.name) -> dict:
                from recovery_lib.ops.airflow_tasks import judge_output
                from recovery_lib.ops.config import get_job

                job_ = get_job(name)
                return judge_output(name, job_.job, job_.out_topic, info, job_.sink_mode)

            info = snapshot()
            info >> reference >> compare(info)

    for pipeline in load_pipelines().values():
        for stage in pipeline.stages:
            group = f"pipeline_{pipeline.name}_{stage.name}"
            with TaskGroup(group_id=group):

                @task(task_id="snapshot")
                def stage_snapshot(
                    name: str = pipeline.name, stage_name: str = stage.name,
                    run_id: str | None = None,
                ) -> dict:  # fmt: skip
                    import re

                    from airflow.sdk.exceptions import AirflowSkipException

                    from recovery_lib.ops.airflow_tasks import stage_reference_submit_args
                    from recovery_lib.pipeline.runner import stage_checkpoint
                    from recovery_lib.pipeline.spec import get_pipeline, pipeline_home
                    from recovery_lib.runtime.checkpoint import last_committed

                    spec = get_pipeline(name)
                    checkpoint = stage_checkpoint(pipeline_home(name), spec.stage(stage_name))
                    if last_committed(checkpoint) is None:
                        raise AirflowSkipException(
                            f"pipeline {name} stage {stage_name} has no committed batch yet"
                        )
                    tag = re.sub(r"[^A-Za-z0-9]+", "_", run_id or "manual")[-40:]
                    return stage_reference_submit_args(name, stage_name, tag)

                stage_reference = reference_run(group)

                @task(task_id="compare")
                def stage_compare(info: dict, label: str = f"{pipeline.name}.{stage.name}") -> dict:
                    from recovery_lib.ops.airflow_tasks import judge_output

                    # Every stage writes through the release sink (pipeline/runner.py).
                    return judge_output(
                        f"pipeline stage {label}", info["job"], info["run_topic"], info, "release"
                    )

                stage_info = stage_snapshot()
                stage_info >> stage_reference >> stage_compare(stage_info)

    @task
    def metrics_expectations() -> list[dict]:
        from airflow.sdk.exceptions import AirflowFailException

        from recovery_lib.metrics.store import MetricsStore
        from recovery_lib.verify.expectations import record, validate_metrics

        path = SETTINGS.home / "metrics.duckdb"
        results = validate_metrics(path)
        with MetricsStore(path) as store:
            for result in results:
                record(store, None, result)
        failed = [r.to_dict() for r in results if not r.success]
        if failed:
            raise AirflowFailException(f"metrics tables fail their suites: {failed}")
        return [r.to_dict() for r in results]

    metrics_expectations()
