"""The metrics store: documented schema, buffered writer, readers that never block it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import duckdb
import pytest

from recovery_lib.metrics.schema import TABLES
from recovery_lib.metrics.store import MetricsStore, read_frame


def test_schema_has_the_documented_tables(tmp_path):
    store = MetricsStore(tmp_path / "m.duckdb")
    with duckdb.connect(str(store.path), read_only=True) as con:
        names = {
            r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        }
    assert set(TABLES) <= names


def test_every_table_can_be_written_with_its_columns(tmp_path):
    """The writer's column lists match the DDL, for every table written through add()."""
    from recovery_lib.metrics.store import COLUMNS

    store = MetricsStore(tmp_path / "m.duckdb")
    assert set(TABLES) - set(COLUMNS) == {"runs"}  # runs: start_run / finish_run
    with duckdb.connect(str(store.path), read_only=True) as con:
        for table in COLUMNS:
            ddl = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
            assert list(COLUMNS[table]) == ddl, table


def test_runs_events_and_rows_round_trip(tmp_path):
    store = MetricsStore(tmp_path / "m.duckdb")
    run = store.start_run("q1", "native", {"rate": 5})
    store.add("throughput", [(run, 100, 10, 0), (run, 100, 0, 7)])
    store.add("latency_samples", [(run, 2000, 1500, 500, "0-0-0")])
    store.finish_run(run)
    runs = read_frame(store.path, "SELECT * FROM runs")
    assert (
        runs.loc[0, "status"] == "finished"
        and runs.loc[0, "stopped_ms"] >= runs.loc[0, "started_ms"]
    )
    per_second = read_frame(
        store.path,
        "SELECT second, sum(input_events) i, sum(output_records) o FROM throughput GROUP BY second",
    )
    assert per_second.to_dict("records") == [{"second": 100, "i": 10, "o": 7}]
    kinds = set(read_frame(store.path, "SELECT kind FROM events")["kind"])
    assert kinds == {"start", "stop"}


def test_rows_of_the_wrong_width_are_refused_with_the_columns(tmp_path):
    store = MetricsStore(tmp_path / "m.duckdb")
    with pytest.raises(ValueError, match="throughput rows have 4 columns"):
        store.add("throughput", [(1, 2)])


def test_a_reader_process_polling_the_store_does_not_block_the_writer(tmp_path):
    path = tmp_path / "m.duckdb"
    store = MetricsStore(path)
    run = store.start_run("q1", "native")
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import time
        from recovery_lib.metrics.store import read_frame
        reads, end = 0, time.time() + 8
        while time.time() < end:
            read_frame({str(path)!r}, "SELECT count(*) FROM throughput")
            reads += 1
        print(reads)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        started = time.monotonic()
        flushes = 0
        while time.monotonic() - started < 6:
            store.add("throughput", [(run, flushes, 1, 1)])
            store.flush()
            flushes += 1
        reads = int(reader.communicate(timeout=60)[0])
    finally:
        if reader.poll() is None:
            reader.kill()
    assert reads > 10 and flushes > 10
    total = read_frame(path, "SELECT count(*) AS n FROM throughput").loc[0, "n"]
    assert total == flushes  # every flush landed despite the concurrent reader


def test_prune_bounds_the_time_series_and_keeps_runs_events_and_verdicts(tmp_path):
    from recovery_lib.metrics.store import COLUMNS, TIME_SERIES, now_ms, prune

    store = MetricsStore(tmp_path / "m.duckdb")
    run = store.start_run("q1", "native", {})
    now = now_ms()
    old, new = now - 3 * 3_600_000, now - 60_000  # 3 h ago and a minute ago

    def row(table: str, ts: int) -> tuple:
        values = {"run_id": run, "job": "j", "status": "running", "batch_id": 1}
        time_column = TIME_SERIES[table].split()[0]
        stamp = ts // 1000 if time_column == "second" else ts
        return tuple(stamp if c == time_column else values.get(c, 0) for c in COLUMNS[table])

    for table in TIME_SERIES:
        store.add(table, [row(table, old), row(table, old), row(table, new)])
    store.event(run, "restart", {}, old)
    store.flush()
    with duckdb.connect(str(store.path), read_only=True) as con:
        events = con.execute("SELECT count(*) FROM events").fetchone()[0]
    deleted = prune(store.path, keep_hours=1.0, now=now)
    assert deleted == dict.fromkeys(TIME_SERIES, 2)
    with duckdb.connect(str(store.path), read_only=True) as con:
        for table in TIME_SERIES:
            assert con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 1, table
        assert con.execute("SELECT count(*) FROM events").fetchone()[0] == events  # kept
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    assert prune(store.path, keep_hours=1.0, now=now) == dict.fromkeys(TIME_SERIES, 0)
