"""``recovery soak``: a job under the whole operations stack for hours, hurt at random by the
``chaos`` DAG, its processes' memory and its storage sampled (ops/soak.py)."""

from __future__ import annotations

import typer

from recovery_lib.cli.output import abort, console


def soak(
    job: str = typer.Option("q3", help="A job of jobs/ by name, or module:attr of a JobSpec."),
    hours: float = typer.Option(2.0, help="How long the input runs (hours)."),
    rate: float = typer.Option(200.0, help="Input events per second."),
    chaos_every: float = typer.Option(3.0, help="Minutes between chaos faults (the DAG's)."),
    gc_every: float = typer.Option(10.0, help="Minutes between checkpoint GC passes."),
    fault_s: float = typer.Option(10.0, help="Seconds a blackhole, pause or freeze lasts."),
    sample_every: float = typer.Option(60.0, help="Seconds between memory and size samples."),
    report: str = typer.Option("reports/soak", help="Report prefix (.json and .png)."),
) -> None:
    """Run a job under Airflow, GC and random chaos for hours; judge it at the end."""
    from recovery_lib.ops.airflow_api import AirflowApiError
    from recovery_lib.ops.soak import SoakConfig, SoakRefused, run_soak
    from recovery_lib.runtime.logs import ProgressThrottle

    cfg = SoakConfig(
        job=job,
        hours=hours,
        rate=rate,
        chaos_every_min=chaos_every,
        gc_every_min=gc_every,
        fault_s=fault_s,
        sample_every_s=sample_every,
        report=report,
    )
    try:
        result = run_soak(cfg, ProgressThrottle(console.print))
    except (ValueError, SoakRefused, AirflowApiError, TimeoutError) as exc:
        abort(exc)
        return
    console.print(
        f"verdict {result.get('verdict')} ({result.get('guarantee')}), "
        f"{result.get('chaos', {}).get('fired', 0)} faults, {result.get('restarts')} restarts; "
        f"report: {report}.json, chart: {report}.png"
    )
    if result.get("verdict") != "consistent":
        raise typer.Exit(code=1)
