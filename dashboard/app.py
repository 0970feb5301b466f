"""Operations dashboard over the DuckDB metrics store (read-only).

    streamlit run dashboard/app.py        # or: make dashboard

Tabs: overview of jobs and runs, one job's timeline, recoveries by mode, consistency reports,
checkpoints and GC, pipelines (stages, checkpoints, recovery line), experiments side by side,
each paper's numbers beside ours (Papers).
The store is found through the project settings (RECOVERY_HOME), or RECOVERY_METRICS_PATH for
another file.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from recovery_lib.metrics import views
from recovery_lib.modes import get_mode
from recovery_lib.settings import get_settings

st.set_page_config(page_title="Spark recovery operations", layout="wide")


def store_path() -> Path:
    override = os.environ.get("RECOVERY_METRICS_PATH")
    return Path(override) if override else get_settings().home / "metrics.duckdb"


# Columns that are moments in time (a latency or a duration also ends in _ms).
INSTANT_COLUMNS = (
    "ts_ms", "started_ms", "ended_ms", "detected_ms", "joined_ms", "fired_ms", "died_ms"
)  # fmt: skip
# Column names as a person reads them; the rest: underscores as spaces, units in brackets.
LABELS = {
    "run_id": "run",
    "query": "job",
    "ts_ms": "time (UTC)",
    "time": "time (UTC)",
    "copy_batch": "copied batch",
    "committed_batch": "committed batch",
    "restart_time_s": "restart (s)",
    "recovery_time_s": "recovery (s)",
    "output_gap_s": "output gap (s)",
    "standby_lag_batches": "standby lag (batches)",
    "standby_lag_bytes": "standby lag (bytes)",
    "last_heartbeat": "last heartbeat",
}
UNITS = (("_bytes", "bytes"), ("_ms", "ms"), ("_s", "s"))


def label(column: str) -> str:
    if column in LABELS:
        return LABELS[column]
    for suffix, unit in UNITS:
        if column.endswith(suffix):
            return f"{column.removesuffix(suffix).replace('_', ' ')} ({unit})"
    return column.replace("_", " ")


def present(frame: pd.DataFrame) -> pd.DataFrame:
    """A table as a person reads it: moments as UTC dates, human column names with units,
    empty cells blank (not "None")."""
    instants = [c for c in frame.columns if c in INSTANT_COLUMNS]
    shown = frame.assign(
        **{c: pd.to_datetime(frame[c], unit="ms", utc=True) for c in instants}
    ).rename(
        columns=lambda c: f"{label(c.removesuffix('_ms'))} (UTC)" if c in instants else label(c)
    )
    shown = shown.loc[:, ~shown.columns.duplicated()]
    # A column with empty cells becomes text (blank where empty): the table widget would show
    # "None", and a column of mixed types cannot be sent to the browser.
    for column in shown.columns[shown.isna().any()]:
        shown[column] = shown[column].map(_cell)
    return shown


def _cell(value: object) -> str:
    if value is None or (not isinstance(value, str | list | dict) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, pd.Timestamp):
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    return str(value)


def utc_axis(field: str = "when") -> alt.X:
    """A time axis in UTC (the browser's zone would differ between operators)."""
    return alt.X(
        f"{field}:T",
        title="time (UTC)",
        scale=alt.Scale(type="utc"),
        axis=alt.Axis(format="%H:%M:%S"),
    )


def ago(ms: float | None) -> str:
    if ms is None or pd.isna(ms):
        return "never"
    seconds = max(0.0, time.time() - float(ms) / 1000)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def timeline_chart(path: Path, run_id: str) -> alt.Chart | None:
    """Throughput and p50/p99 latency per second, failures and recoveries as rules."""
    tput = views.throughput(path, [run_id])
    lat = views.latency(path, [run_id])
    if tput.empty and lat.empty:
        return None
    t0 = min(x for x in (tput["second"].min(), lat["second"].min()) if not pd.isna(x))
    tput = tput.assign(t=tput["second"] - t0)
    lat = lat.assign(t=lat["second"] - t0)
    tput_long = tput.melt("t", ["input_events", "output_records"], "series", "per_second")
    top = (
        alt.Chart(tput_long)
        .mark_line()
        .encode(
            x=alt.X("t:Q", title="seconds since start"),
            y=alt.Y("per_second:Q", title="records / s"),
            color="series:N",
        )
        .properties(height=220, title="throughput")
    )
    lat_long = lat.melt("t", ["p50_ms", "p99_ms"], "series", "ms")
    bottom = (
        alt.Chart(lat_long)
        .mark_line()
        .encode(
            x=alt.X("t:Q", title="seconds since start"),
            y=alt.Y("ms:Q", title="latency (ms)"),
            color="series:N",
        )
        .properties(height=220, title="output latency")
    )
    ev = views.events(path, run_id)
    if not ev.empty:
        ev = ev.assign(t=ev["ts_ms"] / 1000 - t0)
        rules = (
            alt.Chart(ev)
            .mark_rule(strokeDash=[4, 3])
            .encode(x="t:Q", color=alt.Color("kind:N", title="event"), tooltip=["kind", "t"])
        )
        top, bottom = top + rules, bottom + rules
    return alt.vconcat(top, bottom).resolve_scale(color="independent")


def overview(path: Path) -> None:
    jobs = views.job_status(path)
    st.subheader("Supervised jobs")
    if jobs.empty:
        st.info(
            "No long-running job is supervised yet: trigger a `stream_<job>` DAG in Airflow or "
            "run `recovery job start <name>`."
        )
    else:
        shown = jobs.assign(
            last_heartbeat=jobs["heartbeat_ms"].map(ago), checked=jobs["ts_ms"].map(ago)
        )[
            [
                "job",
                "status",
                "output",
                "restarts",
                "last_heartbeat",
                "committed_batch",
                "standby_lag_batches",
                "standby_lag_bytes",
                "checked",
                "message",
            ]
        ]
        st.dataframe(present(shown), hide_index=True, width="stretch")
    st.subheader("Recent runs")
    runs = views.runs(path, limit=30)
    runs = runs.assign(last_batch=runs["last_batch_ms"].map(ago))
    spark = views.throughput(path, runs["run_id"].head(12).tolist())
    lat = views.latency(path, runs["run_id"].head(12).tolist())
    cols = st.columns(3)
    for i, row in enumerate(runs.head(12).itertuples()):
        with cols[i % 3]:
            st.markdown(
                f"**{row.query}** · {row.mode} · {row.status} · {row.failures} failures  \n"
                f"`{row.run_id}` · last batch {row.last_batch}"
            )
            t = spark[spark["run_id"] == row.run_id]
            lt = lat[lat["run_id"] == row.run_id]
            if t.empty and lt.empty:
                st.caption("no throughput or latency recorded")
                continue
            charts = []
            if not t.empty:
                charts.append(
                    alt.Chart(t.assign(when=pd.to_datetime(t["second"], unit="s", utc=True)))
                    .mark_area(opacity=0.6)
                    .encode(x=utc_axis(), y=alt.Y("input_events:Q", title="ev/s"))
                    .properties(height=60, width=260)
                )
            if not lt.empty:
                charts.append(
                    alt.Chart(lt.assign(when=pd.to_datetime(lt["second"], unit="s", utc=True)))
                    .mark_line(color="firebrick")
                    .encode(x=utc_axis(), y=alt.Y("p50_ms:Q", title="p50 (ms)"))
                    .properties(height=60, width=260)
                )
            st.altair_chart(alt.vconcat(*charts))
    st.dataframe(
        present(
            runs[["run_id", "query", "mode", "status", "failures", "last_batch", "experiment"]]
        ),
        hide_index=True,
        width="stretch",
    )


def job_detail(path: Path) -> None:
    runs = views.runs(path)
    run_id = st.selectbox(
        "run",
        runs["run_id"].tolist(),
        format_func=lambda r: f"{r} ({runs.set_index('run_id').loc[r, 'status']})",
    )
    if run_id is None:
        return
    chart = timeline_chart(path, run_id)
    if chart is None:
        st.info("This run recorded no throughput or latency (collector off).")
    else:
        st.altair_chart(chart, width="stretch")
    b = views.batches(path, run_id)
    if b.empty:
        st.caption("no micro-batches recorded")
    else:
        st.altair_chart(
            alt.Chart(b)
            .mark_line(point=True)
            .encode(x="batch_id:Q", y=alt.Y("state_rows:Q", title="state rows"))
            .properties(height=160, title="state size per batch"),
            width="stretch",
        )
        st.dataframe(present(b.tail(50)), hide_index=True, width="stretch")
    ev = views.events(path, run_id)
    if not ev.empty:
        st.dataframe(present(ev.assign(when=ev["ts_ms"].map(ago))), hide_index=True)


def recoveries(path: Path) -> None:
    rec = views.recoveries(path)
    if rec.empty:
        st.info("No recovery yet (run an experiment with a failure).")
        return
    times = ["restart_time_s", "recovery_time_s", "output_gap_s"]
    st.caption(
        "Every mode: a restart, a standby takeover, a replica replaced, a pipeline stage "
        "restart, or a failure ridden out. restart: failure detected -> the job whole again; "
        "recovery: failure -> latency back within 10 % of before; output gap: the longest "
        "time without output after it."
    )
    long = rec.melt(["run_id", "query", "mode"], times, "measure", "seconds").dropna()
    long = long.assign(measure=long["measure"].map(label))
    if not long.empty:
        st.altair_chart(
            alt.Chart(long)
            .mark_bar()
            .encode(
                x=alt.X("measure:N", title=None, sort=[label(m) for m in times]),
                y=alt.Y("mean(seconds):Q", title="mean (s)"),
                color=alt.Color("measure:N", title="measure"),
                column=alt.Column("mode:N", title="mode"),
                row=alt.Row("query:N", title="job"),
                tooltip=["mode", "query", "measure", "mean(seconds):Q"],
            )
            .properties(height=160, width=110),
        )
    by_mode = rec.groupby(["mode", "query", "recovery"], as_index=False)[times].mean()
    st.dataframe(present(by_mode), hide_index=True)
    restart_waterfall(path)
    st.dataframe(present(rec.drop(columns=["ts_ms"])), hide_index=True, width="stretch")
    parked = views.parked_records(path)
    if not parked.empty:
        st.subheader("Parked poison records")
        st.caption(
            "Input records the job's code raised on, on every attempt: found by bisecting the "
            "failing batch, sent to the job's dead-letter topic with the exception and their "
            "position, and skipped so that the job goes on."
        )
        shown = parked.assign(when=parked["ts_ms"].map(ago)).drop(columns=["ts_ms"])
        st.dataframe(present(shown), hide_index=True, width="stretch")


def restart_waterfall(path: Path) -> None:
    """The last restarts phase by phase (metrics/views.restart_phases), one bar each."""
    phases = views.restart_phases(path).head(8)
    if phases.empty:
        return
    st.subheader("Restarts, phase by phase")
    st.caption(
        "Where a restart's time goes: detecting the failure, the new process and its imports, "
        "the JVM and Spark session, building the query, its first micro-batch with input "
        "(output resumes), and catching up (latency back within 10 %; the run's first failure)."
    )
    phases = phases.assign(
        restart=phases["query"]
        + " "
        + phases["detected_ms"].map(ago)
        + " ("
        + phases["run_id"].str[:8]
        + ")"
    )
    long = phases.melt(["restart"], list(views.RESTART_PHASES), "phase", "seconds").dropna()
    order = {phase: i for i, phase in enumerate(views.RESTART_PHASES)}
    long = long.assign(order=long["phase"].map(order))
    st.altair_chart(
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("restart:N", title=None, sort=None),
            x=alt.X("sum(seconds):Q", title="seconds from the failure"),
            color=alt.Color("phase:N", sort=list(views.RESTART_PHASES), title="phase"),
            order=alt.Order("order:Q"),
            tooltip=["restart", "phase", "seconds"],
        ),
        width="stretch",
    )


def consistency(path: Path) -> None:
    reports = views.consistency(path)
    if reports.empty:
        st.info("No consistency report yet: `recovery verify` or the consistency DAG writes them.")
    else:
        bad = reports[reports["verdict"] == "inconsistent"]
        unsure = reports[reports["verdict"] == "inconclusive"]
        a, b, c, d = st.columns(4)
        a.metric("reports", len(reports))
        b.metric("not exactly-once", len(bad))
        c.metric("inconclusive (a failure did not fire)", len(unsure))
        d.metric("divergent outputs (all reports)", int(reports["divergent"].fillna(0).sum()))
        long = reports.head(20).melt(
            ["run_id", "verdict"], ["lost", "duplicated", "divergent", "extra"], "damage", "count"
        )
        st.altair_chart(
            alt.Chart(long)
            .mark_bar()
            .encode(
                y=alt.Y("run_id:N", sort=None),
                x=alt.X("count:Q", title="outputs"),
                color="damage:N",
                tooltip=["run_id", "verdict", "damage", "count"],
            )
            .properties(title="lost / duplicated / divergent / extra outputs per report"),
            width="stretch",
        )
        st.dataframe(present(reports), hide_index=True, width="stretch")
    gx = views.expectation_results(path)
    st.subheader("Great Expectations")
    if gx.empty:
        st.caption("no suite has run yet")
    else:
        st.dataframe(present(gx), hide_index=True, width="stretch")


def cec_panel(path: Path) -> None:
    """CEC jobs: open windows, the extent a recovery would read, the input it would replay,
    and what the last recoveries loaded."""
    st.subheader("Continuous eventual checkpoints (CEC jobs)")
    state = views.cec_state(path)
    if state.empty:
        st.info("No CEC job has reported yet (a job with mode cec, e.g. jobs/avgprice.py).")
        return
    latest = state.groupby("query").tail(1)
    for _, row in latest.iterrows():
        a, b, c = st.columns(3)
        a.metric(f"{row['query']}: open windows", f"{int(row['open_windows']):,}")
        b.metric("extent q (records a recovery reads back)", f"{int(row['extent']):,}")
        c.metric("replay u (input tuples)", f"{int(row['replay_size']):,}")
    long = state.melt(["query", "ts_ms"], ["open_windows", "extent"], "measure", "value")
    st.altair_chart(
        alt.Chart(long)
        .mark_line()
        .encode(
            x=utc_axis("ts"),
            y=alt.Y("value:Q"),
            color="measure:N",
            strokeDash="query:N",
        )
        .transform_calculate(ts="datum.ts_ms")
        .properties(height=180),
        width="stretch",
    )
    recoveries = views.cec_recoveries(path)
    if recoveries.empty:
        st.caption("no CEC recovery yet")
    else:
        last = recoveries.iloc[0]
        st.metric("EC-load time of the last recovery", f"{last['ec_load_s']:.2f} s")
        st.dataframe(present(recoveries), hide_index=True, width="stretch")


def checkpoints(path: Path) -> None:
    cec_panel(path)
    shipped = views.standby_shipments(path)
    st.subheader("State shipping to standbys")
    if shipped.empty:
        st.info(
            "No state shipped yet: jobs with `mode: standby` ship continuously; the DAG "
            "`state_shipping` (or `recovery standby ship <job>`) records each round here."
        )
    else:
        st.altair_chart(
            alt.Chart(shipped)
            .mark_line(point=True)
            .encode(
                x=utc_axis("ts"),
                y=alt.Y("lag_batches:Q", title="standby lag (batches)"),
                color="job:N",
                tooltip=["job", "batch", "bytes_copied", "bytes_total", "lag_bytes"],
            )
            .transform_calculate(ts="datum.ts_ms")
            .properties(height=180),
            width="stretch",
        )
        st.dataframe(present(shipped), hide_index=True, width="stretch")
    st.subheader("Checkpoint GC")
    gc = views.gc_runs(path)
    if gc.empty:
        st.info("No checkpoint GC has run yet (DAG `checkpoint_gc`, or `recovery gc <job>`).")
        return
    st.altair_chart(
        alt.Chart(gc)
        .mark_bar()
        .encode(
            x=utc_axis("ts"),
            y=alt.Y("bytes_freed:Q", title="bytes freed"),
            color="job:N",
        )
        .transform_calculate(ts="datum.ts_ms")
        .properties(height=200),
        width="stretch",
    )
    st.dataframe(present(gc), hide_index=True, width="stretch")


def pipelines(path: Path) -> None:
    """Pipelines of stages: each stage's last commit and checkpoints against the recovery
    line (the oldest point any recovery can roll it back to), invalid checkpoints, and the
    recoveries (local or global)."""
    import json

    states = views.pipeline_states(path)
    if states.empty:
        st.info(
            "No pipeline has reported yet: `recovery pipeline start <name>` or the DAG "
            "`pipeline_<name>` (pipelines in dags/pipelines.yaml, docs/protocols.md)."
        )
        return
    for _, row in states.iterrows():
        state = json.loads(row["detail"])
        placement = state.get("placement", "process")
        st.subheader(f"{state['pipeline']} · protocol {state['protocol']} · stages: {placement}")
        st.caption(f"reported {ago(row['ts_ms'])}")
        a, b, c, d = st.columns(4)
        total = state["checkpoints"] or 0
        a.metric("checkpoints", f"{total:,}")
        share = f" ({100 * state['invalid'] / total:.1f} %)" if total else ""
        b.metric("invalid checkpoints", f"{state['invalid']}{share}")
        c.metric("invalid by the strict rule", state["invalid_strict"])
        d.metric("recoveries", state["recoveries"])
        if "epoch" in state:
            st.caption(f"newest complete global checkpoint: epoch {state['epoch']}")
        stages = pd.DataFrame(state["stages"])
        long = stages.melt("stage", ["last_commit", "line"], "batch", "value").dropna()
        st.altair_chart(
            alt.Chart(long)
            .mark_bar()
            .encode(
                y=alt.Y("stage:N"),
                x=alt.X("value:Q", title="batch"),
                yOffset="batch:N",
                color=alt.Color("batch:N", title="", legend=alt.Legend(orient="bottom")),
                tooltip=["stage", "batch", "value"],
            )
            .properties(height=40 + 40 * len(stages)),
            width="stretch",
        )
        st.dataframe(present(stages), hide_index=True, width="stretch")
    recoveries = views.pipeline_recoveries(path)
    if not recoveries.empty:
        st.subheader("Recoveries")
        st.dataframe(present(recoveries), hide_index=True, width="stretch")


def replicas(path: Path) -> None:
    """Actively replicated jobs: each replica (live, role, epoch, committed batch), the lag
    between them over time, the gate's forwarded and dropped copies, LiveRobin's heartbeats
    and the replacements of dead replicas."""
    import json

    states = views.replication_states(path)
    if states.empty:
        st.info(
            "No replicated job has reported yet: `recovery experiment run --mode kazoo` (or "
            "liverobin), or a job with `mode: kazoo|liverobin` in dags/streaming_jobs.yaml "
            "(docs/replication.md)."
        )
        return
    for _, row in states.iterrows():
        state = json.loads(row["detail"])
        st.subheader(f"{state['job']} · {state['mode']} · {state['output_topic']}")
        st.caption(f"reported {ago(row['ts_ms'])} · run {row['run_id']}")
        live = [r for r, rep in state["replicas"].items() if rep["live"]]
        leader = [r for r, rep in state["replicas"].items() if rep.get("role") == "leader"]
        a, b, c, d = st.columns(4)
        a.metric("live replicas", f"{len(live)} of {len(state['replicas'])}")
        leaderless = get_mode(state["mode"]).leaderless
        b.metric(
            "heartbeats" if leaderless else "leader",
            f"{state['heartbeats'] or 0:,}" if leaderless else ", ".join(leader) or "none",
        )
        lag = state["lag_batches"]
        c.metric("lag between replicas", "n/a" if lag is None else f"{lag} batches")
        d.metric("copies dropped by the gate", f"{sum(state['gate_dropped'].values()):,}")
        table = pd.DataFrame([{"replica": r, **rep} for r, rep in state["replicas"].items()]).drop(
            columns=["pid"]
        )
        st.dataframe(present(table), hide_index=True, width="stretch")
        history = views.replication_history(path, row["run_id"])
        if not history.empty:
            history["time"] = pd.to_datetime(history["ts_ms"], unit="ms", utc=True)
            st.altair_chart(
                alt.Chart(history.dropna(subset=["committed_batch"]))
                .mark_line(point=True)
                .encode(
                    x=utc_axis("time"),
                    y=alt.Y("committed_batch:Q", title="committed batch"),
                    color=alt.Color("replica:N"),
                    tooltip=["replica", "committed_batch", "live", "time"],
                )
                .properties(height=220),
                width="stretch",
            )
        if state["replacements"]:
            done = pd.DataFrame(state["replacements"]).drop(columns=["kind"])
            st.caption("replacements of dead replicas (from the survivor's shipped state)")
            st.dataframe(present(done), hide_index=True, width="stretch")


def experiments(path: Path) -> None:
    exp = views.experiments(path)
    if exp.empty:
        st.info("No experiment yet: `recovery experiment run ...` or the experiment DAG.")
        return
    chosen = st.multiselect(
        "experiments to compare", exp["run_id"].tolist(), default=exp["run_id"].head(2).tolist()
    )
    st.dataframe(present(exp), hide_index=True, width="stretch")
    if not chosen:
        return
    cols = st.columns(len(chosen))
    for col, run_id in zip(cols, chosen, strict=True):
        row = exp.set_index("run_id").loc[run_id]
        with col:
            st.markdown(
                f"**{row['query']} · {row['mode']} · sink {row['sink']} · {row['fail']}**  \n"
                f"`{run_id}`"
            )
            st.metric("oracle", row["verdict"] or "n/a")
            chart = timeline_chart(path, run_id)
            if chart is not None:
                st.altair_chart(chart)


def papers(path: Path) -> None:
    """Each paper's own numbers beside ours (``recovery reproduce``), read from the benchmark
    reports: how many rows agree, differ, are not comparable or not measured, and the rows."""
    from recovery_lib.reproduce.papers import PAPERS
    from recovery_lib.reproduce.report import VERDICTS, compare

    reports = get_settings().benchmark_reports
    if not reports.is_dir():
        st.info(f"No benchmark reports at {reports} (setting RECOVERY_BENCHMARK_REPORTS).")
        return
    rows, counts = {}, []
    for key in PAPERS:
        try:
            rows[key] = compare(key, reports)
        except ValueError as exc:  # a report whose format the extractor does not know
            st.warning(f"{key}: {exc}")
            continue
        for verdict in VERDICTS:
            n = sum(c.verdict == verdict for c in rows[key])
            counts.append({"paper": key, "verdict": verdict, "rows": n})
    if not counts:
        return
    st.altair_chart(
        alt.Chart(pd.DataFrame(counts))
        .mark_bar()
        .encode(x="paper:N", y="rows:Q", color="verdict:N", tooltip=["paper", "verdict", "rows"])
        .properties(height=260),
        width="stretch",
    )
    key = st.selectbox("paper", list(rows))
    table = pd.DataFrame(
        {
            "paper row": c.row.metric,
            "source": c.row.source,
            "paper": "trend" if c.row.value is None else f"{c.row.value:g} {c.row.unit}",
            "ours": "; ".join(f"{m.value:g} {m.unit}" for m in c.ours if m.value is not None),
            "verdict": c.verdict,
            "why it differs / is not measured": " ".join(
                m.differs_because for m in c.ours if m.differs_because
            )
            or c.unanswered_because,
        }
        for c in rows[key]
    )
    st.dataframe(table, hide_index=True, width="stretch")
    advisor(reports, path)


COMPARE_REPORT = "bench_compare.json"


def comparison(_path: Path) -> None:
    """``recovery bench compare``: one job, input and failure under every recovery mode."""
    from recovery_lib.bench.compare_bench import comparison_reports, rows

    reports = get_settings().benchmark_reports
    found = comparison_reports(reports) if reports.is_dir() else {}
    if not found:
        path = reports / COMPARE_REPORT
        st.info(
            f"No comparison report at {path}: run `recovery bench compare --out "
            f"{path.with_suffix('')}` (setting RECOVERY_BENCHMARK_REPORTS)."
        )
        return
    path = found[st.selectbox("comparison (one job each)", list(found))]
    report = json.loads(path.read_text())
    config = report.get("config", {})
    st.caption(
        f"job {report.get('job')} at {config.get('rate', 0):,.0f} ev/s, its process SIGKILLed "
        f"{config.get('fail_at_s')} s into {config.get('duration_s')} s of input; "
        f"{report.get('machine', '')}"
    )
    measured = [
        {
            "variant": e["name"],
            "figure": figure,
            "seconds": e.get(key),
        }
        for e in report.get("variants", [])
        if "verdict" in e
        for figure, key in (("recovery time", "recovery_time_s"), ("output gap", "output_gap_s"))
        if e.get(key) is not None
    ]
    if measured:
        st.altair_chart(
            alt.Chart(pd.DataFrame(measured))
            .mark_bar()
            .encode(
                x=alt.X("variant:N", sort=None),
                xOffset="figure:N",
                y="seconds:Q",
                color="figure:N",
                tooltip=["variant", "figure", "seconds"],
            )
            .properties(height=280),
            width="stretch",
        )
    st.dataframe(pd.DataFrame(rows(report)), hide_index=True, width="stretch")


def advisor(reports: Path, store: Path) -> None:
    """``recovery advise`` for a job or pipeline typed in (skew is not sampled here)."""
    from recovery_lib.advisor.facts import measured_job_facts, pipeline_facts
    from recovery_lib.advisor.rules import advise
    from recovery_lib.pipeline.spec import load_pipelines

    st.subheader("Which recovery mode? (recovery advise)")
    left, right = st.columns(2)
    name = left.text_input("job or pipeline", "q3")
    outage = right.number_input("longest acceptable output gap (s, 0: any)", 0.0, value=0.0)
    try:
        if name in load_pipelines():
            facts = pipeline_facts(name, max_outage_s=outage or None)
        else:  # the rate and state of its newest run in the metrics store, if any
            facts = measured_job_facts(name, store, reports, max_outage_s=outage or None)
    except ValueError as exc:
        st.warning(str(exc))
        return
    advice = advise(facts, reports)
    st.metric(f"{facts.kind} {facts.name}", f"{advice.mode} · sink {advice.sink}")
    for reason in advice.reasons:
        st.markdown(f"- {reason}")


def main() -> None:
    path = store_path()
    st.title("Spark streaming recovery: operations")
    st.caption(f"metrics store: {path}")
    problem = views.store_problem(path)
    if problem:
        st.warning(problem)
        return
    for alert in views.alerts(path):  # what needs a person now, above every tab
        st.error(alert)
    tabs = st.tabs(
        [
            "Overview",
            "Job detail",
            "Recoveries",
            "Consistency",
            "Checkpoints & GC",
            "Pipelines",
            "Replicas",
            "Experiments",
            "Papers",
            "Comparison",
        ]
    )
    pages = (
        overview,
        job_detail,
        recoveries,
        consistency,
        checkpoints,
        pipelines,
        replicas,
        experiments,
        papers,
        comparison,
    )
    for tab, page in zip(tabs, pages, strict=True):
        with tab:
            page(path)


main()
