"""The only writer of the metrics store.

DuckDB lets one process write a file at a time, and a reader process's connection would block
a writer. So nobody holds the file: writes are buffered in memory and flushed in one short
transaction (by a background thread every ``flush_interval_s``), readers open read-only for
one query (``read_frame``), and both retry briefly while the other holds the lock. The job's
own thread never waits on the file.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from recovery_lib.metrics.schema import DDL, SCHEMA_VERSION

log = logging.getLogger(__name__)

T = TypeVar("T")

COLUMNS = {
    "micro_batches": (
        "run_id",
        "query_name",
        "batch_id",
        "ts_ms",
        "input_rows",
        "input_rows_per_s",
        "processed_rows_per_s",
        "trigger_ms",
        "add_batch_ms",
        "latest_offset_ms",
        "planning_ms",
        "wal_commit_ms",
        "commit_offsets_ms",
        "state_rows",
        "state_memory_bytes",
        "dead_letters",
        "state_commit_ms",
        "state_custom",
    ),
    "latency_samples": ("run_id", "visible_ms", "ingest_ms", "latency_ms", "output_id"),
    "throughput": ("run_id", "second", "input_events", "output_records"),
    "events": ("run_id", "ts_ms", "kind", "detail"),
    "job_status": (
        "job",
        "ts_ms",
        "status",
        "run_id",
        "supervisor_pid",
        "job_pid",
        "restarts",
        "heartbeat_ms",
        "committed_batch",
        "standby_lag_batches",
        "standby_lag_bytes",
        "message",
    ),
    "gc_runs": (
        "job",
        "ts_ms",
        "dry_run",
        "recovery_line",
        "oldest_kept_batch",
        "files_removed",
        "bytes_freed",
        "determinant_low_water",
        "detail",
    ),
    "standby_shipments": (
        "job",
        "ts_ms",
        "copy_seq",
        "batch",
        "bytes_total",
        "bytes_copied",
        "lag_batches",
        "lag_bytes",
        "detail",
    ),
    "expectation_results": (
        "run_id",
        "suite",
        "target",
        "ts_ms",
        "success",
        "evaluated",
        "failed",
        "failures",
    ),
    "consistency_reports": (
        "run_id",
        "reference_run_id",
        "query",
        "ts_ms",
        "verdict",
        "outputs",
        "reference_outputs",
        "lost",
        "duplicated",
        "divergent",
        "unexpected",
        "report",
    ),
}


def now_ms() -> int:
    return int(time.time() * 1000)


def with_lock_retry(fn: Callable[[], T], timeout_s: float = 30.0) -> T:
    """Run ``fn`` (which opens the file), retrying while another process holds the lock."""
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        try:
            return fn()
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def init_store(path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)

    def create() -> None:
        with duckdb.connect(str(path)) as con:
            for statement in DDL:
                con.execute(statement)
            if con.execute("SELECT count(*) FROM schema_info").fetchone()[0] == 0:
                con.execute("INSERT INTO schema_info VALUES (?)", [SCHEMA_VERSION])
            else:  # new tables were created above; record the upgrade
                con.execute("UPDATE schema_info SET version = ?", [SCHEMA_VERSION])

    with_lock_retry(create)


def read_frame(path: str | Path, sql: str, params: list[Any] | None = None):  # noqa: ANN201
    """A pandas DataFrame from a read-only connection held for this one query."""

    def query():  # noqa: ANN202
        with duckdb.connect(str(path), read_only=True) as con:
            return con.execute(sql, params or []).df()

    return with_lock_retry(query)


# The time series that grow with every batch, second or status check, and their time column
# (what ``prune`` bounds); runs, events, verdicts and GC passes stay.
TIME_SERIES = {
    "micro_batches": "ts_ms",
    "latency_samples": "visible_ms",
    "throughput": "second * 1000",
    "job_status": "ts_ms",
}


def prune(path: str | Path, keep_hours: float, now: int | None = None) -> dict[str, int]:
    """Delete the time series' rows older than ``keep_hours``; returns the rows deleted per
    table. DuckDB reuses the freed blocks after the checkpoint: the file stops growing."""
    cutoff = (now if now is not None else now_ms()) - int(keep_hours * 3_600_000)

    def delete() -> dict[str, int]:
        deleted: dict[str, int] = {}
        with duckdb.connect(str(path)) as con:
            con.execute("BEGIN")
            for table, column in TIME_SERIES.items():  # DELETE answers with its row count
                (n,) = con.execute(f"DELETE FROM {table} WHERE {column} < ?", [cutoff]).fetchone()
                deleted[table] = int(n)
            con.execute("COMMIT")
            con.execute("CHECKPOINT")
        return deleted

    return with_lock_retry(delete)


class MetricsStore:
    def __init__(self, path: str | Path, flush_interval_s: float = 1.0) -> None:
        self.path = Path(path)
        init_store(self.path)
        self._lock = threading.Lock()
        # One flush at a time: an explicit flush returns only once rows taken by a background
        # flush are written too, and statements reach the file in the order they were made.
        self._flush_lock = threading.Lock()
        self._pending: dict[str, list[tuple]] = {name: [] for name in COLUMNS}
        self._statements: list[tuple[str, list[Any]]] = []
        self._flush_interval_s = flush_interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.flush_seconds = 0.0  # time spent flushing, for overhead measurements
        self.background_errors = 0  # background flushes that failed (their rows were kept)
        self.last_background_error: str | None = None  # until a background flush succeeds

    # -- runs and events -----------------------------------------------------------------------

    def start_run(
        self, query: str, mode: str, config: dict[str, Any] | None = None, run_id: str | None = None
    ) -> str:
        run_id = run_id or f"{query}-{mode}-{uuid.uuid4().hex[:8]}"
        started = now_ms()
        with self._lock:
            self._statements.append(
                (
                    "INSERT INTO runs VALUES (?, ?, ?, ?, ?, NULL, 'running')",
                    [run_id, query, mode, json.dumps(config or {}, default=str), started],
                )
            )
        self.event(run_id, "start", config or {})
        self.flush()
        return run_id

    def finish_run(self, run_id: str, status: str = "finished") -> None:
        self.event(run_id, "stop", {"status": status})
        with self._lock:
            self._statements.append(
                (
                    "UPDATE runs SET stopped_ms = ?, status = ? WHERE run_id = ?",
                    [now_ms(), status, run_id],
                )
            )
        self.flush()

    def event(
        self, run_id: str, kind: str, detail: dict[str, Any] | None = None, ts_ms: int | None = None
    ) -> None:
        self.add(
            "events", [(run_id, ts_ms or now_ms(), kind, json.dumps(detail or {}, default=str))]
        )

    def add_consistency(
        self, run_id: str, reference_run_id: str | None, report: dict[str, Any]
    ) -> None:
        self.add(
            "consistency_reports",
            [
                (
                    run_id,
                    reference_run_id,
                    report["query"],
                    now_ms(),
                    report["verdict"],
                    report["outputs"],
                    report["reference_outputs"],
                    report["lost"],
                    report["duplicated"],
                    report["divergent"],
                    report["unexpected"],
                    json.dumps(report, default=str),
                )
            ],
        )
        self.flush()

    # -- bulk rows -------------------------------------------------------------------------------

    def add(self, table: str, rows: Iterable[tuple]) -> None:
        rows = list(rows)
        width = len(COLUMNS[table])
        for row in rows:
            if len(row) != width:
                raise ValueError(
                    f"{table} rows have {width} columns {COLUMNS[table]}, got {len(row)}"
                )
        with self._lock:
            self._pending[table].extend(rows)

    def flush(self) -> None:
        with self._flush_lock:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            pending = {name: rows for name, rows in self._pending.items() if rows}
            statements = self._statements
            self._pending = {name: [] for name in COLUMNS}
            self._statements = []
        if not pending and not statements:
            return
        started = time.perf_counter()

        def write() -> None:
            import pandas as pd  # 0.7 s to import: a job's start does not wait for it

            with duckdb.connect(str(self.path)) as con:
                con.execute("BEGIN")
                for sql, params in statements:
                    con.execute(sql, params)
                for name, rows in pending.items():
                    frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS[name]))
                    con.register("pending_rows", frame)
                    con.execute(f"INSERT INTO {name} SELECT * FROM pending_rows")
                    con.unregister("pending_rows")
                con.execute("COMMIT")

        try:
            with_lock_retry(write)
        except BaseException:
            with self._lock:  # keep the rows for the next flush
                for name, rows in pending.items():
                    self._pending[name][:0] = rows
                self._statements[:0] = statements
            raise
        finally:
            self.flush_seconds += time.perf_counter() - started

    # -- background flushing -----------------------------------------------------------------

    def start_background_flush(self) -> MetricsStore:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="metrics-flush", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self._flush_interval_s):
            try:
                self.flush()
            except Exception as exc:  # noqa: BLE001 - rows are kept: the next flush retries them
                self._background_failed(exc)
            else:
                self.last_background_error = None

    def _background_failed(self, exc: Exception) -> None:
        """Count and report a failed background flush on stderr (once per distinct error, not
        every interval); ``close()`` flushes in the caller's thread and raises if it persists."""
        self.background_errors += 1
        message = f"{type(exc).__name__}: {exc}"
        if message != self.last_background_error:
            log.warning(
                "metrics store %s: background flush failed, rows kept and retried every %g s: %s",
                self.path,
                self._flush_interval_s,
                message,
            )
        self.last_background_error = message

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.flush()

    def __enter__(self) -> MetricsStore:
        return self.start_background_flush()

    def __exit__(self, *exc: object) -> None:
        self.close()
