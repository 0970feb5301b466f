"""``recovery demo``: the main job end to end, then native vs causal recovery of a
nondeterministic pipeline (demo.py)."""

from __future__ import annotations

import typer

from recovery_lib.cli.output import console
from recovery_lib.kafka import broker as broker_mod


def demo(
    events: int = typer.Option(50_000, help="Events to generate."),
    recovery: bool = typer.Option(
        True, help="Also run the native-vs-causal recovery demo (about 5 minutes)."
    ),
) -> None:
    """Run the main job end to end on embedded defaults, then a nondeterministic pipeline killed
    mid-write, native vs causal, judged by the oracle (starts and stops its own broker unless
    KAFKA_BOOTSTRAP is set)."""
    from recovery_lib.demo import print_recovery_result, print_result, run_demo, run_recovery_demo
    from recovery_lib.settings import get_settings

    owned = None
    if not get_settings().kafka_bootstrap and broker_mod.running_state() is None:
        owned = broker_mod.EmbeddedBroker()
        state = owned.start()
        console.print(f"embedded broker started on {state.bootstrap} (pid {state.pid})")
    try:
        result = run_demo(events, console)
        print_result(result, console)
        if recovery:
            print_recovery_result(run_recovery_demo(console), console)
    finally:
        if owned is not None:
            owned.stop()
            console.print("embedded broker stopped")
