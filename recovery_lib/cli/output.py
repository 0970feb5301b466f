"""The console every ``recovery`` command prints to, and how a command fails. Exit codes: 1 an
error or a failed check, 2 inconsistent (``experiment run``), 3 not running (``status``
commands), 4 inconclusive; a ``RecoveryError`` no command handled (cli/main.py ``run``): 78 a
configuration that cannot work, 69 no broker (or one that refuses the client), else 1. In a
pipe, long commands print their progress as plain lines (runtime/progress.py)."""

from __future__ import annotations

import typer
from rich.console import Console

console = Console()

EXIT_INCONCLUSIVE = 4  # a requested failure did not fire, or nothing was produced


def abort(exc: Exception) -> None:
    """Print the error and exit 1 (raises typer.Exit)."""
    console.print(f"[red]error:[/] {exc}")
    raise typer.Exit(code=1)
