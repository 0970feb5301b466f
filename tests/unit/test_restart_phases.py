"""The phases of a native restart from the metrics store (metrics/views.restart_phases): the
failure, its detection, the new process's start-up marks (job_phases), the first micro-batch
with input after its query started, and the run's recovery time."""

from __future__ import annotations

import duckdb

from recovery_lib.metrics.store import MetricsStore
from recovery_lib.metrics.views import RESTART_PHASES, restart_phases

T = 1_790_000_000_000


def marks(imported: int) -> dict[str, int]:
    """A process's start-up marks: imports done, then 3 s of JVM, 0.1 s build, 0.2 s start."""
    return {
        "imported_ms": imported,
        "session_ready_ms": imported + 3_000,
        "query_built_ms": imported + 3_100,
        "query_started_ms": imported + 3_300,
    }


def store_with_a_restart(path, recovery_s: float | None = 9.0) -> str:  # noqa: ANN001
    with MetricsStore(path) as store:
        run = store.start_run("q3", "native", {})
        store.event(run, "job_phases", marks(T - 60_000), T - 56_800)
        store.event(run, "failure_injected", {"kind": "driver-kill"}, T)
        store.event(run, "failure_detected", {"cause": "exit -9"}, T + 500)
        store.event(run, "job_phases", marks(T + 2_500), T + 5_800)
        if recovery_s is not None:
            store.event(run, "recovery_measured", {"recovery_time_s": recovery_s}, T + 20_000)
        store.flush()
    with duckdb.connect(str(path)) as con:
        con.executemany(
            "INSERT INTO micro_batches (run_id, batch_id, ts_ms, input_rows, trigger_ms) "
            "VALUES (?, ?, ?, ?, ?)",
            [
                (run, 7, T - 2_000, 100, 300),  # before the failure
                (run, 8, T + 5_900, 0, 50),  # no input: output has not resumed
                (run, 8, T + 6_000, 1_400, 2_000),  # the first batch with input, done T + 8 s
                (run, 9, T + 8_100, 900, 400),
            ],
        )
    return run


def test_each_phase_of_a_restart_in_seconds(tmp_path):
    run = store_with_a_restart(tmp_path / "m.duckdb")
    [row] = restart_phases(tmp_path / "m.duckdb").to_dict("records")
    assert row["run_id"] == run and row["query"] == "q3" and row["detected_ms"] == T + 500
    assert [row[p] for p in RESTART_PHASES] == [0.5, 2.0, 3.0, 0.3, 2.2, 1.0]


def test_what_the_store_does_not_say_is_left_out(tmp_path):
    store_with_a_restart(tmp_path / "m.duckdb", recovery_s=None)
    [row] = restart_phases(tmp_path / "m.duckdb").to_dict("records")
    assert row["caught up"] is None and row["first batch"] == 2.2


def test_no_restart_no_rows(tmp_path):
    with MetricsStore(tmp_path / "m.duckdb") as store:
        store.start_run("q3", "native", {})
    assert restart_phases(tmp_path / "m.duckdb").empty


def test_the_daemon_s_metrics_show_the_last_restart_phase_by_phase(tmp_path):
    from prometheus_client import generate_latest

    from recovery_lib.metrics.openmetrics import JobMetrics

    run = store_with_a_restart(tmp_path / "m.duckdb")
    metrics = JobMetrics("q3_job", "native")
    metrics.observe_restart_phases(tmp_path / "m.duckdb", run)
    text = generate_latest(metrics.registry).decode()
    name = "recovery_last_restart_phase_seconds"
    assert f'{name}{{job="q3_job",mode="native",phase="JVM and session"}} 3.0' in text
    assert 'phase="first batch"} 2.2' in text


def test_a_phase_the_last_restart_lacks_is_not_the_previous_one_s(tmp_path):
    from prometheus_client import generate_latest

    from recovery_lib.metrics.openmetrics import JobMetrics

    path = tmp_path / "m.duckdb"
    run = store_with_a_restart(path)
    metrics = JobMetrics("q3_job", "native")
    metrics.observe_restart_phases(path, run)
    with MetricsStore(path) as store:  # a second crash: detected, no process came up yet
        store.event(run, "failure_detected", {"cause": "exit 1"}, T + 30_000)
    metrics.observe_restart_phases(path, run)
    text = generate_latest(metrics.registry).decode()
    assert 'phase="first batch"' not in text and 'phase="detect"' not in text


def test_each_restart_gets_the_process_started_for_it(tmp_path):
    path = tmp_path / "m.duckdb"
    run = store_with_a_restart(path)
    with MetricsStore(path) as store:
        store.event(run, "failure_detected", {"cause": "exit 1"}, T + 30_000)
        store.event(run, "job_phases", marks(T + 31_000), T + 34_300)
    older, newer = sorted(restart_phases(path).to_dict("records"), key=lambda r: r["detected_ms"])
    assert older["process and imports"] == 2.0 and newer["process and imports"] == 1.0
    assert newer["detect"] != newer["detect"]  # NaN: no failure was injected before this one
