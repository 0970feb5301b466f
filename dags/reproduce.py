"""``reproduce``: each paper's key results beside ours, from the Airflow UI ("Trigger DAG w/
config" shows a form). Reads the benchmark reports (setting RECOVERY_BENCHMARK_REPORTS,
docs/benchmarks) and writes <paper>.md, .json and .png to <RECOVERY_HOME>/reports/reproduction
(`recovery reproduce`). It does not run the benchmarks: rows no report answers yet are "not
measured", with the benchmark command that produces them."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, task

from recovery_lib.reproduce.papers import PAPERS

with DAG(
    dag_id="reproduce",
    description="Each paper's numbers beside ours, with every disagreement and why",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "paper": Param("all", enum=[*PAPERS, "all"], description="Which paper (or all)"),
    },
    tags=["experiments"],
    doc_md=__doc__,
) as dag:

    @task
    def reproduce(params: dict | None = None) -> dict:
        from recovery_lib.reproduce.report import write
        from recovery_lib.settings import get_settings

        settings = get_settings()
        paper = (params or {}).get("paper", "all")
        out = settings.home / "reports" / "reproduction"
        summary = {}
        for key in PAPERS if paper == "all" else [paper]:
            paths, rows = write(key, settings.benchmark_reports, out)
            verdicts = [c.verdict for c in rows]
            summary[key] = {
                "report": str(paths["md"]),
                **{v: verdicts.count(v) for v in sorted(set(verdicts))},
            }
        return summary

    reproduce()
