"""``recovery broker start|stop|status``: the embedded Kafka-protocol broker (kafka/broker.py)."""

from __future__ import annotations

import time

import typer

from recovery_lib.cli.output import abort, console
from recovery_lib.kafka import broker as broker_mod
from recovery_lib.kafka.exceptions import KafkaLayerError

broker_app = typer.Typer(help="The embedded Kafka-protocol broker (tansu).", no_args_is_help=True)


@broker_app.command("start")
def broker_start(
    port: int = typer.Option(0, help="Port on 127.0.0.1 (0 = a free one)."),
    foreground: bool = typer.Option(False, help="Stay attached; Ctrl-C stops the broker."),
) -> None:
    """Start the embedded broker (detached unless --foreground)."""
    b = broker_mod.EmbeddedBroker(port=port or None)
    try:
        state = b.start(detached=not foreground)
    except KafkaLayerError as exc:
        abort(exc)
        return
    console.print(
        f"broker up: pid {state.pid}, bootstrap [bold]{state.bootstrap}[/], log {state.log_file}"
    )
    console.print(f"[yellow]note:[/] {broker_mod.MEMORY_ONLY_NOTE}")
    if foreground:
        try:
            while b.process is not None and b.process.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            b.stop()
            console.print("broker stopped")


@broker_app.command("stop")
def broker_stop(
    force: bool = typer.Option(
        False, help="Stop it even when a running command (a benchmark, a test run) owns it."
    ),
) -> None:
    """Stop the recorded embedded broker by PID."""
    try:
        state = broker_mod.stop_recorded(force=force)
    except KafkaLayerError as exc:
        abort(exc)
        return
    console.print(f"stopped broker pid {state.pid}" if state else "no embedded broker is running")


@broker_app.command("status")
def broker_status() -> None:
    """Print whether the embedded broker runs, and where."""
    state = broker_mod.running_state()
    if state is None:
        console.print("no embedded broker is running")
        raise typer.Exit(code=3)
    console.print(f"running: pid {state.pid}, bootstrap {state.bootstrap}, log {state.log_file}")
