"""``recovery pipeline``: list, run and inspect pipelines of stages (recovery_lib/pipeline)."""

from __future__ import annotations

import json
import signal
import time

import typer
from rich.table import Table

from recovery_lib.cli.output import abort, console
from recovery_lib.errors import ConfigurationError

pipeline_app = typer.Typer(help="Pipelines of Spark stages and their checkpoint protocols.")


@pipeline_app.command("list")
def list_cmd() -> None:
    """The configured pipelines (dags/pipelines.yaml, RECOVERY_PIPELINES_FILE)."""
    from recovery_lib.pipeline.spec import load_pipelines

    try:
        pipelines = load_pipelines()
    except ValueError as exc:
        abort(exc)
        return
    table = Table("pipeline", "protocol", "stages (input topics -> output topic)")
    for spec in pipelines.values():
        stages = "; ".join(
            f"{s.name}: {','.join(spec.input_topics(s).values())} -> {spec.output_topic(s)}"
            for s in spec.stages
        )
        table.add_row(spec.name, spec.protocol, stages)
    console.print(table)


@pipeline_app.command("run")
def run_cmd(
    name: str = typer.Argument(..., help="A pipeline of the pipelines file."),
    duration_s: float = typer.Option(0.0, help="Stop after this many seconds (0: until Ctrl-C)."),
    input_prefix: str = typer.Option("nexmark", help="Prefix of inputs not named in the file."),
    kill_stage: str | None = typer.Option(None, help="SIGKILL this stage once, at --kill-at-s."),
    kill_at_s: float = typer.Option(20.0, help="Seconds after every stage is ready."),
    placement: str | None = typer.Option(
        None,
        help="process (a Spark application per stage) | shared (every stage a query of one "
        "application; a killed stage is its query failing). Default: the file's, else the "
        "setting pipeline_placement.",
    ),
) -> None:
    """Run a pipeline in the foreground: every stage supervised, recovered by the protocol."""
    from recovery_lib.pipeline.runner import PipelineRun
    from recovery_lib.pipeline.spec import get_pipeline, pipeline_home

    try:
        spec = get_pipeline(name)
        if kill_stage is not None:
            spec.stage(kill_stage)
        if placement is not None:
            if placement not in ("process", "shared"):
                raise ConfigurationError(f"--placement {placement!r}: choose process or shared")
            spec = spec.model_copy(update={"placement": placement})
    except ValueError as exc:
        abort(exc)
        return
    with PipelineRun(spec, pipeline_home(name), input_prefix=input_prefix) as run:
        with console.status(f"starting {len(spec.stages)} stages of {name} ..."):
            run.start()
            run.wait_ready()
        console.print(f"[green]{name} running[/] ({spec.protocol}); Ctrl-C stops it")
        started = time.monotonic()
        killed = False
        try:
            while duration_s <= 0 or time.monotonic() - started < duration_s:
                if kill_stage and not killed and time.monotonic() - started >= kill_at_s:
                    run.supervisors[kill_stage].kill_group(signal.SIGKILL)
                    how = "its query stopped" if run.host is not None else "SIGKILL"
                    console.print(f"killed stage {kill_stage} ({how})")
                    killed = True
                recovery = run.tick()
                if recovery is not None:
                    console.print_json(
                        json.dumps({"failed": recovery.failed, "rewind": recovery.plan.rewind,
                                    "restart": sorted(recovery.plan.restart),
                                    "local": recovery.plan.local})
                    )  # fmt: skip
                time.sleep(0.2)
        except KeyboardInterrupt:
            console.print("stopping ...")


@pipeline_app.command("line")
def line_cmd(
    name: str = typer.Argument(..., help="A pipeline of the pipelines file."),
    failed: list[str] = typer.Option(..., "--failed", help="Stage(s) assumed failed."),
) -> None:
    """The recovery plan the pipeline's protocol would follow if ``--failed`` stages died now
    (from its checkpoints on disk); changes nothing."""
    from recovery_lib.pipeline.runner import PipelineRun
    from recovery_lib.pipeline.spec import get_pipeline, pipeline_home

    try:
        spec = get_pipeline(name)
        for stage in failed:
            spec.stage(stage)
        run = PipelineRun(spec, pipeline_home(name))
        plan = run.protocol.plan(run.view, set(failed))
    except (ValueError, FileNotFoundError) as exc:
        abort(exc)
        return
    console.print_json(
        json.dumps({"rewind": plan.rewind, "restart": sorted(plan.restart), **plan.detail})
    )


@pipeline_app.command("feed-reachability")
def feed_reachability_cmd(
    events: int = typer.Option(100_000, help="Events to write."),
    rate: float = typer.Option(0.0, help="Events per second (0: as fast as possible)."),
    prefix: str = typer.Option("reach", help="Topics <prefix>.links and <prefix>.sources."),
    nodes: int = typer.Option(1_000_000, help="Node ids 0..nodes-1."),
    seed: int = typer.Option(7),
    partitions: int = typer.Option(2),
) -> None:
    """Input of the cyclic reachability query (links and source nodes, 60/15/20/5 % new link /
    new source / delete link / delete source)."""
    from recovery_lib.kafka.admin import TopicAdmin
    from recovery_lib.pipeline.reachability import ReachabilityConfig, produce

    config = ReachabilityConfig(nodes=nodes, seed=seed, topic_prefix=prefix, partitions=partitions)
    admin = TopicAdmin()
    for topic in (config.links_topic, config.sources_topic):
        admin.create(topic, partitions)
    with console.status(f"writing {events:,} events to {prefix}.links / {prefix}.sources ..."):
        written = produce(config, events, rate or None)
    console.print(f"wrote {written:,} events")


@pipeline_app.command("gc")
def gc_cmd(
    name: str = typer.Argument(..., help="A pipeline of the pipelines file."),
    keep_batches: int = typer.Option(10, help="Batches kept below the recovery line."),
    dry_run: bool = typer.Option(False, help="List what would go; change nothing."),
) -> None:
    """Remove checkpoint files and in-flight records no recovery line of the pipeline can need
    (recovery_lib/pipeline/gc.py); reported to the metrics store (gc_runs)."""
    from recovery_lib.pipeline.gc import pipeline_gc, record
    from recovery_lib.pipeline.spec import get_pipeline, pipeline_home

    try:
        report = pipeline_gc(get_pipeline(name), pipeline_home(name), keep_batches, dry_run)
    except (ValueError, OSError) as exc:
        abort(exc)
        return
    record(report, dry_run)
    console.print_json(json.dumps(report, default=str))


@pipeline_app.command("start")
def start_cmd(name: str = typer.Argument(..., help="A pipeline of the pipelines file.")) -> None:
    """Start the pipeline's daemon (detached): it supervises the stages and recovers them."""
    from recovery_lib.pipeline import daemon
    from recovery_lib.runtime.daemon import describe

    try:
        console.print_json(json.dumps(describe(daemon.start(name))))
    except (ValueError, RuntimeError) as exc:
        abort(exc)


@pipeline_app.command("status")
def status_cmd(name: str = typer.Argument(...)) -> None:
    """The daemon's status as JSON; exit 1 when the pipeline failed or its daemon is gone."""
    from recovery_lib.pipeline import daemon
    from recovery_lib.runtime.daemon import describe

    try:
        status = daemon.check(name)
    except (ValueError, RuntimeError) as exc:
        abort(exc)
        return
    console.print_json(json.dumps(describe(status)))
    if status.status == "failed":
        raise typer.Exit(code=1)


@pipeline_app.command("stop")
def stop_cmd(name: str = typer.Argument(...)) -> None:
    """SIGTERM the daemon: every stage stops, then the daemon."""
    from recovery_lib.pipeline import daemon
    from recovery_lib.runtime.daemon import describe

    console.print_json(json.dumps(describe(daemon.stop(name))))
