"""``recovery``: the root command. Each command group lives in its own module of this package
(``<group>_cmd.py``); this one registers them and handles SIGTERM. Entry point of the
``recovery`` script (pyproject.toml)."""

from __future__ import annotations

import signal
import sys

import typer

from recovery_lib.cli.advise_cmd import advise
from recovery_lib.cli.bench_cmd import bench_app
from recovery_lib.cli.broker_cmd import broker_app
from recovery_lib.cli.checkpoint_cmd import checkpoint_app
from recovery_lib.cli.cluster_cmd import cluster_app
from recovery_lib.cli.contract_cmd import contract_app
from recovery_lib.cli.demo_cmd import demo
from recovery_lib.cli.experiment_cmd import experiment_app
from recovery_lib.cli.gc_cmd import gc
from recovery_lib.cli.job_cmd import job_app
from recovery_lib.cli.nexmark_cmd import nexmark_app
from recovery_lib.cli.ops_cmd import ops_app
from recovery_lib.cli.output import console
from recovery_lib.cli.pipeline_cmd import pipeline_app
from recovery_lib.cli.reproduce_cmd import reproduce
from recovery_lib.cli.soak_cmd import soak
from recovery_lib.cli.spark_cmd import spark_app
from recovery_lib.cli.standby_cmd import standby_app
from recovery_lib.cli.topics_cmd import topics_app
from recovery_lib.cli.verify_cmd import expectations_cmd, verify
from recovery_lib.errors import ConfigurationError, RecoveryError
from recovery_lib.kafka.exceptions import KafkaLayerError

app = typer.Typer(help="Consistent, fast recovery for Spark streaming jobs.", no_args_is_help=True)

# Commands first, then groups: the order of `recovery --help`.
app.command("demo")(demo)
app.command("verify")(verify)
app.command("gc")(gc)
app.command("expectations")(expectations_cmd)
app.command("reproduce")(reproduce)
app.command("advise")(advise)
app.command("soak")(soak)
app.add_typer(broker_app, name="broker")
app.add_typer(topics_app, name="topics")
app.add_typer(bench_app, name="bench")
app.add_typer(nexmark_app, name="nexmark")
app.add_typer(cluster_app, name="cluster")
app.add_typer(experiment_app, name="experiment")
app.add_typer(job_app, name="job")
app.add_typer(standby_app, name="standby")
app.add_typer(checkpoint_app, name="checkpoint")
app.add_typer(ops_app, name="ops")
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(contract_app, name="contract")
app.add_typer(spark_app, name="spark")


@app.callback()
def _main() -> None:
    """Consistent, fast recovery for Spark streaming jobs."""
    # Airflow and process managers stop a command with SIGTERM: unwind like Ctrl-C, so every
    # `finally` runs and the jobs, clusters and brokers a command started are stopped.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    from recovery_lib.runtime.logs import configure_logging

    configure_logging()


# Exit codes of the errors the library raises for what a user can fix (errors.py): one line
# says what to do, no traceback.
EXIT_CONFIGURATION = 78  # sysexits EX_CONFIG: settings, a launch or options that cannot work
EXIT_UNAVAILABLE = 69  # sysexits EX_UNAVAILABLE: no broker, or one that refuses us


def exit_code(exc: RecoveryError) -> int:
    if isinstance(exc, ConfigurationError):
        return EXIT_CONFIGURATION
    if isinstance(exc, KafkaLayerError):
        return EXIT_UNAVAILABLE
    return 1


def run() -> None:
    """The ``recovery`` script: the commands, with every ``RecoveryError`` a command did not
    handle itself turned into one line and its exit code."""
    try:
        app()
    except RecoveryError as exc:
        console.print(f"[red]error:[/] {exc}", highlight=False)
        sys.exit(exit_code(exc))


if __name__ == "__main__":
    run()
