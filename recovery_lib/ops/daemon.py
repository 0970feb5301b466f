"""The job daemon: one detached process per configured job that runs the supervisor loop, so
that Airflow starts a job and then only looks at it (a short check that releases its worker
slot) instead of holding a slot for the job's lifetime.

    recovery job start q3_local     # detached: <home>/jobs/q3_local/daemon.json + daemon.log
    recovery job status q3_local    # JSON; exit 1 when failed or gone
    recovery job stop q3_local      # SIGTERM: the job's queries stop, then the daemon

The daemon restarts the job by its policy (native Spark recovery from the checkpoint, at most
``max_restarts`` times); when the budget is spent it records ``failed`` with the reason and
exits 1. Its status goes to ``daemon.json`` and to the metrics store (table job_status).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from recovery_lib.files import write_atomic
from recovery_lib.ha.replication.replica_set import ReplicaSet
from recovery_lib.ha.standby.pair import StandbyPair
from recovery_lib.io.sinks.modes import visibility_gate
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.tail_probe import TailProbe
from recovery_lib.metrics.latency import LatencyCollector, OutputFollower
from recovery_lib.metrics.openmetrics import JobMetrics
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.metrics.table_latency import TableLatencyCollector
from recovery_lib.ops.config import StreamJob, get_job
from recovery_lib.runtime import cluster as cluster_mod
from recovery_lib.runtime.checkpoint import committed_offsets, last_committed
from recovery_lib.runtime.daemon import (
    ACTIVE,
    DaemonStatus,
    describe,
    pid_alive,
    seen_alive,
    start_detached,
    stop_daemon,
)
from recovery_lib.runtime.logs import WarnOnChange, configure_logging
from recovery_lib.runtime.supervision import JobSupervisor
from recovery_lib.runtime.supervisor import ProcessSpec
from recovery_lib.settings import get_settings

log = logging.getLogger(__name__)
_metrics_warning = WarnOnChange(log)  # once per distinct failure, not per check

# What the CLI and the DAGs read of a job's daemon (the generic parts live in runtime/daemon.py).
__all__ = ["ACTIVE", "DaemonStatus", "check", "describe", "pid_alive", "start", "stop"]


def status_path(job: StreamJob) -> Path:
    return job.workdir / "daemon.json"


def read_status(job: StreamJob) -> DaemonStatus | None:
    try:
        return DaemonStatus(**json.loads(status_path(job).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write_status(job: StreamJob, status: DaemonStatus, store: MetricsStore | None) -> None:
    path = status_path(job)
    write_atomic(path, json.dumps(asdict(status)))
    if store is not None:
        store.add(
            "job_status",
            [
                (
                    status.job,
                    status.ts_ms,
                    status.status,
                    status.run_id,
                    status.supervisor_pid,
                    status.job_pid,
                    status.restarts,
                    status.heartbeat_ms,
                    status.committed_batch,
                    status.standby_lag_batches,
                    status.standby_lag_bytes,
                    status.message,
                )
            ],
        )
        store.flush()


# -- control (called by the CLI and the DAGs) ---------------------------------------------------


def start(name: str) -> DaemonStatus:
    """Start the job's daemon unless one is alive; returns its first status."""
    job = get_job(name)
    current = read_status(job)
    if current is not None and current.alive and current.status in ACTIVE:
        return current
    job.workdir.mkdir(parents=True, exist_ok=True)
    status_path(job).unlink(missing_ok=True)
    return start_detached(
        "recovery_lib.ops.daemon", name, job.workdir, lambda: read_status(job), f"job {name}"
    )


def check(name: str) -> DaemonStatus:
    """The job's status as seen now; a daemon that died without saying so is 'failed'."""
    job = get_job(name)
    return seen_alive(
        read_status(job),
        job.workdir / "daemon.log",
        f"job {name} was never started here (no {status_path(job)}); start it with "
        f"`recovery job start {name}`",
    )


def stop(name: str, timeout_s: float = 150.0) -> DaemonStatus | None:
    """SIGTERM the daemon and wait: it stops its nodes one after the other (up to 30 s each,
    primary, standby and any fenced zombie), so a shorter wait would orphan them."""
    job = get_job(name)
    stop_daemon(read_status(job), timeout_s)
    return read_status(job)


# -- the daemon itself ---------------------------------------------------------------------------


def run_daemon(name: str) -> int:
    job = get_job(name)
    settings = get_settings()
    store = MetricsStore(settings.home / "metrics.duckdb").start_background_flush()
    me = os.getpid()
    run_id = store.start_run(job.query, job.mode, {"job": job.name, **job.model_dump(mode="json")})
    status = DaemonStatus(job.name, "starting", me, now_ms(), run_id=run_id)
    _write_status(job, status, store)

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))

    cluster_url = None
    if job.placement == "cluster":
        state = cluster_mod.cluster_state()
        external = settings.spark_master if settings.spark_master.startswith("spark://") else None
        if state is None and external is None:
            status.status, status.message = (
                "failed",
                "placement is 'cluster' but no Spark cluster runs: `recovery cluster start`, "
                "or set RECOVERY_SPARK_MASTER=spark://host:7077",
            )
            status.ts_ms = now_ms()
            _write_status(job, status, store)
            store.finish_run(run_id, "failed")
            store.close()
            return 1
        cluster_url = state.url if state is not None else external
    spec = ProcessSpec.for_job(
        job.launch().replace(metrics=str(store.path), run_id=run_id),
        cluster_url=cluster_url,
        heartbeat_timeout_s=job.heartbeat_timeout_s,
        max_restarts=job.max_restarts,
    )
    mode = job.recovery_mode
    sup: JobSupervisor = mode.supervisor(spec, job.mode_request, job.supervisor_home, store, run_id)
    replicas = sup if isinstance(sup, ReplicaSet) else None
    # Where Prometheus looks: /metrics on 127.0.0.1, on the port the status names.
    metrics = JobMetrics(job.name, mode.name)
    status.metrics_port = metrics.serve(settings.daemon_metrics_port)
    probe = TailProbe.from_settings(client_config(), settings)
    # The job's output from now on (a window of it): output gap and recovery time after a
    # failure. Not stored: the metrics store keeps an experiment's samples, not a daemon's.
    target = job.table_target
    output: OutputFollower = (
        LatencyCollector(
            job.out_topic,
            run_id,
            None,
            from_beginning=False,
            gate=visibility_gate(job.sink_mode),
            window_s=settings.daemon_output_window_s,
        )
        if target is None
        else TableLatencyCollector(
            target, run_id, None, from_beginning=False, window_s=settings.daemon_output_window_s
        )
    )
    code = 0
    last_report = 0.0
    try:
        sup.start()
        while not stopping:
            try:
                sup.tick()
            except RuntimeError as exc:  # restart budget spent
                status.status, status.message = "failed", str(exc)
                code = 1
                break
            if not output.started and sup.serving():  # its output topic exists now
                output.start()
            if time.monotonic() - last_report >= settings.job_status_every_s:
                last_report = time.monotonic()
                beat = sup.heartbeat()
                status.job_pid = sup.pid
                status.restarts = len(sup.restarts)
                status.heartbeat_ms = beat.ts_ms if beat is not None else None
                status.committed_batch = last_committed(sup.live_checkpoints / job.query)
                status.status = (
                    "running" if sup.serving() else ("restarting" if sup.restarts else "starting")
                )
                notes = [sup.restarts[-1].cause if sup.restarts else ""]
                notes.append(broker_wait(beat))  # riding out a broker stall (kafka/outage.py)
                if isinstance(sup, StandbyPair):
                    info = getattr(sup.standby_beat(), "info", None) or {}
                    if not sup.standby_ready():  # the job serves; its next failure would not
                        notes.append(_standby_not_ready(info))
                    status.standby_lag_batches = info.get("lag_batches")
                    status.standby_lag_bytes = info.get("lag_bytes")
                if replicas is not None and replicas.failed:  # it serves, but unprotected
                    notes.append(
                        f"running on one replica: {sorted(replicas.failed)} being replaced"
                    )
                status.message = "; ".join(n for n in notes if n)
                status.ts_ms = now_ms()
                # /metrics first: whoever reads the status then scrapes sees this check or later.
                _observe(metrics, sup, job, status, store, run_id, probe, output)
                _write_status(job, status, store)
            time.sleep(0.5)
        if not code:
            status.status, status.message = "stopped", "stopped on request"
    finally:
        sup.stop()
        output.stop()
        probe.close()
        status.ts_ms = now_ms()
        status.job_pid = sup.pid
        status.restarts = len(sup.restarts)
        _write_status(job, status, store)
        store.finish_run(run_id, "failed" if code else "finished")
        store.close()
    return code


def broker_wait(beat: Any) -> str:
    """What the job's heartbeat says about a wait for the broker ("" when none)."""
    outage = ((getattr(beat, "info", None) or {}) if beat is not None else {}).get("broker_outage")
    if not outage:
        return ""
    return (
        f"waiting for the broker: {outage.get('waited_s', 0):.0f} s of "
        f"{outage.get('budget_s', 0):g} s ({outage.get('what', '?')})"
    )


def _standby_not_ready(info: dict[str, Any]) -> str:
    """Why a standby pair's next failure would not be masked yet."""
    batches = info.get("follower_lag_batches")
    if info.get("hot") and batches is not None:
        return (
            f"hot standby catching up: {batches} batch{'' if batches == 1 else 'es'}, "
            f"{info.get('follower_lag_s')} s of the primary's work behind"
        )
    return "no warm standby yet"


def _observe(
    metrics: JobMetrics,
    sup: Any,
    job: StreamJob,
    status: DaemonStatus,
    store: MetricsStore,
    run_id: str,
    probe: TailProbe,
    output: LatencyCollector,
) -> None:
    """The daemon's /metrics after a check; a metric that cannot be read now waits for the
    next check (it must not stop the supervision)."""
    try:
        metrics.observe_supervisor(sup)
        metrics.observe_committed(status.committed_batch)
        metrics.observe_store(store.path, job.query, job.name, run_id)
        committed = committed_offsets(sup.live_checkpoints / job.query)
        metrics.observe_since_failure(sup, output, now_ms())
        if committed:
            positions = {(t, int(p)): int(o) for t, ps in committed.items() for p, o in ps.items()}
            ends = probe.ends(list(positions), exact=False)
            waiting = {tp: o for tp, o in positions.items() if ends.get(tp, 0) > o}
            metrics.observe_input_lag(committed, ends, probe.oldest_timestamp(waiting), now_ms())
        causal = job.causal_config() if job.process_mode.causal else None
        if causal is not None and causal.storage == "kafka":  # the log's one partition
            topic = causal.topic
            kept = probe.ends([(topic, 0)], exact=False)[(topic, 0)] - probe.first_offset(topic, 0)
            metrics.observe_determinant_log(kept)
    except Exception as exc:  # noqa: BLE001 - reported, the supervision goes on
        _metrics_warning(f"metrics of job {job.name} not updated: {exc!r}")
    else:
        _metrics_warning.clear()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m recovery_lib.ops.daemon <job name>")

    configure_logging()
    raise SystemExit(run_daemon(args[0]))


if __name__ == "__main__":
    main()
