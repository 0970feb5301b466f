"""StreamingQueryListener that writes one micro_batches row per progress event."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from recovery_lib.metrics.json_events import JsonEventsListener
from recovery_lib.metrics.side_queries import is_side_query
from recovery_lib.metrics.store import MetricsStore, now_ms

DEAD_LETTER_METRIC = "dead_letters"


def _ts_ms(timestamp: str | None) -> int:
    if not timestamp:
        return now_ms()
    try:
        return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return now_ms()


class TerminationAwareListener(JsonEventsListener):
    """A listener one can wait on. Spark delivers listener events asynchronously and in order,
    so a query's last progress events may still be on their way after ``awaitTermination`` or
    ``stop`` returns; ``wait_terminated`` returns once they have arrived."""

    def __init__(self) -> None:
        self._terminated: set[str] = set()
        self._terminated_changed = threading.Condition()

    def wait_terminated(self, query_id: object, timeout_s: float = 30.0) -> bool:
        with self._terminated_changed:
            return self._terminated_changed.wait_for(
                lambda: str(query_id) in self._terminated, timeout_s
            )

    def _mark_terminated(self, query_id: object) -> None:
        with self._terminated_changed:
            self._terminated.add(str(query_id))
            self._terminated_changed.notify_all()


class OneQuery(JsonEventsListener):
    """Hands ``inner`` the events of the query named ``name`` only. Spark gives every listener
    of a session the events of all its queries; a session hosting a pipeline's stages
    (pipeline/host.py) keeps each stage's heartbeat and metrics to its own query. Idle and
    terminated events carry no name: they are told by the run ids seen starting."""

    def __init__(self, name: str, inner: StreamingQueryListener) -> None:
        self.name = name
        self.inner = inner
        self._runs: set[str] = set()

    def onQueryStarted(self, event) -> None:  # noqa: ANN001, N802
        if event.name == self.name:
            self._runs.add(str(event.runId))
            self.inner.onQueryStarted(event)

    def onQueryProgress(self, event) -> None:  # noqa: ANN001, N802
        # By run id: an earlier query of the same name may still have events on their way.
        if str(event.progress.runId) in self._runs:
            self.inner.onQueryProgress(event)

    def onQueryIdle(self, event) -> None:  # noqa: ANN001, N802
        if str(event.runId) in self._runs:
            self.inner.onQueryIdle(event)

    def onQueryTerminated(self, event) -> None:  # noqa: ANN001, N802
        if str(event.runId) in self._runs:
            self.inner.onQueryTerminated(event)


class MetricsListener(TerminationAwareListener):
    def __init__(self, store: MetricsStore, run_id: str) -> None:
        super().__init__()
        self.store = store
        self.run_id = run_id

    def onQueryStarted(self, event) -> None:  # noqa: ANN001, N802 - Spark's names
        self.store.event(self.run_id, "query_started", {"name": event.name, "id": str(event.id)})

    def onQueryProgress(self, event) -> None:  # noqa: ANN001, N802
        p = event.progress
        if is_side_query(p.name):  # a rehearsal or a probe, not the job
            return
        d = p.durationMs or {}
        state_rows = sum(op.numRowsTotal for op in p.stateOperators) if p.stateOperators else 0
        state_mem = sum(op.memoryUsedBytes for op in p.stateOperators) if p.stateOperators else 0
        state_commit = sum(op.commitTimeMs for op in p.stateOperators or ())
        custom = state_custom_metrics(p.stateOperators or ())
        dead = 0
        observed = p.observedMetrics or {}
        for name, row in observed.items():
            if name.startswith(DEAD_LETTER_METRIC) and row is not None:
                dead += int(row[0] or 0)
        ts = _ts_ms(p.timestamp)
        self.store.add(
            "micro_batches",
            [
                (
                    self.run_id,
                    p.name,
                    p.batchId,
                    ts,
                    p.numInputRows,
                    _num(p.inputRowsPerSecond),
                    _num(p.processedRowsPerSecond),
                    d.get("triggerExecution"),
                    d.get("addBatch"),
                    d.get("latestOffset"),
                    d.get("queryPlanning"),
                    d.get("walCommit"),
                    d.get("commitOffsets"),
                    state_rows,
                    state_mem,
                    dead,
                    state_commit,
                    json.dumps(custom) if custom else None,
                )
            ],
        )
        if p.numInputRows:
            self.store.add("throughput", [(self.run_id, ts // 1000, p.numInputRows, 0)])

    def onQueryIdle(self, event) -> None:  # noqa: ANN001, N802
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: ANN001, N802
        detail = {"id": str(event.id), "exception": event.exception}
        self.store.event(
            self.run_id, "query_failed" if event.exception else "query_stopped", detail
        )
        self._mark_terminated(event.id)


def state_custom_metrics(operators: Iterable[Any]) -> dict[str, int]:
    """The state stores' own metrics (``customMetrics``), summed over the stateful operators."""
    summed: dict[str, int] = {}
    for op in operators:
        for name, value in (op.customMetrics or {}).items():
            summed[name] = summed.get(name, 0) + int(value)
    return summed


def _num(value: float | None) -> float | None:
    if value is None or value != value:  # NaN
        return None
    return float(value)
