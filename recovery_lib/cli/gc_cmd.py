"""``recovery gc``: checkpoint GC of one configured job (ops/gc.py)."""

from __future__ import annotations

import json

import typer

from recovery_lib.cli.output import abort, console


def gc(
    name: str = typer.Argument(..., help="A configured job."),
    dry_run: bool = typer.Option(False, help="List what would be removed; change nothing."),
    keep: int = typer.Option(None, help="Committed batches to keep (default: the job's)."),
    delete_input_records: bool = typer.Option(False, help="Also DeleteRecords on inputs."),
) -> None:
    """Checkpoint GC of one job (what the checkpoint_gc DAG runs)."""
    from recovery_lib.ops.gc import gc_job

    try:
        result = gc_job(name, dry_run, keep, delete_input_records)
    except ValueError as exc:
        abort(exc)
        return
    console.print_json(json.dumps(result, default=str))
    if result["errors"]:
        raise typer.Exit(code=1)
