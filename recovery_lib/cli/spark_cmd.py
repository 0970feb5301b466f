"""``recovery spark``: this installation's Spark: the driver JVM's class-data archive
(spark/class_archive.py), its Python processes' bytecode (spark/worker_bytecode.py), and a
first micro-batch taken apart (metrics/event_log.py)."""

from __future__ import annotations

import typer

from recovery_lib.cli.output import abort, console

spark_app = typer.Typer(help="This installation's Spark (its driver JVM).", no_args_is_help=True)


@spark_app.command("archive")
def spark_archive(
    force: bool = typer.Option(False, help="Make it again even if it exists."),
) -> None:
    """Make the class-data archive every job's driver JVM starts from (make install runs
    this; ~20 s): each start, so each restart, of a job is seconds shorter."""
    from recovery_lib.settings import get_settings
    from recovery_lib.spark.class_archive import archive_path, create

    path = archive_path()
    if path is None:
        abort("no java found (JAVA_HOME or PATH): install a JDK (17) first")
        return
    if path.exists() and not force:
        console.print(f"class-data archive present: {path}")
        return
    with console.status("archiving the driver JVM's classes (a short Spark run) ..."):
        try:
            path = create()
        except RuntimeError as exc:
            abort(exc)
            return
    size_mb = path.stat().st_size / 1e6
    console.print(f"class-data archive: {path} ({size_mb:.0f} MB)")
    if not get_settings().spark_class_archive:
        console.print("RECOVERY_SPARK_CLASS_ARCHIVE is off: jobs start without it")


@spark_app.command("worker-bytecode")
def spark_worker_bytecode() -> None:
    """Make Spark's Python processes import PySpark from this environment's compiled bytecode,
    not from its zip (make install runs this; spark/worker_bytecode.py): each worker daemon
    and source runner a restart starts is about 0.5 s faster."""
    from recovery_lib.spark.worker_bytecode import ENV, install

    path = install()
    console.print(f"PySpark's zips leave Spark's Python processes' path: {path} ({ENV}=false: off)")


@spark_app.command("first-batch")
def spark_first_batch(
    event_log: str = typer.Argument(
        ..., help="The directory RECOVERY_SPARK_EVENT_LOG_DIR named when the job ran."
    ),
    after_ms: int = typer.Option(
        None, help="Epoch ms (a kill): take the first query started from then on (its restart)."
    ),
    nth: int = typer.Option(0, help="A later batch of that query (1: its second ...)."),
    chart: str = typer.Option(None, help="Also draw the waterfall to this PNG."),
) -> None:
    """Take a query's first micro-batch apart from Spark's event log: the driver's phases, the
    jobs and each task, split at its Python worker's fork, imports and first call. Works for
    any job run with RECOVERY_SPARK_EVENT_LOG_DIR set (a restart's: --after-ms the kill)."""
    from pathlib import Path

    from rich.table import Table

    from recovery_lib.charts import new_figure, save_figure
    from recovery_lib.errors import ConfigurationError
    from recovery_lib.metrics.event_log import draw_waterfall, first_batch

    try:
        batch = first_batch(Path(event_log), after_ms, nth)
    except ConfigurationError as exc:
        abort(exc)
        return
    table = Table(title=f"{batch.app_id}: batch {batch.batch_id}, {batch.input_rows:,} rows")
    table.add_column("phase")
    table.add_column("seconds", justify="right")
    for name, seconds in batch.summary().items():
        table.add_row(name, f"{seconds:.3f}")
    console.print(table)
    if chart:
        rows = len(batch.spans) + len(batch.tasks)
        fig, ax = new_figure(figsize=(13, 3 + 0.28 * rows))
        zero = after_ms if after_ms is not None else batch.app_start_ms
        draw_waterfall(ax, batch.as_dict(), zero, f"{batch.app_id}: first batch")
        save_figure(fig, chart, dpi=90)
        console.print(f"chart: {chart}")
