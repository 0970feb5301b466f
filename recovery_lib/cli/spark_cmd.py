"""``recovery spark archive``: the driver JVM's class-data archive (spark/class_archive.py)."""

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
