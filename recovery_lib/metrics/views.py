"""Read-only views of the metrics store for the dashboard and the DAGs' reports.

Every function opens the DuckDB file read-only for one query (``read_frame``), so the dashboard
never blocks a job's writer. Times stay epoch milliseconds; charts convert.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from recovery_lib.metrics.schema import TABLES
from recovery_lib.metrics.store import read_frame


def store_problem(path: str | Path) -> str | None:
    """Why there is nothing to show (missing file, no tables, no runs), or None."""
    path = Path(path)
    if not path.exists():
        return (
            f"No metrics store at {path}. It is created by the first job, experiment or "
            "benchmark (e.g. `recovery experiment run --query q3`); point the dashboard at "
            "another one with RECOVERY_HOME."
        )
    tables = set(read_frame(path, "SELECT table_name FROM information_schema.tables")["table_name"])
    missing = [t for t in ("runs", "events") if t not in tables]
    if missing:
        return f"{path} is not a metrics store (tables {missing} are missing)."
    if int(read_frame(path, "SELECT count(*) AS n FROM runs")["n"][0]) == 0:
        return f"The metrics store {path} has no runs yet: start a job or an experiment."
    return None


def _has(path: str | Path, table: str) -> bool:
    assert table in TABLES
    found = read_frame(
        path, "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = ?", [table]
    )
    return int(found["n"][0]) > 0


def runs(path: str | Path, limit: int = 200) -> pd.DataFrame:
    frame = read_frame(
        path,
        """SELECT r.run_id, r.query, r.mode, r.status, r.started_ms, r.stopped_ms,
                  json_extract_string(r.config, '$.experiment') AS experiment,
                  json_extract_string(r.config, '$.run') AS role,
                  (SELECT max(ts_ms) FROM micro_batches b WHERE b.run_id = r.run_id)
                      AS last_batch_ms,
                  (SELECT count(*) FROM events e WHERE e.run_id = r.run_id
                      AND e.kind = 'failure_detected') AS failures
           FROM runs r ORDER BY r.started_ms DESC LIMIT ?""",
        [limit],
    )
    return frame


def job_status(path: str | Path) -> pd.DataFrame:
    """The newest status row of each supervised long-running job, with where its output goes
    (``output``: its topic's sink mode, or the lakehouse table it writes), from its run's
    configuration (the jobs file's entry)."""
    if not _has(path, "job_status"):
        return pd.DataFrame()
    return read_frame(
        path,
        """SELECT s.*,
                  CASE WHEN coalesce(json_extract_string(r.config, '$.sink'), 'topic') = 'topic'
                       THEN 'topic · ' || coalesce(json_extract_string(r.config, '$.sink_mode'),
                                                   'dedup')
                       ELSE json_extract_string(r.config, '$.sink') || ' table' ||
                            coalesce(' · ' || json_extract_string(r.config, '$.table'), '')
                  END AS output
           FROM job_status s LEFT JOIN runs r USING (run_id)
           QUALIFY row_number() OVER (PARTITION BY s.job ORDER BY s.ts_ms DESC) = 1
           ORDER BY s.job""",
    )


def throughput(path: str | Path, run_ids: list[str]) -> pd.DataFrame:
    """Per run and second: input events and output records (seconds as epoch s)."""
    if not run_ids:
        return pd.DataFrame(columns=["run_id", "second", "input_events", "output_records"])
    marks = ",".join("?" * len(run_ids))
    return read_frame(
        path,
        f"""SELECT run_id, second, sum(input_events) AS input_events,
                   sum(output_records) AS output_records
            FROM throughput WHERE run_id IN ({marks})
            GROUP BY run_id, second ORDER BY run_id, second""",
        run_ids,
    )


def latency(path: str | Path, run_ids: list[str]) -> pd.DataFrame:
    """Per run and second of visibility: p50 and p99 output latency (ms)."""
    if not run_ids:
        return pd.DataFrame(columns=["run_id", "second", "p50_ms", "p99_ms", "outputs"])
    marks = ",".join("?" * len(run_ids))
    return read_frame(
        path,
        f"""SELECT run_id, visible_ms // 1000 AS second,
                   quantile_cont(latency_ms, 0.5) AS p50_ms,
                   quantile_cont(latency_ms, 0.99) AS p99_ms, count(*) AS outputs
            FROM latency_samples WHERE run_id IN ({marks})
            GROUP BY run_id, second ORDER BY run_id, second""",
        run_ids,
    )


MARKED_EVENTS = ("failure_injected", "failure_detected", "restart", "ready", "gave_up")


def events(path: str | Path, run_id: str) -> pd.DataFrame:
    marks = ",".join("?" * len(MARKED_EVENTS))
    return read_frame(
        path,
        f"""SELECT ts_ms, kind, detail FROM events
            WHERE run_id = ? AND kind IN ({marks}) ORDER BY ts_ms""",
        [run_id, *MARKED_EVENTS],
    )


def batches(path: str | Path, run_id: str) -> pd.DataFrame:
    return read_frame(
        path,
        """SELECT batch_id, ts_ms, input_rows, processed_rows_per_s, trigger_ms,
                  state_rows, state_memory_bytes, dead_letters
           FROM micro_batches WHERE run_id = ? ORDER BY ts_ms""",
        [run_id],
    )


def recoveries(path: str | Path) -> pd.DataFrame:
    """One row per recovery, whatever the mode: a restart, a standby takeover, a replica
    replaced, a pipeline's stage restart; and a failure the job rode out without any (a
    replicated run whose dead replica was not replaced yet). Run, job, mode, what happened,
    when (``time``, UTC), how long until the job was whole again (s), and the run's recovery
    time and output gap after its first failure (DESIGN 4; experiments record both for every
    mode, event ``recovery_measured``)."""
    frame = read_frame(
        path,
        """WITH measured AS (
               SELECT run_id,
                      max(TRY_CAST(json_extract_string(detail, '$.recovery_time_s') AS DOUBLE))
                          AS recovery_time_s,
                      max(TRY_CAST(json_extract_string(detail, '$.output_gap_s') AS DOUBLE))
                          AS output_gap_s,
                      min(ts_ms) AS ts_ms
               FROM events WHERE kind = 'recovery_measured' GROUP BY run_id
           ), recovered AS (
               SELECT run_id, ts_ms,
                      CASE WHEN json_extract(detail, '$.takeover') IS NOT NULL
                           THEN 'standby takeover' ELSE 'restart' END AS recovery,
                      TRY_CAST(json_extract_string(detail, '$.restart_time_s') AS DOUBLE)
                          AS restart_time_s
               FROM events WHERE kind = 'ready'
               UNION ALL
               SELECT run_id, ts_ms, 'replica replaced' AS recovery,
                      (TRY_CAST(json_extract_string(detail, '$.joined_ms') AS DOUBLE)
                       - TRY_CAST(json_extract_string(detail, '$.detected_ms') AS DOUBLE)) / 1000
                          AS restart_time_s
               FROM events WHERE kind = 'replica_joined'
               UNION ALL
               SELECT run_id, ts_ms, 'pipeline stage restart' AS recovery,
                      NULL AS restart_time_s
               FROM events WHERE kind = 'pipeline_recovery'
           ), every AS (
               SELECT * FROM recovered
               UNION ALL
               SELECT run_id, ts_ms, 'failure ridden out (no restart)' AS recovery,
                      NULL AS restart_time_s
               FROM measured WHERE run_id NOT IN (SELECT run_id FROM recovered)
           )
           SELECT e.run_id, r.query, r.mode, e.recovery, e.ts_ms, e.restart_time_s,
                  m.recovery_time_s, m.output_gap_s
           FROM every e JOIN runs r USING (run_id) LEFT JOIN measured m USING (run_id)
           WHERE e.recovery <> 'restart' OR e.restart_time_s IS NOT NULL
           ORDER BY e.ts_ms DESC""",
    )
    frame.insert(4, "time", pd.to_datetime(frame["ts_ms"], unit="ms", utc=True))
    return frame


def _event_fields(path: str | Path, kind: str, fields: dict[str, str]) -> pd.DataFrame:
    """Events of ``kind`` with these fields of their detail (name -> SQL type), oldest first."""
    columns = ",\n".join(
        f"TRY_CAST(json_extract_string(e.detail, '$.{name}') AS {sql}) AS {name}"
        for name, sql in fields.items()
    )
    return read_frame(
        path,
        f"""SELECT e.run_id, r.query, e.ts_ms, {columns}
            FROM events e JOIN runs r USING (run_id)
            WHERE e.kind = ? ORDER BY e.ts_ms""",
        [kind],
    )


def parked_records(path: str | Path) -> pd.DataFrame:
    """Poison records jobs found and parked (job/poison.py): where, why, when, newest first."""
    if not _has(path, "events"):
        return pd.DataFrame()
    parked = _event_fields(
        path, "poison_parked", {"position": "VARCHAR", "reason": "VARCHAR", "batch": "BIGINT"}
    )
    return parked.iloc[::-1].reset_index(drop=True)


def cec_state(path: str | Path) -> pd.DataFrame:
    """CEC jobs over time (events ``cec_state``): open windows, extent q, replay size u."""
    fields = ("open_windows", "extent", "replay_size", "checks")
    return _event_fields(path, "cec_state", dict.fromkeys(fields, "BIGINT"))


def cec_recoveries(path: str | Path) -> pd.DataFrame:
    """One row per CEC recovery (events ``cec_recovery``) that found something to load,
    newest first."""
    fields = {"open_windows": "BIGINT", "extent": "BIGINT", "torn": "BIGINT"}
    frame = _event_fields(
        path, "cec_recovery", {**fields, "ec_load_s": "DOUBLE", "replayed": "BIGINT"}
    )
    frame = frame[frame["extent"].fillna(0) > 0]
    return frame.iloc[::-1].reset_index(drop=True)


def pipeline_states(path: str | Path) -> pd.DataFrame:
    """The newest ``pipeline_state`` event per pipeline (the pipeline daemon's snapshot:
    stages, checkpoints, recovery line, invalid checkpoints), as JSON text per row."""
    return read_frame(
        path,
        """SELECT json_extract_string(detail, '$.pipeline') AS pipeline, ts_ms, detail
           FROM events WHERE kind = 'pipeline_state'
           QUALIFY row_number() OVER (PARTITION BY pipeline ORDER BY ts_ms DESC) = 1
           ORDER BY pipeline""",
    )


def replication_states(path: str | Path) -> pd.DataFrame:
    """The newest ``replication_state`` event per replicated job (ReplicationState in
    recovery_lib/ha/replication/replica_set.py, as JSON text per row)."""
    return read_frame(
        path,
        """SELECT json_extract_string(detail, '$.job') AS job, run_id, ts_ms, detail
           FROM events WHERE kind = 'replication_state'
           QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY ts_ms DESC) = 1
           ORDER BY ts_ms DESC""",
    )


def replication_history(path: str | Path, run_id: str) -> pd.DataFrame:
    """Each replica's committed batch over time in one replicated run (lag between them)."""
    return read_frame(
        path,
        """SELECT ts_ms, r.key AS replica,
                  TRY_CAST(json_extract_string(r.value, '$.committed_batch') AS BIGINT)
                      AS committed_batch,
                  TRY_CAST(json_extract_string(r.value, '$.live') AS BOOLEAN) AS live
           FROM events, json_each(json_extract(detail, '$.replicas')) AS r
           WHERE kind = 'replication_state' AND run_id = ?
           ORDER BY ts_ms""",
        [run_id],
    )


def pipeline_recoveries(path: str | Path) -> pd.DataFrame:
    """Every pipeline recovery, newest first: failed stages, restarted and rewound ones, local
    or global, and the restart time once every restarted stage served again."""
    return read_frame(
        path,
        """SELECT json_extract_string(detail, '$.pipeline') AS pipeline, ts_ms,
                  json_extract_string(detail, '$.protocol') AS protocol,
                  json_extract_string(detail, '$.failed') AS failed,
                  json_extract_string(detail, '$.restart') AS restarted,
                  json_extract_string(detail, '$.rewind') AS rewound,
                  TRY_CAST(json_extract_string(detail, '$.local') AS BOOLEAN) AS local,
                  json_extract_string(detail, '$.strict_rollback') AS strict_rule_rolls_back
           FROM events WHERE kind = 'pipeline_recovery' ORDER BY ts_ms DESC""",
    )


def consistency(path: str | Path) -> pd.DataFrame:
    return read_frame(
        path,
        """SELECT c.run_id, c.reference_run_id, c.query, r.mode,
                  json_extract_string(r.config, '$.sink') AS sink, c.ts_ms, c.verdict,
                  json_extract_string(c.report, '$.guarantee') AS guarantee, c.outputs,
                  c.reference_outputs, c.lost, c.duplicated, c.divergent, c.unexpected AS extra
           FROM consistency_reports c LEFT JOIN runs r USING (run_id)
           ORDER BY c.ts_ms DESC""",
    )


def experiments(path: str | Path) -> pd.DataFrame:
    """One row per experiment (faulty run + reference run), newest first."""
    frame = read_frame(
        path,
        """SELECT json_extract_string(r.config, '$.experiment') AS experiment,
                  r.run_id, r.query, r.mode,
                  coalesce(json_extract_string(r.config, '$.sink'), 'dedup') AS sink,
                  r.started_ms, json_extract_string(r.config, '$.fail') AS fail,
                  TRY_CAST(json_extract_string(r.config, '$.rate') AS DOUBLE) AS rate,
                  c.verdict, json_extract_string(c.report, '$.guarantee') AS guarantee,
                  c.lost, c.duplicated, c.divergent
           FROM runs r LEFT JOIN consistency_reports c USING (run_id)
           WHERE json_extract_string(r.config, '$.run') = 'faulty'
           ORDER BY r.started_ms DESC""",
    )
    return frame


def gc_runs(path: str | Path) -> pd.DataFrame:
    if not _has(path, "gc_runs"):
        return pd.DataFrame()
    return read_frame(path, "SELECT * FROM gc_runs ORDER BY ts_ms DESC")


def standby_shipments(path: str | Path) -> pd.DataFrame:
    if not _has(path, "standby_shipments"):
        return pd.DataFrame()
    return read_frame(
        path,
        "SELECT job, ts_ms, copy_seq, batch, bytes_total, bytes_copied, lag_batches, lag_bytes "
        "FROM standby_shipments ORDER BY ts_ms DESC",
    )


def expectation_results(path: str | Path) -> pd.DataFrame:
    if not _has(path, "expectation_results"):
        return pd.DataFrame()
    return read_frame(path, "SELECT * FROM expectation_results ORDER BY ts_ms DESC")


def detail(value: object) -> dict:
    """An event's JSON detail as a dict (empty if unreadable)."""
    try:
        return json.loads(value) if isinstance(value, str) else dict(value or {})
    except (ValueError, TypeError):
        return {}


def alerts(path: str | Path) -> list[str]:
    """What an operator must look at now: a supervised job that is down, a replica that is
    not live, a job whose newest consistency verdict is not exactly-once."""
    out = []
    jobs = job_status(path)
    for row in jobs.itertuples() if not jobs.empty else ():
        if row.status == "failed":
            out.append(f"job {row.job} is down: {row.message or 'its daemon failed'}")
    states = replication_states(path)
    for row in states.itertuples() if not states.empty else ():
        state = json.loads(row.detail)
        dead = sorted(r for r, rep in state["replicas"].items() if not rep["live"])
        if dead:
            out.append(f"job {state['job']} ({state['mode']}): replica {', '.join(dead)} not live")
    reports = consistency(path)
    if not reports.empty:
        newest = reports.sort_values("ts_ms").groupby("query").tail(1)
        for row in newest.itertuples():
            if row.guarantee != "exactly-once":
                out.append(
                    f"job {row.query}: the last consistency verdict is {row.verdict} "
                    f"({row.guarantee or 'no guarantee'}), not exactly-once"
                )
    return out


# The phases of a native restart, in order (restart_phases): what a user waits for.
RESTART_PHASES = (
    "detect",  # the failure -> the supervisor notices it (injected failures only)
    "process and imports",  # detected -> the new process imported the library and PySpark
    "JVM and session",  # -> its SparkSession is up
    "query build",  # -> the job built and started its query
    "first batch",  # -> the first micro-batch with input is done (output resumes)
    "caught up",  # -> latency back within 10 % of before (the run's first failure only)
)


def restart_phases(path: str | Path, run_id: str | None = None) -> pd.DataFrame:
    """One row per restart of a job's process (a failure detected, a new process started):
    its run, job, when it was detected, and the seconds of each of ``RESTART_PHASES`` (None
    where the store does not say, e.g. no injected failure before a crash). Newest first."""
    where = "WHERE e.run_id = ?" if run_id is not None else ""
    events = read_frame(
        path,
        f"""SELECT e.run_id, r.query, e.kind, e.ts_ms, e.detail FROM events e
            JOIN runs r USING (run_id) {where}
            {"AND" if where else "WHERE"} e.kind IN ('failure_injected', 'failure_detected',
                'job_phases', 'recovery_measured')
            ORDER BY e.ts_ms""",
        [run_id] if run_id is not None else [],
    )
    columns = ["run_id", "query", "detected_ms", *RESTART_PHASES]
    if events.empty or not (events["kind"] == "failure_detected").any():
        return pd.DataFrame(columns=columns)
    batches = read_frame(
        path,
        f"""SELECT run_id, ts_ms + coalesce(trigger_ms, 0) AS done_ms FROM micro_batches
            WHERE input_rows > 0 {"AND run_id = ?" if run_id is not None else ""}
            ORDER BY done_ms""",
        [run_id] if run_id is not None else [],
    )
    rows = [
        _phases_of(run, query, run_events, batches[batches["run_id"] == run]["done_ms"].tolist())
        for (run, query), run_events in events.groupby(["run_id", "query"], sort=False)
    ]
    flat = [row for per_run in rows for row in per_run]
    if not flat:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame(flat, columns=columns).sort_values("detected_ms", ascending=False)


def _phases_of(
    run: str, query: str, events: pd.DataFrame, batches_done: list[int]
) -> list[list[object]]:
    def detail(row: pd.Series) -> dict:
        return json.loads(row["detail"]) if isinstance(row["detail"], str) else {}

    injected = events[events["kind"] == "failure_injected"]["ts_ms"].tolist()
    started = [detail(r) for _, r in events[events["kind"] == "job_phases"].iterrows()]
    measured = [detail(r) for _, r in events[events["kind"] == "recovery_measured"].iterrows()]
    recovery_s = measured[0].get("recovery_time_s") if measured else None
    detections = events[events["kind"] == "failure_detected"]["ts_ms"].tolist()
    out = []
    for i, detected in enumerate(detections):
        before = [t for t in injected if t <= detected and (i == 0 or t > detections[i - 1])]
        failure = before[-1] if before else None
        until = detections[i + 1] if i + 1 < len(detections) else float("inf")
        # The process started for this restart (a standby's took over: it started before).
        process = next(
            (
                p
                for p in started
                if detected <= p.get("imported_ms", 0) < until and "takeover_ms" not in p
            ),
            None,
        )
        marks: list[float | None] = [failure, detected]
        if process is not None:
            query_started = process.get("query_started_ms")
            first = next((t for t in batches_done if query_started and t >= query_started), None)
            marks += [process.get("imported_ms"), process.get("session_ready_ms"), query_started]
            marks.append(first)
        else:
            marks += [None] * 4
        caught_up = None
        if i == 0 and failure is not None and recovery_s is not None:
            caught_up = failure + float(recovery_s) * 1000
        marks.append(caught_up)
        phases = [
            (b - a) / 1000 if a is not None and b is not None and b >= a else None
            for a, b in zip(marks, marks[1:], strict=False)
        ]
        out.append([run, query, detected, *phases])
    return out
