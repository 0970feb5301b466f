"""The pipeline daemon: one detached process per running pipeline that supervises its stages
and recovers them by the pipeline's protocol, so that Airflow starts a pipeline and then only
looks at it (as the job daemon does for single jobs, ops/daemon.py).

    recovery pipeline start q1p     # detached: <home>/pipelines/q1p/daemon.json + daemon.log
    recovery pipeline status q1p    # JSON; exit 1 when failed or gone
    recovery pipeline stop q1p      # SIGTERM: the stages stop, then the daemon

Its status goes to ``daemon.json`` and to the metrics store (table job_status, job
``pipeline:<name>``; ``restarts`` counts recoveries, ``message`` says which stages restarted
and whether the recovery stayed local).
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

from recovery_lib.files import write_atomic
from recovery_lib.metrics.openmetrics import JobMetrics
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.pipeline.runner import PipelineRun, snapshot
from recovery_lib.pipeline.spec import get_pipeline, pipeline_home
from recovery_lib.runtime.daemon import (
    ACTIVE,
    DaemonStatus,
    seen_alive,
    start_detached,
    stop_daemon,
)
from recovery_lib.runtime.logs import WarnOnChange, configure_logging
from recovery_lib.settings import get_settings

log = logging.getLogger(__name__)


def status_path(name: str) -> Path:
    return pipeline_home(name) / "daemon.json"


def read_status(name: str) -> DaemonStatus | None:
    try:
        return DaemonStatus(**json.loads(status_path(name).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write(name: str, status: DaemonStatus, store: MetricsStore | None) -> None:
    path = status_path(name)
    write_atomic(path, json.dumps(asdict(status)))
    if store is not None:
        store.add(
            "job_status",
            [
                (status.job, status.ts_ms, status.status, status.run_id, status.supervisor_pid,
                 status.job_pid, status.restarts, status.heartbeat_ms, status.committed_batch,
                 None, None, status.message)
            ],
        )  # fmt: skip
        store.flush()


def start(name: str) -> DaemonStatus:
    get_pipeline(name)  # a wrong name fails here, not in the detached process
    current = read_status(name)
    if current is not None and current.alive and current.status in ACTIVE:
        return current
    home = pipeline_home(name)
    home.mkdir(parents=True, exist_ok=True)
    status_path(name).unlink(missing_ok=True)
    return start_detached(
        "recovery_lib.pipeline.daemon", name, home, lambda: read_status(name), f"pipeline {name}"
    )


def check(name: str) -> DaemonStatus:
    return seen_alive(
        read_status(name),
        pipeline_home(name) / "daemon.log",
        f"pipeline {name} was never started here (no {status_path(name)}); start it with "
        f"`recovery pipeline start {name}`",
    )


def stop(name: str, timeout_s: float = 180.0) -> DaemonStatus | None:
    """SIGTERM the daemon and wait while it stops every stage (up to 30 s each)."""
    stop_daemon(read_status(name), timeout_s)
    return read_status(name)


def run_daemon(name: str) -> int:
    spec = get_pipeline(name)
    settings = get_settings()
    store = MetricsStore(settings.home / "metrics.duckdb").start_background_flush()
    run_id = store.start_run(f"pipeline:{name}", spec.protocol, spec.model_dump())
    status = DaemonStatus(f"pipeline:{name}", "starting", os.getpid(), now_ms(), run_id=run_id)
    _write(name, status, store)
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    run = PipelineRun(
        spec, pipeline_home(name), store=store, run_id=run_id, metrics_path=store.path
    )
    code, last_report = 0, 0.0
    metrics = JobMetrics(f"pipeline:{name}", spec.protocol)  # /metrics, port in the status
    state_warning = WarnOnChange(log)  # once per distinct failure, not per check
    status.metrics_port = metrics.serve(settings.daemon_metrics_port)
    try:
        run.start()
        while not stopping:
            try:
                run.tick()
            except RuntimeError as exc:  # recovery budget spent, or a plan that cannot run
                status.status, status.message = "failed", str(exc)
                code = 1
                break
            if time.monotonic() - last_report >= settings.job_status_every_s:
                last_report = time.monotonic()
                serving = all(sup.is_ready() for sup in run.supervisors.values())
                recovering = any(r.restart_time_s is None for r in run.recoveries)
                status.status = (
                    "restarting" if recovering else ("running" if serving else "starting")
                )
                status.restarts = len(run.recoveries)
                if run.recoveries:
                    last = run.recoveries[-1]
                    status.message = (
                        f"stages {sorted(last.plan.restart)} restarted after {last.failed} died "
                        f"({'local' if last.plan.local else 'global'} recovery)"
                    )
                status.ts_ms = now_ms()
                # /metrics first: whoever reads the status then scrapes sees this check or later.
                metrics.observe_pipeline(serving and not recovering, run.recoveries)
                _write(name, status, store)
                try:  # the dashboard's view of stages, checkpoints and the recovery line
                    store.event(run_id, "pipeline_state", snapshot(run))
                    state_warning.clear()
                except (OSError, ValueError, RuntimeError) as exc:
                    state_warning(f"pipeline state not recorded: {exc}")
            time.sleep(0.5)
        if not code:
            status.status, status.message = "stopped", "stopped on request"
    finally:
        run.stop()
        status.ts_ms = now_ms()
        status.restarts = len(run.recoveries)
        _write(name, status, store)
        store.finish_run(run_id, "failed" if code else "finished")
        store.close()
    return code


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m recovery_lib.pipeline.daemon <pipeline name>")

    configure_logging()
    raise SystemExit(run_daemon(args[0]))


if __name__ == "__main__":
    main()
