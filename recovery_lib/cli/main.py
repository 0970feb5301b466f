"""``recovery``: broker, topics, demo and benchmarks from the command line."""

from __future__ import annotations

import time

import typer
from rich.console import Console

from recovery_lib.kafka import broker as broker_mod
from recovery_lib.kafka.exceptions import KafkaLayerError

app = typer.Typer(help="Consistent, fast recovery for Spark streaming jobs.", no_args_is_help=True)
broker_app = typer.Typer(help="The embedded Kafka-protocol broker (tansu).", no_args_is_help=True)
topics_app = typer.Typer(help="Topic administration.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks that write JSON + PNG reports.", no_args_is_help=True)
app.add_typer(broker_app, name="broker")
app.add_typer(topics_app, name="topics")
app.add_typer(bench_app, name="bench")
console = Console()


def _fail(exc: Exception) -> None:
    console.print(f"[red]error:[/] {exc}")
    raise typer.Exit(code=1)


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
        _fail(exc)
        return
    console.print(
        f"broker up: pid {state.pid}, bootstrap [bold]{state.bootstrap}[/], log {state.log_file}"
    )
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
def broker_stop() -> None:
    """Stop the recorded embedded broker by PID."""
    state = broker_mod.stop_recorded()
    console.print(f"stopped broker pid {state.pid}" if state else "no embedded broker is running")


@broker_app.command("status")
def broker_status() -> None:
    """Print whether the embedded broker runs, and where."""
    state = broker_mod.running_state()
    if state is None:
        console.print("no embedded broker is running")
        raise typer.Exit(code=3)
    console.print(f"running: pid {state.pid}, bootstrap {state.bootstrap}, log {state.log_file}")


@topics_app.command("create")
def topics_create(name: str, partitions: int = typer.Option(1, min=1)) -> None:
    from recovery_lib.kafka.admin import TopicAdmin

    try:
        created = TopicAdmin().create(name, partitions)
    except KafkaLayerError as exc:
        _fail(exc)
        return
    console.print(
        f"created {name} ({partitions} partitions)" if created else f"{name} already exists"
    )


@topics_app.command("delete")
def topics_delete(name: str) -> None:
    from recovery_lib.kafka.admin import TopicAdmin

    try:
        deleted = TopicAdmin().delete(name)
    except KafkaLayerError as exc:
        _fail(exc)
        return
    console.print(f"deleted {name}" if deleted else f"{name} does not exist")


@topics_app.command("list")
def topics_list() -> None:
    from recovery_lib.kafka.admin import TopicAdmin

    try:
        for name in TopicAdmin().list():
            console.print(name)
    except KafkaLayerError as exc:
        _fail(exc)


@app.command("demo")
def demo(events: int = typer.Option(50_000, help="Events to generate.")) -> None:
    """Run the main job end to end on embedded defaults (starts and stops its own broker
    unless KAFKA_BOOTSTRAP is set)."""
    from recovery_lib.demo import print_result, run_demo
    from recovery_lib.settings import get_settings

    owned = None
    if not get_settings().kafka_bootstrap and broker_mod.running_state() is None:
        owned = broker_mod.EmbeddedBroker()
        state = owned.start()
        console.print(f"embedded broker started on {state.bootstrap} (pid {state.pid})")
    try:
        result = run_demo(events, console)
        print_result(result, console)
    finally:
        if owned is not None:
            owned.stop()
            console.print("embedded broker stopped")


@bench_app.command("io")
def bench_io(
    events: int = typer.Option(300_000, help="Events per measured path."),
    out: str = typer.Option("reports/bench_io", help="Report prefix (.json and .png)."),
) -> None:
    """Throughput of source -> noop / stateful count / Kafka sink, broker ceiling, latency."""
    from recovery_lib.bench.io_bench import run_io_bench

    run_io_bench(events=events, out_prefix=out, console=console)


if __name__ == "__main__":
    app()
