"""``recovery_experiment``: run one recovery experiment from the Airflow UI ("Trigger DAG w/
config" shows a form): a faulty run with the chosen failure and a failure-free reference run
on the same input, judged by the oracle with the job's consistency contract. The JSON report
and the PNG timeline go to <RECOVERY_HOME>/reports/, the runs to the metrics store (dashboard:
Experiments)."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, task

from recovery_lib.experiment.runner import FAILURE_KINDS, SINKS, TABLE_SINKS
from recovery_lib.modes import mode_names

with DAG(
    dag_id="recovery_experiment",
    description="One recovery experiment with a real failure, judged by the oracle",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "job": Param(
            "q3",
            type="string",
            description="The job: module:attr of a JobSpec on the workers' PYTHONPATH, or a job "
            "of this repository's jobs/ (q1 ... q12, prices, lastbids)",
        ),
        "mode": Param("native", enum=list(mode_names()), description="Recovery mode"),
        "fail": Param("driver-kill", enum=[*FAILURE_KINDS, "none"], description="Failure kind"),
        "fail_at_s": Param(20, type="number", minimum=0, description="Seconds into the run"),
        "repeat": Param(1, type="integer", minimum=1, description="Number of failures"),
        "rate": Param(2000, type="number", exclusiveMinimum=0, description="Events per second"),
        "duration_s": Param(60, type="number", exclusiveMinimum=0, description="Seconds of input"),
        "sink": Param(
            "dedup",
            enum=[*SINKS, *TABLE_SINKS],
            description="Sink mode, or a lakehouse table (delta, iceberg; -append: unguarded)",
        ),
        "cluster": Param(False, type="boolean", description="On the standalone cluster"),
        "fail_on_inconsistent": Param(
            False, type="boolean", description="Fail the task when the oracle says inconsistent"
        ),
    },
    tags=["experiments"],
    doc_md=__doc__,
) as dag:

    @task
    def run_experiment(params: dict | None = None) -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report
        from recovery_lib.runtime.logs import ProgressThrottle
        from recovery_lib.settings import get_settings

        p = params or {}
        cfg = ExperimentConfig(
            query=p["job"],
            mode=p["mode"],
            fail=None if p["fail"] == "none" else p["fail"],
            fail_at_s=float(p["fail_at_s"]),
            repeat=int(p["repeat"]),
            rate=float(p["rate"]),
            duration_s=float(p["duration_s"]),
            sink=p["sink"],
            cluster=bool(p["cluster"]),
        )
        try:
            cfg.validate()
        except ValueError as exc:
            raise AirflowFailException(f"invalid experiment: {exc}") from exc
        # One progress line per phase and at most one per 10 s in the task log.
        result = Experiment(cfg, progress=ProgressThrottle(print)).run()
        reports = get_settings().home / "reports"
        path = write_report(result, reports / f"{result['experiment']}.json")
        summary = {
            "report": str(path),
            "verdict": result["consistency"]["verdict"],
            "guarantee": result["consistency"]["guarantee"],
            "restart_time_s": result["restart_time_s"],
            "recovery_time_s": result["recovery_time_s"],
            "output_gap_s": result["output_gap_s"],
        }
        # The task log's last line: the verdict and where the report is.
        print(f"verdict: {summary['verdict']} ({summary['guarantee']}); report: {path}")
        if p.get("fail_on_inconsistent") and summary["verdict"] != "consistent":
            raise AirflowFailException(f"oracle: {summary['verdict']} ({result['consistency']})")
        return summary

    run_experiment()
