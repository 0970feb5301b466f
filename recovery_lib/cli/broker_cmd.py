"""``recovery broker start|stop|status``: the embedded Kafka-protocol broker (kafka/broker.py)."""

from __future__ import annotations

import time

import typer

from recovery_lib.cli.output import abort, console
from recovery_lib.kafka import broker as broker_mod
from recovery_lib.kafka.exceptions import KafkaLayerError

broker_app = typer.Typer(
    help="The broker the project runs: Apache Kafka (durable) or tansu (in memory).",
    no_args_is_help=True,
)


@broker_app.command("start")
def broker_start(
    port: int = typer.Option(
        0, help="Port on 127.0.0.1 (0 = a free one; a Kafka log dir keeps its first ports)."
    ),
    foreground: bool = typer.Option(False, help="Stay attached; Ctrl-C stops the broker."),
    kind: str = typer.Option(
        "", help="kafka or tansu (default: RECOVERY_BROKER_KIND, else the settings' default)."
    ),
    nodes: int = typer.Option(
        1, help="1, or 3 for a Kafka cluster (replication 3, min.insync.replicas 2)."
    ),
) -> None:
    """Start the broker (detached unless --foreground)."""
    try:
        b = broker_mod.EmbeddedBroker(port=port or None, kind=kind or None, nodes=nodes)
        state = b.start(detached=not foreground)
    except KafkaLayerError as exc:
        abort(exc)
        return
    console.print(
        f"{state.kind} broker up ({len(state.nodes)} node{'s' if len(state.nodes) > 1 else ''}): "
        f"pid {' '.join(map(str, state.pids))}, bootstrap [bold]{state.bootstrap}[/], "
        f"log {state.log_file}"
    )
    if state.kind == "tansu":
        console.print(f"[yellow]note:[/] {broker_mod.MEMORY_ONLY_NOTE}")
    else:
        console.print(f"log dir (durable across restarts): {state.log_dir}")
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
    console.print(
        f"running: {state.kind}, pid {' '.join(map(str, state.pids))}, bootstrap "
        f"{state.bootstrap}, log {state.log_file}"
    )
