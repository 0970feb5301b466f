"""``recovery checkpoint rewind``: rewind a stopped query's Spark checkpoint to a batch
(runtime/rewind.py)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer

from recovery_lib.cli.output import abort, console

checkpoint_app = typer.Typer(help="Spark streaming checkpoints.", no_args_is_help=True)


@checkpoint_app.command("rewind")
def rewind_cmd(
    job: str = typer.Argument(..., help="A configured job (jobs file), or a checkpoint dir."),
    to_batch: int = typer.Option(..., "--to-batch", help="The batch to be the last committed."),
    dry_run: bool = typer.Option(False, help="List what would move; change nothing."),
) -> None:
    """Make batch b the query's last committed batch: newer offset/commit entries and state
    versions are moved aside (undo: move them back). The query must be stopped. To re-run the
    rewound batches with their first boundaries (same output ids), start it with
    --follow-log <moved_to>/offsets."""
    from recovery_lib.runtime.rewind import RewindRefused, rewind

    path = Path(job)
    if not path.is_dir():
        from recovery_lib.ops.config import get_job
        from recovery_lib.ops.daemon import read_status

        try:
            configured = get_job(job)
        except ValueError as exc:
            abort(
                ValueError(f"{job} is neither a checkpoint directory nor a configured job: {exc}")
            )
            return
        status = read_status(configured)
        if status is not None and status.alive and not dry_run:
            abort(
                RewindRefused(
                    f"job {job} is running (daemon pid {status.supervisor_pid}); stop it first "
                    f"(`recovery job stop {job}`), then rewind"
                )
            )
        path = configured.checkpoint
    try:
        plan = rewind(path, to_batch, dry_run=dry_run)
    except RewindRefused as exc:
        abort(exc)
        return
    console.print_json(json.dumps({**asdict(plan), "batches_rewound": plan.batches_rewound}))
