"""``recovery ops up|status|down``: the operations stack on this machine (ops/stack.py): the
embedded broker, Airflow (api-server, scheduler, dag-processor, triggerer) and the dashboard."""

from __future__ import annotations

import contextlib
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

ops_app = typer.Typer(
    help="The operations stack on this machine: broker, Airflow 3 and the dashboard, detached, "
    "stopped by PID (`make ops`).",
    no_args_is_help=True,
)
console = Console()


@ops_app.command("up")
def ops_up() -> None:
    """Start what is not running (broker unless KAFKA_BOOTSTRAP, Airflow, dashboard), wait until
    Airflow's API and the dashboard answer, print the URLs and the admin's credentials."""
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    from recovery_lib.kafka.exceptions import KafkaLayerError
    from recovery_lib.ops.stack import OpsStack, OpsStackError
    from recovery_lib.runtime.progress import progress_display

    stack = OpsStack()
    with progress_display(
        console,
        SpinnerColumn(finished_text="[green]✓[/]"),
        TextColumn("[bold]{task.fields[step]:<16}[/] {task.description}"),
        TimeElapsedColumn(),
    ) as progress:
        tasks: dict[str, int] = {}

        def step(name: str, message: str, done: bool) -> None:
            if name not in tasks:
                tasks[name] = progress.add_task(message, total=1, step=name)
            progress.update(tasks[name], description=message, completed=1 if done else 0)

        try:
            info = stack.up(step)
        except (OpsStackError, KafkaLayerError, OSError) as exc:
            progress.stop()
            console.print(f"[red]error:[/] {exc}")
            console.print("stopped what this call started; `recovery ops status` shows the rest")
            raise typer.Exit(code=1) from None
    table = Table(title="operations stack", show_header=False)
    table.add_row("Airflow", f"[bold]{info.airflow_url}[/]")
    table.add_row("  user / password", f"{info.user} / [bold]{info.password}[/]")
    table.add_row("  password file", str(info.passwords_file))
    table.add_row("dashboard", f"[bold]{info.dashboard_url}[/]")
    table.add_row("Kafka bootstrap", info.bootstrap)
    table.add_row("logs, pid files", str(stack.dir))
    console.print(table)
    if info.already_running:
        console.print(f"already running: {', '.join(info.already_running)}")
    console.print(
        "DAGs start paused: unpause them in the UI. `recovery ops status`, `recovery ops down`."
    )
    from recovery_lib.kafka.broker import MEMORY_ONLY_NOTE
    from recovery_lib.settings import get_settings

    if not get_settings().kafka_bootstrap:  # the stack runs the embedded broker
        console.print(f"[yellow]note:[/] {MEMORY_ONLY_NOTE}")


@ops_app.command("status")
def ops_status() -> None:
    """Each component: pid, alive, URL. Exit 3 unless every component runs."""
    from recovery_lib.ops.stack import OpsStack

    stack = OpsStack()
    rows = stack.status()
    table = Table(title="operations stack")
    for column in ("component", "pid", "alive", "url", "note"):
        table.add_column(column, no_wrap=column in ("component", "url"))
    for row in rows:
        table.add_row(
            row.name,
            str(row.pid) if row.pid is not None else "-",
            "[green]yes[/]" if row.alive else "[red]no[/]",
            row.url or "-",
            row.note,
        )
    console.print(table)
    console.print(f"logs and pid files: {stack.dir}/<component>.log|.pid")
    daemons = _daemon_metrics()
    if daemons:
        listed = Table(title="daemons' /metrics (OpenMetrics, for Prometheus)")
        for column in ("daemon", "status", "metrics"):
            listed.add_column(column, no_wrap=True)
        for name, status, url in daemons:
            listed.add_row(name, status, url)
        console.print(listed)
    if not all(row.alive for row in rows):
        raise typer.Exit(code=3)


def _daemon_metrics() -> list[tuple[str, str, str]]:
    """Each configured job's and pipeline's daemon that runs: its status and /metrics URL."""
    from recovery_lib.ops import daemon
    from recovery_lib.ops.config import load_jobs
    from recovery_lib.pipeline import daemon as pipeline_daemon
    from recovery_lib.pipeline.spec import load_pipelines

    found: list[tuple[str, str, Any]] = []
    # No jobs or pipelines file, or one that does not load: the stack's table says the rest.
    with contextlib.suppress(ValueError):
        found += [(name, "job", daemon.read_status(job)) for name, job in load_jobs().items()]
    with contextlib.suppress(ValueError):
        found += [(n, "pipeline", pipeline_daemon.read_status(n)) for n in load_pipelines()]
    return [
        (f"{kind} {name}", s.status, f"http://127.0.0.1:{s.metrics_port}/metrics")
        for name, kind, s in found
        if s is not None and s.alive and s.metrics_port
    ]


@ops_app.command("down")
def ops_down() -> None:
    """Stop what `recovery ops up` started, in reverse order, by PID (SIGTERM, wait, SIGKILL)."""
    from recovery_lib.ops.stack import OpsStack

    stopped = OpsStack().down(lambda _name, message, done: done and console.print(message))
    if not stopped:
        console.print("nothing of the operations stack was running")
