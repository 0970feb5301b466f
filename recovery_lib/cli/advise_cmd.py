"""``recovery advise <job|pipeline>``: a recovery mode for a job or a pipeline, and why
(advisor/)."""

from __future__ import annotations

import json

import typer

from recovery_lib.cli.output import abort, console


def advise(
    name: str = typer.Argument(
        ...,
        help="A job (module:attr, or q3, prices, ...), a job of the jobs file (its rate and "
        "state measured from its newest run) or a pipeline of dags/pipelines.yaml.",
    ),
    topic: list[str] = typer.Option(
        [], help="Input topic to sample for key skew (repeatable); none: skew not measured."
    ),
    max_outage: float = typer.Option(
        None, help="The longest output gap a failure may cause (s); none: the cheapest mode."
    ),
    dedup_consumers: bool = typer.Option(
        False, help="The readers de-duplicate by id (else: plain consumers, release sink)."
    ),
    rate: float = typer.Option(
        None,
        help="The input rate to plan for (ev/s); default: measured from the job's newest run in "
        "the metrics store.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the advice as JSON."),
) -> None:
    """Recommend a recovery mode (and sink) from what the job declares, the pipeline's stages
    and cycles, the input's key skew and the outage you can accept, with the reasons and the
    numbers our benchmarks measured behind them."""
    from recovery_lib.advisor.facts import measured_job_facts, pipeline_facts, sample_skew
    from recovery_lib.advisor.rules import advise as recommend
    from recovery_lib.kafka.exceptions import KafkaLayerError
    from recovery_lib.pipeline.spec import load_pipelines
    from recovery_lib.settings import get_settings

    notes: list[str] = []
    skew = None
    if topic:
        try:
            skew = sample_skew(topic)
        except KafkaLayerError as exc:
            notes.append(f"key skew not measured: {exc}")
        if skew is None and not notes:
            notes.append(f"key skew not measured: {', '.join(topic)} hold no record")
    kw = {"skew": skew, "plain_consumers": not dedup_consumers, "max_outage_s": max_outage,
          "notes": notes}  # fmt: skip
    settings = get_settings()
    reports = settings.benchmark_reports
    try:
        if name in load_pipelines():
            facts = pipeline_facts(name, **kw)
        else:
            facts = measured_job_facts(name, settings.home / "metrics.duckdb", reports, rate, **kw)
    except ValueError as exc:
        abort(exc)
        return
    advice = recommend(facts, reports)
    if as_json:
        console.print_json(json.dumps({"facts": _facts(facts), "advice": advice.to_dict()}))
        return
    what = f"{facts.kind} {facts.name}"
    console.print(f"[bold]{what}: mode {advice.mode}, sink {advice.sink}[/]")
    for reason in advice.reasons:
        console.print(f"  - {reason}")
    for note in facts.notes:
        console.print(f"  [yellow]note[/]: {note}")
    if advice.evidence:
        console.print(f"  numbers from: {', '.join(advice.evidence)}")


def _facts(facts: object) -> dict[str, object]:
    import dataclasses

    return dataclasses.asdict(facts)  # type: ignore[call-overload]
