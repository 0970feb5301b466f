"""The dashboard's supervised-jobs table says where each job's output goes: its topic's sink
mode or the lakehouse table, from the jobs file entry its daemon's run recorded."""

from __future__ import annotations

from recovery_lib.metrics import views
from recovery_lib.metrics.store import MetricsStore


def status_row(job: str, run_id: str, ts_ms: int) -> tuple:
    return (job, ts_ms, "running", run_id, 1, 2, 0, ts_ms, 5, None, None, "")


def test_each_job_shows_its_topic_sink_mode_or_its_table(tmp_path):
    path = tmp_path / "metrics.duckdb"
    with MetricsStore(path) as store:
        topic = store.start_run(
            "q3", "native", {"job": "a", "sink": "topic", "sink_mode": "release"}
        )
        table = store.start_run(
            "q3", "native", {"job": "b", "sink": "delta", "table": "/lake/b", "sink_mode": "dedup"}
        )
        old = store.start_run("q3", "native", {"job": "c"})  # before jobs had a sink key
        store.add("job_status", [status_row("a", topic, 1), status_row("b", table, 1)])
        store.add("job_status", [status_row("c", old, 1), status_row("b", table, 2)])
        store.flush()
    frame = views.job_status(path).set_index("job")
    assert frame.loc["a", "output"] == "topic · release"
    assert frame.loc["b", "output"] == "delta table · /lake/b"
    assert frame.loc["c", "output"] == "topic · dedup"
    assert list(frame.index) == ["a", "b", "c"] and frame.loc["b", "ts_ms"] == 2
