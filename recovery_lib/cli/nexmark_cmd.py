"""``recovery nexmark generate``: deterministic NexMark events into Kafka (nexmark/)."""

from __future__ import annotations

import typer

from recovery_lib.cli.output import abort, console
from recovery_lib.kafka.exceptions import KafkaLayerError

nexmark_app = typer.Typer(help="The NexMark workload.", no_args_is_help=True)


@nexmark_app.command("generate")
def nexmark_generate(
    events: int = typer.Option(None, help="Number of events (or give --duration with --rate)."),
    duration: float = typer.Option(None, help="Seconds to generate for, at --rate."),
    rate: float = typer.Option(None, help="Events per second; unpaced when omitted."),
    seed: int = typer.Option(42),
    skew: float = typer.Option(0.5, help="Hot-item ratio in [0, 1]: 0 uniform, 0.5 Beam default."),
    prefix: str = typer.Option("nexmark", help="Topics <prefix>.persons/.auctions/.bids"),
    partitions: int = typer.Option(4),
    first_event_id: int = typer.Option(0, help="Continue a stream: the id of the first event."),
) -> None:
    """Write deterministic NexMark events to Kafka (same seed + ids = same bytes)."""
    from pydantic import ValidationError
    from rich.progress import BarColumn, TextColumn, TimeRemainingColumn

    from recovery_lib.nexmark.config import GeneratorConfig
    from recovery_lib.nexmark.producer import ensure_topics, produce_events
    from recovery_lib.runtime.progress import progress_display

    if rate is not None and rate <= 0:
        abort(ValueError(f"--rate must be a positive number of events per second, got {rate}"))
    try:
        config = GeneratorConfig(
            seed=seed,
            hot_ratio=skew,
            topic_prefix=prefix,
            partitions=partitions,
            event_time_rate=rate or 10_000.0,
        )
    except ValidationError as exc:
        abort(ValueError("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())))
        return
    if events is None and (duration is None or rate is None):
        abort(ValueError("give --events N, or --duration S together with --rate R"))
    total = events if events is not None else int(duration * rate)
    try:
        ensure_topics(config)
        with progress_display(
            console,
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,}/{task.total:,}"),
            TimeRemainingColumn(),
        ) as progress:
            task = progress.add_task(f"generating into {prefix}.*", total=total)
            stats = produce_events(
                config,
                count=total,
                rate=rate,
                first_event_id=first_event_id,
                on_progress=lambda n: progress.update(task, completed=n),
            )
    except (KafkaLayerError, ValueError) as exc:
        abort(exc)
        return
    console.print(
        f"{stats.events:,} events ({stats.persons:,} persons, {stats.auctions:,} auctions, "
        f"{stats.bids:,} bids) in {stats.elapsed_s:.1f} s = {stats.events_per_s:,.0f} ev/s"
    )
