"""``recovery verify`` (the oracle on a run's sink topic) and ``recovery expectations`` (the
metrics tables' Great Expectations suites): verify/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from recovery_lib.cli.output import EXIT_INCONCLUSIVE, abort, console
from recovery_lib.errors import ConfigurationError
from recovery_lib.kafka.exceptions import KafkaLayerError

if TYPE_CHECKING:
    from recovery_lib.verify.contract import TimeSpan
    from recovery_lib.verify.inputs import InputView


# How the judged run was read and what its input was: shared with `recovery contract check`.
DEDUP_OPTION = typer.Option(True, help="Consumers read through the dedup reader.")
INPUT_OPTION = typer.Option(
    None,
    "--input",
    help="input=topic: the run's input, for the contract's invariants that read it (repeat).",
)
EVENTS_OPTION = typer.Option(
    None, help="Events generated: also check the query's reference results (DuckDB)."
)
SEED_OPTION = typer.Option(42, help="Generator seed of the input (with --events).")
RATE_OPTION = typer.Option(10_000.0, help="Generator event-time rate (with --events).")
SKEW_OPTION = typer.Option(0.5, help="Generator hot ratio (with --events).")
SCHEMA_OPTION = typer.Option(
    None,
    help="The output schema (StructType JSON) every output must fit; default: the one the "
    "run's writer recorded for the topic, or the one the job declares.",
)
CLOCK_OPTION = typer.Option(
    None,
    help="FIRST_MS,LAST_MS: the run's wall-clock span, where its processing-time windows can "
    "lie (default: up to now).",
)


def verify(
    topic: str = typer.Argument(..., help="The run's sink topic."),
    reference_topic: str = typer.Option(None, help="The failure-free reference run's sink topic."),
    query: str = typer.Option(
        "q3",
        "--job",
        "--query",
        help="The job (module:attr or a name of jobs/) whose contract judges.",
    ),
    dedup: bool = DEDUP_OPTION,
    input_topic: list[str] = INPUT_OPTION,
    events: int = EVENTS_OPTION,
    seed: int = SEED_OPTION,
    rate: float = RATE_OPTION,
    skew: float = SKEW_OPTION,
    metrics: str = typer.Option(None, help="Metrics store to write the report to."),
    expectations: bool = typer.Option(
        False, help="Also run the query's Great Expectations suite on the output."
    ),
    schema: str = SCHEMA_OPTION,
    clock: str = CLOCK_OPTION,
    reference_clock: str = typer.Option(
        None, help="FIRST_MS,LAST_MS: the reference run's wall-clock span (as --clock)."
    ),
) -> None:
    """The oracle: lost, extra, duplicated, divergent and malformed outputs (outputs that do not
    fit the output schema, or whose window no run opened) and the guarantee class; exits 1
    when inconsistent (or when --expectations finds a failed expectation), 4 when
    inconclusive."""
    from recovery_lib.io.sinks.dedup_reader import read_topic
    from recovery_lib.job.spec import resolve_job
    from recovery_lib.settings import get_settings
    from recovery_lib.verify.oracle import judge_topics
    from recovery_lib.verify.schema import load_schema, recorded_schema

    if reference_topic is None and events is None and not input_topic:
        abort(ValueError("give --reference-topic, --events or --input: nothing to compare against"))
        return
    try:
        spec = resolve_job(query)
        inputs = input_view(input_topic, events, seed, rate, skew)
        given = load_schema(schema) if schema else None
        contract = spec.contract.with_schema(
            given or recorded_schema(get_settings().home, topic, reference_topic)
        )
        # Both topics stream through the columnar engine: no object per output.
        report = judge_topics(
            spec.name,
            contract,
            topic,
            reference_topic,
            dedup,
            inputs,
            clock=time_span(clock, "--clock"),
            reference_clock=time_span(reference_clock, "--reference-clock"),
        )
    except (KafkaLayerError, ValueError) as exc:
        abort(exc)
        return
    report = report.to_dict()
    gx_result = None
    if expectations:
        from recovery_lib.verify.expectations import validate_output

        gx_result = validate_output(
            spec.name, list(read_topic(topic)), dedup, topic, lineage_ids=not spec.own_sink
        )
        report["expectations"] = gx_result.to_dict()
    if metrics:
        from recovery_lib.metrics.store import MetricsStore
        from recovery_lib.verify.expectations import record

        store = MetricsStore(metrics)
        store.add_consistency(f"verify:{topic}", reference_topic, report)
        if gx_result is not None:
            record(store, f"verify:{topic}", gx_result)
        store.close()
    console.print_json(json.dumps(report, default=str))
    if report["verdict"] == "inconclusive":
        raise typer.Exit(code=EXIT_INCONCLUSIVE)
    if report["verdict"] != "consistent" or (gx_result is not None and not gx_result.success):
        raise typer.Exit(code=1)


def time_span(text: str | None, option: str) -> TimeSpan | None:
    """``FIRST_MS,LAST_MS`` as a span (None: not given). Raises ValueError naming the option."""
    from recovery_lib.verify.contract import TimeSpan

    if not text:
        return None
    try:
        first, last = (int(part) for part in text.split(","))
    except ValueError:
        raise ConfigurationError(
            f"{option} {text!r}: give FIRST_MS,LAST_MS (wall-clock milliseconds)"
        ) from None
    if last < first:
        raise ConfigurationError(
            f"{option} {text!r}: the span ends before it starts; give FIRST_MS <= LAST_MS"
        )
    return TimeSpan(first, last)


def input_view(
    input_topic: list[str] | None, events: int | None, seed: int, rate: float, skew: float
) -> InputView | None:
    """The judged run's input from the command line (None: not given). Raises ValueError."""
    from recovery_lib.nexmark.config import GeneratorConfig
    from recovery_lib.runtime.launch import parse_pairs
    from recovery_lib.verify.inputs import InputView

    topics = parse_pairs(input_topic or [], "--input", require_value=True)
    if not events and not topics:
        return None
    generator = GeneratorConfig(seed=seed, event_time_rate=rate, hot_ratio=skew)
    return InputView(topics, generator=generator if events else None, events=events)


def expectations_cmd(
    metrics: str = typer.Option(None, help="Metrics store (default: the project's)."),
) -> None:
    """Run the metrics-table Great Expectations suites; exit 1 on a failed expectation."""
    from recovery_lib.metrics.store import MetricsStore
    from recovery_lib.settings import get_settings
    from recovery_lib.verify.expectations import record, validate_metrics

    path = Path(metrics) if metrics else get_settings().home / "metrics.duckdb"
    if not path.exists():
        abort(ValueError(f"no metrics store at {path}"))
        return
    results = validate_metrics(path)
    with MetricsStore(path) as store:
        for result in results:
            record(store, None, result)
    console.print_json(json.dumps([r.to_dict() for r in results], default=str))
    if any(not r.success for r in results):
        raise typer.Exit(code=1)
