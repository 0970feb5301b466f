"""A restart's first batch from Spark's event log (metrics/event_log.py).

The event log here is written by the test in Spark's own layout and event shapes (as Spark
4.2 writes them: tests/test_spare_e2e.py reads a real one), so each rule is checked alone:
which application is the restart's, where the batch's driver phases and tasks go, and how a
task splits at its Python worker's fork, imports and first call.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recovery_lib.errors import ConfigurationError
from recovery_lib.io.worker_timing import WORKERS_FILE
from recovery_lib.metrics.event_log import first_batch

S = "org.apache.spark.sql.streaming.StreamingQueryListener$"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def _app(where: Path, app: str, start: int, query_start: int, batch: int = 0) -> None:
    """One application: starts at ``start``, its query at ``query_start``, then one batch of
    two tasks (a source read and a state task) in one job."""
    events = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": start},
        *_query(query_start, batch),
    ]
    d = where / f"eventlog_v2_{app}"
    d.mkdir(parents=True)
    (d / f"events_1_{app}").write_text("\n".join(json.dumps(e) for e in events) + "\n")


def _query(
    query_start: int, batch: int, name: str = "q", tasks: tuple[int, int] = (7, 8), job: int = 0
) -> list[dict]:
    """A query's start and its batch: one job of two stages, a task each, 1,400 rows."""
    b = query_start + 1_000
    return [
        {"Event": f"{S}QueryStartedEvent", "timestamp": _iso(query_start), "name": name,
         "runId": f"run-{name}"},
        {
            "Event": "SparkListenerJobStart",
            "Job ID": job,
            "Submission Time": b + 1_500,
            "Properties": {"streaming.sql.batchId": str(batch)},
            "Stage Infos": [
                {"Stage ID": 2 * job + i, "Stage Name": "start at x", "RDD Info": [{"Name": rdd}]}
                for i, rdd in enumerate(("DataSourceRDD", "StateStoreRDD"))
            ],
        },
        *[
            {
                "Event": "SparkListenerTaskEnd",
                "Stage ID": stage,
                "Task Info": {"Task ID": tid, "Launch Time": launch, "Finish Time": finish},
                "Task Metrics": {
                    "Executor Deserialize Time": 10,
                    "Executor Run Time": finish - launch - 10,
                    "Executor CPU Time": 200_000_000,
                    "JVM GC Time": 0,
                },
            }
            for stage, tid, launch, finish in (
                (2 * job, tasks[0], b + 1_600, b + 4_600),
                (2 * job + 1, tasks[1], b + 4_700, b + 5_000),
            )
        ],
        {"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": b + 5_100},
        {
            "Event": f"{S}QueryProgressEvent",
            "progress": {
                "batchId": batch,
                "runId": f"run-{name}",
                "timestamp": _iso(b),
                "durationMs": {"latestOffset": 100, "walCommit": 100, "queryPlanning": 300,
                               "addBatch": 5_000, "commitOffsets": 100, "triggerExecution": 5_600},
                "sources": [{"numInputRows": 1_400}],
            },
        },
    ]  # fmt: skip


def test_a_spares_rehearsal_is_not_the_restart(tmp_path: Path) -> None:
    """A spare rehearses the job's query (rehearsal_*) before its go, with the same batch ids:
    the restart is the job's own query, its batch and its tasks only."""
    kill = 1_000_000
    _app(tmp_path, "local-1", start=kill - 60_000, query_start=kill - 50_000)  # the killed one
    events = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": kill - 30_000},
        *_query(kill + 100, 5, name="rehearsal_q", tasks=(3, 4), job=1),
        *_query(kill + 8_000, 5, name="q", tasks=(9, 10), job=2),
    ]
    d = tmp_path / "eventlog_v2_local-2"
    d.mkdir()
    (d / "events_1_local-2").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    fb = first_batch(tmp_path, kill)
    assert fb.app_id == "local-2" and fb.query_started_ms == kill + 8_000
    assert fb.batch_start_ms == kill + 9_000
    assert sorted(t.task_id for t in fb.tasks) == [9, 10]
    assert fb.summary()["addBatch: jobs"] == 3.6


def test_the_restart_is_the_first_query_started_after_the_kill(tmp_path: Path) -> None:
    kill = 1_000_000
    _app(tmp_path, "local-1", start=kill - 60_000, query_start=kill - 50_000)  # the killed one
    _app(tmp_path, "local-2", start=kill - 30_000, query_start=kill + 500, batch=41)  # a spare
    _app(tmp_path, "local-3", start=kill + 90_000, query_start=kill + 99_000)  # a later run
    fb = first_batch(tmp_path, kill)
    assert fb.app_id == "local-2" and fb.batch_id == 41 and fb.input_rows == 1_400
    with pytest.raises(ConfigurationError, match="no query"):
        first_batch(tmp_path, kill + 200_000)


def test_driver_phases_and_tasks_of_the_batch(tmp_path: Path) -> None:
    _app(tmp_path, "local-1", start=10_000, query_start=20_000)
    s = first_batch(tmp_path).summary()
    assert s["application start to query start"] == 10.0
    assert s["query start to the batch"] == 1.0
    assert s["addBatch"] == 5.0
    # addBatch starts at batch + 500 ms: its job at +1.5 s, done at +5.1 s, addBatch ends +5.5 s.
    assert s["addBatch: driver before its first job"] == 1.0
    assert s["addBatch: jobs"] == 3.6
    assert s["addBatch: driver after its last job"] == 0.4
    assert s["stage 0: source read (wall)"] == 3.0
    assert s["stage 1: state (wall)"] == 0.3


def test_a_task_splits_at_its_python_workers_fork_imports_and_first_call(tmp_path: Path) -> None:
    _app(tmp_path, "local-1", start=10_000, query_start=20_000)
    launch = (21_000 + 1_600) / 1000  # task 7's launch, in seconds
    worker = {
        "pid": 1,
        "role": "read",
        "task_id": 7,
        "forked_at": launch + 0.7,
        "library_import_started_at": launch + 1.0,
        "library_imported_at": launch + 1.5,
        "first_call_at": launch + 1.7,
    }
    # Task ids restart with each application: a later run's worker of task 7 is not it.
    later = {**worker, "pid": 2, "forked_at": launch + 90, "first_call_at": launch + 91}
    (tmp_path / WORKERS_FILE).write_text(json.dumps(worker) + "\n" + json.dumps(later) + "\n")
    tasks = {t.task_id: t for t in first_batch(tmp_path).tasks}
    assert tasks[7].python == {
        "until the worker's fork": 0.7,
        "PySpark worker start": 0.3,
        "library imports": 0.5,
        "until the call (unpickle, setup)": 0.2,
        "the call's work": 1.3,
    }
    assert tasks[8].python is None  # no record of its worker: the JVM's view only


def test_no_event_log_says_which_setting_writes_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="RECOVERY_SPARK_EVENT_LOG_DIR"):
        first_batch(tmp_path / "missing")


def test_the_command_line_prints_the_phases_and_draws_the_waterfall(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from recovery_lib.cli.main import app

    _app(tmp_path, "local-1", start=10_000, query_start=20_000)
    chart = tmp_path / "waterfall.png"
    out = CliRunner().invoke(
        app, ["spark", "first-batch", str(tmp_path), "--after-ms", "15000", "--chart", str(chart)]
    )
    assert out.exit_code == 0, out.output
    assert "addBatch: driver before its first job" in out.output and "1.000" in out.output
    assert chart.stat().st_size > 10_000
    missing = CliRunner().invoke(app, ["spark", "first-batch", str(tmp_path / "none")])
    assert missing.exit_code == 1 and "RECOVERY_SPARK_EVENT_LOG_DIR" in missing.output


def test_a_later_batch_than_the_log_holds_is_refused_with_the_count(tmp_path: Path) -> None:
    _app(tmp_path, "local-1", start=10_000, query_start=20_000)
    assert first_batch(tmp_path, nth=0).batch_id == 0
    with pytest.raises(ConfigurationError, match="has 1 finished micro-batches in its log, not 2"):
        first_batch(tmp_path, nth=1)
