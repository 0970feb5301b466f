"""``recovery job list|start|status|stop``: supervised long-running jobs, one daemon each
(ops/daemon.py; configured in dags/streaming_jobs.yaml)."""

from __future__ import annotations

import json

import typer
from pydantic import ValidationError

from recovery_lib.cli.output import abort, console
from recovery_lib.errors import RecoveryError

# What a command reports in one line: the library's refusals, and a RECOVERY_* variable the
# settings refused (pydantic's error, raised before any library code runs).
REFUSED = (RecoveryError, ValidationError)

job_app = typer.Typer(
    help="Supervised long-running jobs (dags/streaming_jobs.yaml).", no_args_is_help=True
)


@job_app.command("list")
def job_list() -> None:
    """The configured jobs and their daemon status."""
    from recovery_lib.ops import daemon
    from recovery_lib.ops.config import load_jobs

    try:
        jobs = load_jobs()
    except REFUSED as exc:
        abort(exc)
        return
    rows = {}
    for name, job in jobs.items():
        status = daemon.read_status(job)
        rows[name] = {
            "query": job.query,
            "mode": job.mode,
            "placement": job.placement,
            "status": status.status if status else "never started",
            "alive": status.alive if status else False,
        }
    console.print_json(json.dumps(rows))


@job_app.command("start")
def job_start(name: str) -> None:
    """Start the job's supervisor daemon (detached); no-op if it is alive."""
    from recovery_lib.ops import daemon

    try:
        console.print_json(json.dumps(daemon.describe(daemon.start(name))))
    except REFUSED as exc:
        abort(exc)


@job_app.command("status")
def job_status(name: str) -> None:
    """The daemon's status as JSON; exit 1 when the job failed or its daemon is gone."""
    from recovery_lib.ops import daemon

    try:
        status = daemon.check(name)
    except REFUSED as exc:
        abort(exc)
        return
    console.print_json(json.dumps(daemon.describe(status)))
    if status.status == "failed":
        raise typer.Exit(code=1)


@job_app.command("stop")
def job_stop(name: str) -> None:
    """SIGTERM the daemon: the job's queries stop, then the daemon."""
    from recovery_lib.ops import daemon

    try:
        console.print_json(json.dumps(daemon.describe(daemon.stop(name))))
    except REFUSED as exc:
        abort(exc)
