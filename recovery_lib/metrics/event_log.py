"""A restart's first micro-batch taken apart from Spark's event log: a waterfall of phases.

The state benchmark measures a restart's phases from our own events (detect, imports, JVM and
session, build, first batch); this module splits the first batch itself. Spark writes an
event log per application (``RECOVERY_SPARK_EVENT_LOG_DIR``, spark/session.py): the query's
progress (its driver phases: offsets, planning, the write, the commit), its jobs, stages and
tasks (launch, finish, deserialisation, CPU). The source's and sink's Python workers add when
they were forked, imported the library and got their first call (io/worker_timing.py).

Any job run with the setting writes both, so ``recovery spark first-batch DIR`` works for a
team's job as for ours.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from recovery_lib.errors import ConfigurationError
from recovery_lib.io.worker_timing import WORKERS_FILE
from recovery_lib.metrics.side_queries import is_side_query

__all__ = ["FirstBatch", "Span", "TaskSpan", "draw_waterfall", "first_batch", "read_applications"]

_STREAMING = "org.apache.spark.sql.streaming.StreamingQueryListener$"
# A micro-batch's driver phases in the order MicroBatchExecution runs them.
DRIVER_PHASES = (
    "latestOffset",
    "walCommit",
    "getBatch",
    "queryPlanning",
    "addBatch",
    "commitOffsets",
)


@dataclass(frozen=True)
class Span:
    """A phase on the waterfall: a name and its start and end (epoch ms)."""

    name: str
    start_ms: int
    end_ms: int

    @property
    def seconds(self) -> float:
        return round((self.end_ms - self.start_ms) / 1000, 3)


@dataclass
class TaskSpan:
    """One task of the batch: the JVM's view, split by its Python worker's timing if any."""

    task_id: int
    stage_id: int
    stage_name: str
    launch_ms: int
    finish_ms: int
    deserialize_ms: int
    run_ms: int
    cpu_ms: int
    gc_ms: int
    # Python worker phases inside the task (seconds; None: no worker record for this task).
    python: dict[str, float] | None = None

    @property
    def seconds(self) -> float:
        return round((self.finish_ms - self.launch_ms) / 1000, 3)


@dataclass
class FirstBatch:
    """The first micro-batch of an application's query, and what came before it."""

    app_id: str
    app_start_ms: int
    query_started_ms: int | None
    batch_id: int
    input_rows: int
    batch_start_ms: int
    batch_end_ms: int
    spans: list[Span] = field(default_factory=list)  # the driver's phases, in order
    tasks: list[TaskSpan] = field(default_factory=list)
    workers: list[dict[str, Any]] = field(default_factory=list)  # Python processes, no task

    def summary(self) -> dict[str, float]:
        """Seconds per phase: the driver's spans, each stage's wall time, and the Python
        workers' phases summed over the batch's tasks."""
        out = {s.name: s.seconds for s in self.spans}
        stages: dict[str, list[TaskSpan]] = {}
        for t in self.tasks:
            stages.setdefault(f"stage {t.stage_id}: {t.stage_name}", []).append(t)
        for name, tasks in stages.items():
            out[f"{name} (wall)"] = round(
                (max(t.finish_ms for t in tasks) - min(t.launch_ms for t in tasks)) / 1000, 3
            )
        for t in self.tasks:
            for phase, s in (t.python or {}).items():
                out[f"tasks: {phase}"] = round(out.get(f"tasks: {phase}", 0.0) + s, 3)
        return out

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["summary"] = self.summary()
        return out


def _events(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text().splitlines():
        if line.strip():
            yield json.loads(line)


def read_applications(where: Path) -> dict[str, list[dict[str, Any]]]:
    """Every application's events under ``where``: Spark's rolling layout
    (``eventlog_v2_<app>/events_<n>_<app>``) or plain files, by application id."""
    where = Path(where)
    if not where.is_dir():
        raise ConfigurationError(
            f"no event log directory at {where}: run the job with "
            "RECOVERY_SPARK_EVENT_LOG_DIR set to a directory"
        )
    apps: dict[str, list[dict[str, Any]]] = {}
    for d in sorted(where.glob("eventlog_v2_*")):
        parts = sorted(d.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
        apps[d.name.removeprefix("eventlog_v2_")] = [e for p in parts for e in _events(p)]
    for f in sorted(where.iterdir()):
        if f.is_file() and (f.name.startswith(("local-", "app-"))) and "." not in f.name:
            apps[f.name] = list(_events(f))
    return apps


def _iso_ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _app_start(events: list[dict[str, Any]]) -> int | None:
    return next(
        (int(e["Timestamp"]) for e in events if e["Event"] == "SparkListenerApplicationStart"),
        None,
    )


def _python_phases(task: TaskSpan, worker: dict[str, Any]) -> dict[str, float]:
    """A task's time split at its worker's fork, library imports and first call (seconds).
    A reused worker (forked before the task) has only the call's wait and the work."""
    launch, finish = task.launch_ms / 1000, task.finish_ms / 1000
    forked = worker.get("forked_at") or launch
    imported = worker.get("library_imported_at") or forked
    began = worker.get("library_import_started_at") or forked
    call = worker.get("first_call_at") or imported
    if forked < launch:  # reused, or forked for another task of this run
        return {"until the call": round(max(0.0, call - launch), 3),
                "the call's work": round(max(0.0, finish - call), 3)}  # fmt: skip
    return {
        "until the worker's fork": round(forked - launch, 3),
        "PySpark worker start": round(max(0.0, min(began, call) - forked), 3),
        "library imports": round(max(0.0, imported - max(began, forked)), 3),
        "until the call (unpickle, setup)": round(max(0.0, call - max(imported, forked)), 3),
        "the call's work": round(max(0.0, finish - call), 3),
    }


def _worker_of(task: TaskSpan, workers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The record of the worker that ran ``task``: its task id, first called during the task
    (task ids restart with each application, and one log directory holds several)."""
    for w in workers:
        call = w.get("first_call_at") or 0
        if w.get("task_id") == task.task_id and task.launch_ms <= call * 1000 <= task.finish_ms:
            return w
    return None


def _workers(where: Path) -> list[dict[str, Any]]:
    path = Path(where) / WORKERS_FILE
    return list(_events(path)) if path.exists() else []


def _query_starts(events: list[dict[str, Any]]) -> Iterator[tuple[int, str | None]]:
    """(start ms, run id) of each of the application's job queries: not a standby's or a
    spare's rehearsal, not a poison probe (metrics/listener.py ``is_side_query``)."""
    for e in events:
        if e["Event"] == f"{_STREAMING}QueryStartedEvent" and not is_side_query(e.get("name")):
            yield _iso_ms(e["timestamp"]), e.get("runId")


def _choose_query(
    apps: dict[str, list[dict[str, Any]]], after_ms: int | None
) -> tuple[str, int, str | None]:
    """(application, start ms, run id) of the job query started first at or after
    ``after_ms`` (a restart's: in a process started after the kill, or in a spare started
    before it)."""
    candidates = sorted(
        (ms, app, run_id)
        for app, events in apps.items()
        for ms, run_id in _query_starts(events)
        if ms >= (after_ms or 0)
    )
    if not candidates:
        raise ConfigurationError(
            f"no query in the event log started after {after_ms}: was the job restarted "
            "with RECOVERY_SPARK_EVENT_LOG_DIR set?"
        )
    ms, app, run_id = candidates[0]
    return app, ms, run_id


def first_batch(where: Path, after_ms: int | None = None, nth: int = 0) -> FirstBatch:
    """The first micro-batch (or the ``nth`` after it) of the first query started at or after
    ``after_ms`` (the kill, for a restart; None: the first query) in the event log under
    ``where``.

    Args:
        where: The directory ``RECOVERY_SPARK_EVENT_LOG_DIR`` named for the run.
        after_ms: Epoch ms; the application whose query started first from then on.
        nth: Which of its finished micro-batches (0: the first; a steady batch: later).

    Returns:
        Its first batch's driver phases, tasks and Python workers.

    Raises:
        ConfigurationError: No event log there, or no application or batch to take apart.
    """
    apps = read_applications(where)
    app, started, run_id = _choose_query(apps, after_ms)
    events = apps[app]
    app_start = _app_start(events) or 0
    # That query's batches only: a spare's rehearsal before it ran batches with the same ids.
    batches = [
        e["progress"]
        for e in events
        if e["Event"] == f"{_STREAMING}QueryProgressEvent"
        and e["progress"].get("runId", run_id) == run_id
        and _iso_ms(e["progress"]["timestamp"]) >= started
    ]
    if len(batches) <= nth:
        raise ConfigurationError(
            f"application {app} has {len(batches)} finished micro-batches in its log, not {nth + 1}"
        )
    progress = batches[nth]
    batch_id = int(progress["batchId"])
    start = _iso_ms(progress["timestamp"])
    durations = progress.get("durationMs", {})
    out = FirstBatch(
        app_id=app,
        app_start_ms=app_start,
        query_started_ms=started,
        batch_id=batch_id,
        input_rows=sum(int(src.get("numInputRows") or 0) for src in progress.get("sources", [])),
        batch_start_ms=start,
        batch_end_ms=start + int(durations.get("triggerExecution", 0)),
    )
    if started is not None:
        out.spans.append(Span("application start to query start", app_start, started))
        out.spans.append(Span("query start to the batch", started, start))
    at = start
    add_batch: Span | None = None
    for phase in DRIVER_PHASES:
        ms = int(durations.get(phase, 0))
        span = Span(phase, at, at + ms)
        out.spans.append(span)
        if phase == "addBatch":
            add_batch = span
        at += ms
    out.tasks = list(_batch_tasks(events, batch_id, started))
    if add_batch is not None:
        jobs = list(_batch_jobs(events, batch_id, started))
        if jobs:
            first_job = min(j[0] for j in jobs)
            last_end = max(j[1] for j in jobs)
            out.spans.append(Span("addBatch: driver before its first job", add_batch.start_ms,
                                  max(add_batch.start_ms, first_job)))  # fmt: skip
            out.spans.append(Span("addBatch: jobs", first_job, last_end))
            out.spans.append(Span("addBatch: driver after its last job", last_end,
                                  max(last_end, add_batch.end_ms)))  # fmt: skip
    workers = _workers(where)
    for t in out.tasks:
        worker = _worker_of(t, workers)
        if worker is not None:
            t.python = _python_phases(t, worker)
    out.workers = [
        w
        for w in workers
        if w.get("task_id") is None
        and out.batch_start_ms / 1000 <= (w.get("first_call_at") or 0)
        and (w.get("first_call_at") or 0) <= out.batch_end_ms / 1000
    ]
    return out


def _job_starts(
    events: Iterable[dict[str, Any]], batch_id: int, since_ms: int
) -> Iterator[dict[str, Any]]:
    """The batch's jobs' start events (Spark tags a batch's jobs with its id), from the
    query's start on (a rehearsal before it ran a batch of the same id)."""
    for e in events:
        props = e.get("Properties") or {}
        if (
            e["Event"] == "SparkListenerJobStart"
            and props.get("streaming.sql.batchId") == str(batch_id)
            and int(e.get("Submission Time", since_ms)) >= since_ms
        ):
            yield e


def _batch_jobs(
    events: list[dict[str, Any]], batch_id: int, since_ms: int
) -> Iterator[tuple[int, int]]:
    """(submission, completion) ms of the batch's jobs."""
    submitted = {
        e["Job ID"]: int(e["Submission Time"]) for e in _job_starts(events, batch_id, since_ms)
    }
    for e in events:
        if e["Event"] == "SparkListenerJobEnd" and e["Job ID"] in submitted:
            yield submitted[e["Job ID"]], int(e["Completion Time"])


# What a stage does, told by the RDDs it runs (its name is the query's start call site).
_STAGE_KINDS = (
    ("DataSourceRDD", "source read"),
    ("StateStoreRDD", "state"),
    ("ShuffledRowRDD", "after a shuffle"),
)


def _stage_label(stage: dict[str, Any]) -> str:
    rdds = {r.get("Name", "") for r in stage.get("RDD Info", [])}
    kinds = [label for rdd, label in _STAGE_KINDS if rdd in rdds]
    return " + ".join(kinds) if kinds else stage.get("Stage Name", "").split(" at ")[0]


def _batch_tasks(events: list[dict[str, Any]], batch_id: int, since_ms: int) -> Iterator[TaskSpan]:
    stages = {
        int(s["Stage ID"]): _stage_label(s)
        for e in _job_starts(events, batch_id, since_ms)
        for s in e.get("Stage Infos", [])
    }
    for e in events:
        if e["Event"] != "SparkListenerTaskEnd" or int(e["Stage ID"]) not in stages:
            continue
        info, metrics = e["Task Info"], e.get("Task Metrics") or {}
        yield TaskSpan(
            task_id=int(info["Task ID"]),
            stage_id=int(e["Stage ID"]),
            stage_name=stages[int(e["Stage ID"])],
            launch_ms=int(info["Launch Time"]),
            finish_ms=int(info["Finish Time"]),
            deserialize_ms=int(metrics.get("Executor Deserialize Time", 0)),
            run_ms=int(metrics.get("Executor Run Time", 0)),
            cpu_ms=int(metrics.get("Executor CPU Time", 0)) // 1_000_000,
            gc_ms=int(metrics.get("JVM GC Time", 0)),
        )


# Colours of a task's parts on the waterfall (the Python worker's phases, or the JVM's view).
TASK_PARTS = {
    "until the worker's fork": "#bbbbbb",
    "PySpark worker start": "#f28e2b",
    "library imports": "#e15759",
    "until the call (unpickle, setup)": "#edc948",
    "until the call": "#edc948",
    "the call's work": "#4e79a7",
    "deserialize": "#bab0ac",
    "run": "#b07aa1",
}


def draw_waterfall(ax: Any, batch: dict[str, Any], zero_ms: int, title: str) -> None:
    """One restart's first batch on ``ax`` (a matplotlib axis): the driver's phases, then each
    task split into its parts, in seconds after ``zero_ms`` (the kill).

    Args:
        ax: The axis to draw on.
        batch: ``FirstBatch.as_dict()``.
        zero_ms: Epoch ms of the x axis' 0 (the kill; or the application's start).
        title: The panel's title.
    """
    rows: list[tuple[str, list[tuple[float, float, str]]]] = []
    app = batch["app_start_ms"]
    if app > zero_ms:
        rows.append(("until the Spark application", [(zero_ms, app, "#79706e")]))
    for span in sorted(batch["spans"], key=lambda s: s["start_ms"]):
        if span["name"] == "addBatch":
            continue  # its three parts follow
        colour = "#59a14f" if span["name"].startswith("addBatch") else "#76b7b2"
        rows.append((span["name"], [(span["start_ms"], span["end_ms"], colour)]))
    for t in sorted(batch["tasks"], key=lambda t: (t["launch_ms"], t["task_id"])):
        parts = t["python"] or {
            "deserialize": t["deserialize_ms"] / 1000,
            "run": max(0.0, (t["finish_ms"] - t["launch_ms"] - t["deserialize_ms"]) / 1000),
        }
        at, segments = t["launch_ms"], []
        for name, seconds in parts.items():
            segments.append((at, at + seconds * 1000, TASK_PARTS.get(name, "#9c755f")))
            at += seconds * 1000
        rows.append((f"task {t['task_id']} ({t['stage_name']}, CPU {t['cpu_ms']} ms)", segments))
    for y, (_, segments) in enumerate(rows):
        for start, end, colour in segments:
            ax.barh(y, (end - start) / 1000, left=(start - zero_ms) / 1000, color=colour,
                    height=0.7)  # fmt: skip
    ax.set_yticks(range(len(rows)), [name for name, _ in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds after the kill" if app > zero_ms else "seconds")
    ax.set_title(title, fontsize=9)
    handles = [
        ax.barh(0, 0, color=c, label=n) for n, c in TASK_PARTS.items() if n != "until the call"
    ]
    ax.legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
