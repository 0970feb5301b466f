"""``recovery contract check``: how strong a job's consistency contract is, by mutation testing
the oracle on a reference run's output (verify/mutation.py)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from recovery_lib.cli.output import abort, console
from recovery_lib.cli.verify_cmd import (
    CLOCK_OPTION,
    DEDUP_OPTION,
    EVENTS_OPTION,
    INPUT_OPTION,
    RATE_OPTION,
    SCHEMA_OPTION,
    SEED_OPTION,
    SKEW_OPTION,
    input_view,
    time_span,
)
from recovery_lib.files import write_json_report
from recovery_lib.kafka.exceptions import KafkaLayerError

contract_app = typer.Typer(
    help="A job's consistency contract: how strong it is.", no_args_is_help=True
)

EXIT_WEAK = 1  # a mutant passed or a control was rejected


@contract_app.command("check")
def check(
    job: str = typer.Option(..., "--job", help="The job (module:attr or a name of jobs/)."),
    reference_topic: str = typer.Option(
        ..., help="A failure-free run's sink topic: the output the operators change."
    ),
    dedup: bool = DEDUP_OPTION,
    input_topic: list[str] = INPUT_OPTION,
    events: int = EVENTS_OPTION,
    seed: int = SEED_OPTION,
    rate: float = RATE_OPTION,
    skew: float = SKEW_OPTION,
    mutation_seed: int = typer.Option(0, help="Which outputs the operators pick."),
    report: Path = typer.Option(None, help="Also write the report here (JSON)."),
    schema: str = SCHEMA_OPTION,
    clock: str = CLOCK_OPTION,
) -> None:
    """Apply every mutation operator that fits the job's contract to the reference output and
    judge each mutant: the contract must catch every mutant and pass every control. Exits 1
    when it misses one (the operators it misses are named)."""
    from recovery_lib.io.sinks.dedup_reader import read_topic
    from recovery_lib.job.spec import resolve_job
    from recovery_lib.runtime.progress import progress_display
    from recovery_lib.settings import get_settings
    from recovery_lib.verify.mutation import OPERATORS, mutate
    from recovery_lib.verify.schema import load_schema, recorded_schema

    try:
        spec = resolve_job(job)
        contract = spec.contract.with_schema(
            load_schema(schema) if schema else recorded_schema(get_settings().home, reference_topic)
        )
        span = time_span(clock, "--clock")
        reference = list(read_topic(reference_topic))
        inputs = input_view(input_topic, events, seed, rate, skew)
    except (KafkaLayerError, ValueError) as exc:
        abort(exc)
        return
    if not reference:
        abort(ValueError(f"topic {reference_topic} holds no output: run the job first"))
        return
    with progress_display(console, transient=True) as progress:
        task = progress.add_task(f"mutants of {spec.name}", total=None)
        result = mutate(
            spec.name,
            contract,
            reference,
            dedup,
            inputs,
            mutation_seed,
            on_mutant=lambda _m: progress.advance(task),
            clock=span,
        )
    table = Table(title=f"{spec.name}: {len(OPERATORS)} operators on {result.outputs} outputs")
    for column in ("operator", "mutants caught", "controls passed", "note"):
        table.add_column(column)
    for row in result.operators:
        if not row.applies:
            table.add_row(row.operator, "-", "-", f"not applicable: {row.why_not}")
            continue
        note = "; ".join(row.misjudged[:2])
        table.add_row(
            row.operator,
            f"{row.caught}/{row.mutants}" if row.mutants else "-",
            f"{row.passed}/{row.controls}" if row.controls else "-",
            f"[red]{note}[/]" if note else "",
        )
    console.print(table)
    score = f"{result.score:.0%}" if result.score is not None else "no mutant"
    console.print(
        f"mutation score {score} ({result.caught}/{result.mutants}), "
        f"{result.false_rejections} false rejections"
        + (f"; missed: {', '.join(result.missed)}" if result.missed else "")
        + ("" if inputs is not None else "; no input given: invariants that read it cannot help")
    )
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        write_json_report(report, result.to_dict())
    if result.missed or result.false_rejections:
        raise typer.Exit(code=EXIT_WEAK)
