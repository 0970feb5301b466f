"""A supervised job's health where operators already look: ``/metrics`` in the OpenMetrics
text format (prometheus_client), served on 127.0.0.1 by each daemon (the job daemon, the
pipeline daemon) on a port of its own, which the daemon's status names.

Names follow Prometheus conventions: the ``recovery_`` namespace, units in names, ``_total``
counters. Every series is labelled by ``job`` and ``mode`` (the recovery mode). The daemon
calls ``observe_supervisor`` once per check; counters move by what is new since the last.
docker/alerts.yml and docker/grafana-dashboard.json use these names (a test checks them).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from recovery_lib.metrics.latency import LatencyCollector
from recovery_lib.metrics.recovery import output_gap_s, recovery_time_s
from recovery_lib.metrics.store import now_ms, read_frame

NAMESPACE = "recovery"
log = logging.getLogger(__name__)


class JobMetrics:
    """The metrics of one supervised job (or pipeline), in a registry of their own."""

    def __init__(self, job: str, mode: str) -> None:
        self.labels = {"job": job, "mode": mode}
        self.registry = CollectorRegistry()
        names = ("job", "mode")

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, [*names, *extra], namespace=NAMESPACE, registry=self.registry)

        def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, [*names, *extra], namespace=NAMESPACE, registry=self.registry)

        self.up = gauge("job_up", "1 while the job serves (its query processes), else 0")
        self.restarts = counter("restarts", "restarts of the job's process (native recovery)")
        self.takeovers = counter("takeovers", "standby or leader takeovers")
        self.replica_deaths = counter("replica_deaths", "replicas that died")
        self.replacements = counter("replica_replacements", "dead replicas replaced and joined")
        self.replicas_missing = gauge("replicas_missing", "replicas dead and not joined again")
        self.last_restart = gauge("last_restart_seconds", "failure detected -> job serves again")
        self.last_restart_phase = gauge(
            "last_restart_phase_seconds",
            "the last restart, phase by phase (detect, process and imports, JVM and session, "
            "query build, first batch, caught up)",
            ("phase",),
        )
        self.last_recovery = gauge(
            "last_recovery_seconds", "failure -> latency back within 10 % (DESIGN 4)"
        )
        self.last_output_gap = gauge(
            "last_output_gap_seconds", "the longest time without output after the last failure"
        )
        self.committed_batch = gauge("committed_batch", "the job's last committed micro-batch")
        self.input_lag_records = gauge("input_lag_records", "input records not read yet")
        self.input_lag_seconds = gauge(
            "input_lag_seconds", "age of the oldest input record not read yet"
        )
        self.batch_duration = gauge("batch_duration_seconds", "the last micro-batch's duration")
        self.determinant_log_records = gauge(
            "determinant_log_records",
            "records the causal determinant log holds (kept, not truncated)",
        )
        self.gate_dropped = counter(
            "gate_dropped_copies", "copies the replica gate dropped", ("replica",)
        )
        self.verdict = gauge(
            "consistency_verdict",
            "1 for the last consistency report's verdict and guarantee, 0 for the others",
            ("verdict", "guarantee"),
        )
        self.gc_freed = counter("checkpoint_gc_freed_bytes", "bytes checkpoint GC removed")
        self._seen: dict[str, float] = {}
        self._server: Any = None
        # Every series of the job exists from the first scrape (a counter at 0, so that an
        # alert's increase() sees its first step).
        for metric in (
            self.up, self.restarts, self.takeovers, self.replica_deaths, self.replacements,
            self.gc_freed,
        ):  # fmt: skip
            metric.labels(**self.labels)

    def _advance(self, metric: Counter, key: str, total: float, **extra: str) -> None:
        """A counter moved to ``total`` (a supervisor counts from its start)."""
        new = total - self._seen.get(key, 0.0)
        if new > 0:
            metric.labels(**self.labels, **extra).inc(new)
            self._seen[key] = total

    def observe_supervisor(self, sup: Any) -> None:
        """What the daemon's supervisor (runtime/supervision.py JobSupervisor) knows now."""
        self.up.labels(**self.labels).set(1 if sup.serving() else 0)
        self._advance(self.restarts, "restarts", len(sup.restarts))
        self._advance(self.takeovers, "takeovers", len(sup.takeovers))
        if sup.restarts and sup.restarts[-1].restart_time_s is not None:
            self.last_restart.labels(**self.labels).set(sup.restarts[-1].restart_time_s)
        replacements = getattr(sup, "replacements", None)
        if replacements is not None:  # a replica set
            self._advance(self.replica_deaths, "deaths", len(replacements))
            joined = sum(1 for r in replacements if not r.pending)
            self._advance(self.replacements, "joined", joined)
            self.replicas_missing.labels(**self.labels).set(len(sup.failed))
            gate = getattr(sup, "gate", None)
            for replica, dropped in (dict(gate.dropped) if gate is not None else {}).items():
                self._advance(self.gate_dropped, f"gate:{replica}", dropped, replica=replica)

    @staticmethod
    def last_failure_ms(sup: Any) -> int | None:
        """When the supervisor detected its last failure (a restart, a takeover or a replica's
        death); a daemon does not see the failure itself, only its detection."""
        times = [r.detected_ms for r in sup.restarts]
        times += [r.detected_ms for r in getattr(sup, "replacements", None) or ()]
        return max(times) if times else None

    def observe_output(
        self, samples: list[tuple[int, int]], visible_ms: list[int], failure_ms: int, now: int
    ) -> None:
        """The job's output since its last failure: the output gap (while no output has come
        yet, the time since the failure, growing) and, once latency is back within 10 % of
        before, the recovery time (metrics/recovery.py, DESIGN 4). ``samples`` are (visible,
        latency) pairs, ``visible_ms`` every output's time (also those without latency)."""
        after = [t for t in visible_ms if t >= failure_ms]
        gap = output_gap_s(after, failure_ms) if after else (now - failure_ms) / 1000
        self.last_output_gap.labels(**self.labels).set(max(0.0, gap))
        recovered = recovery_time_s(samples, failure_ms)
        if recovered is not None:
            self.last_recovery.labels(**self.labels).set(recovered)

    def observe_since_failure(self, sup: Any, output: LatencyCollector, now: int) -> None:
        """``observe_output`` for the supervisor's last failure, from a follower of the job's
        output (nothing before the first failure)."""
        failure_ms = self.last_failure_ms(sup)
        if failure_ms is None:
            return
        samples = list(output.samples)
        visible = [v for v, _ in samples] or [s * 1000 for s in list(output.per_second)]
        self.observe_output(samples, visible, failure_ms, now)

    def observe_pipeline(self, serving: bool, recoveries: list[Any]) -> None:
        """A pipeline daemon's view: every stage serving, its recoveries (each restarts one or
        more stages) and the last one's restart time."""
        self.up.labels(**self.labels).set(1 if serving else 0)
        self._advance(self.restarts, "restarts", len(recoveries))
        done = [r for r in recoveries if r.restart_time_s is not None]
        if done:
            self.last_restart.labels(**self.labels).set(done[-1].restart_time_s)

    def observe_committed(self, batch: int | None) -> None:
        if batch is not None:
            self.committed_batch.labels(**self.labels).set(batch)

    def observe_determinant_log(self, records: int) -> None:
        self.determinant_log_records.labels(**self.labels).set(records)

    def observe_verdict(self, verdict: str, guarantee: str | None) -> None:
        """The last consistency report: its (verdict, guarantee) series 1, every other 0."""
        for labels in list(self.verdict._metrics):  # noqa: SLF001 - prometheus_client's children
            self.verdict.labels(*labels).set(0)
        self.verdict.labels(**self.labels, verdict=verdict, guarantee=guarantee or "none").set(1)

    def observe_store(self, path: str | Path, query: str, job: str, run_id: str | None) -> None:
        """What the metrics store knows beyond the supervisor: the last micro-batch's duration
        (the job's listener writes it), the newest consistency verdict of the job's output
        (the consistency DAG writes it), the bytes checkpoint GC removed for the job."""
        batch = read_frame(
            path,
            "SELECT trigger_ms FROM micro_batches WHERE run_id = ? ORDER BY ts_ms DESC LIMIT 1",
            [run_id],
        )
        if not batch.empty and batch["trigger_ms"].notna().iloc[0]:
            self.batch_duration.labels(**self.labels).set(float(batch["trigger_ms"].iloc[0]) / 1000)
        verdict = read_frame(
            path,
            """SELECT verdict, json_extract_string(report, '$.guarantee') AS guarantee
               FROM consistency_reports WHERE query = ? ORDER BY ts_ms DESC LIMIT 1""",
            [query],
        )
        if not verdict.empty:
            self.observe_verdict(str(verdict["verdict"].iloc[0]), verdict["guarantee"].iloc[0])
        freed = read_frame(
            path,
            "SELECT coalesce(sum(bytes_freed), 0) AS b FROM gc_runs WHERE job = ? AND NOT dry_run",
            [job],
        )
        self._advance(self.gc_freed, "gc", float(freed["b"].iloc[0]))
        if run_id is not None:
            self.observe_restart_phases(path, run_id)

    def observe_restart_phases(self, path: str | Path, run_id: str) -> None:
        """The phases of the run's last restart (metrics/views.restart_phases)."""
        from recovery_lib.metrics.views import RESTART_PHASES, restart_phases

        phases = restart_phases(path, run_id)
        if phases.empty:
            return
        last = phases.iloc[0]
        for phase in RESTART_PHASES:
            if last[phase] is not None and last[phase] == last[phase]:  # not None, not NaN
                self.last_restart_phase.labels(**self.labels, phase=phase).set(float(last[phase]))
            else:  # not the previous restart's figure
                with contextlib.suppress(KeyError):  # never set
                    self.last_restart_phase.remove(*self.labels.values(), phase)

    def observe_input_lag(
        self,
        committed: Mapping[str, Mapping[str, int]],
        ends: Mapping[tuple[str, int], int],
        oldest_unread_ms: int | None = None,
        now: int | None = None,
    ) -> None:
        """Input records not read yet (each partition's end minus the committed offset) and
        the age of the oldest of them (0 when none waits)."""
        lag = sum(
            max(0, int(ends[(topic, int(part))]) - int(offset))
            for topic, parts in committed.items()
            for part, offset in parts.items()
            if (topic, int(part)) in ends
        )
        self.input_lag_records.labels(**self.labels).set(lag)
        if lag == 0:
            self.input_lag_seconds.labels(**self.labels).set(0)
        elif oldest_unread_ms is not None and now is not None:
            self.input_lag_seconds.labels(**self.labels).set(max(0, now - oldest_unread_ms) / 1000)

    def serve(self, port: int = 0) -> int:
        """Serve ``/metrics`` on 127.0.0.1 (``port`` 0: a free one); returns the port."""
        self._server, _thread = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        return int(self._server.server_port)

    def close(self) -> None:
        """Stop serving (safe when never served)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class LiveMetrics:
    """A run's /metrics kept current by a thread of its own: for an experiment's run, whose
    supervisor (a restarting job, a standby pair, a replica set) the experiment's loop drives.
    The thread only reads the supervisor's lists and the output follower's samples."""

    def __init__(
        self, metrics: JobMetrics, sup: Any, output: LatencyCollector, every_s: float
    ) -> None:
        self.metrics = metrics
        self.sup = sup
        self.output = output
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-metrics", daemon=True)
        self._last_warning: str | None = None  # a failure that repeats is logged once

    def start(self, port: int = 0) -> int:
        """Serve on 127.0.0.1 (``port`` 0: a free one) and keep the metrics current."""
        served = self.metrics.serve(port)
        self._thread.start()
        return served

    def observe(self) -> None:
        self.metrics.observe_supervisor(self.sup)
        self.metrics.observe_since_failure(self.sup, self.output, now_ms())

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.observe()
            except Exception as exc:  # noqa: BLE001 - a metric must not stop the run
                message = f"metrics not updated: {exc!r}"
                level = logging.DEBUG if message == self._last_warning else logging.WARNING
                log.log(level, "%s", message)
                self._last_warning = message
            else:
                self._last_warning = None

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=10)
        self.metrics.close()


def exposed_names(metrics: JobMetrics) -> set[str]:
    """Every sample name a scrape of ``metrics`` shows (``_total`` and all)."""
    return {sample.name for family in metrics.registry.collect() for sample in family.samples} | {
        family.name for family in metrics.registry.collect()
    }
