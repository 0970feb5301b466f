"""``recovery cluster start|stop|status``: a Spark standalone cluster on 127.0.0.1
(runtime/cluster.py)."""

from __future__ import annotations

import typer

from recovery_lib.cli.output import abort, console

cluster_app = typer.Typer(help="A Spark standalone cluster on 127.0.0.1.", no_args_is_help=True)


@cluster_app.command("start")
def cluster_start(cores: int = typer.Option(2), memory: str = typer.Option("6g")) -> None:
    """Start a master and one worker (spark-class from the pyspark package), detached."""
    from recovery_lib.runtime.cluster import ClusterError, start_cluster

    try:
        state = start_cluster(cores=cores, memory=memory)
    except ClusterError as exc:
        abort(exc)
        return
    console.print(
        f"cluster up: {state.url} (master pid {state.master_pid}, worker pid "
        f"{state.worker_pid}); jobs: RECOVERY_SPARK_MASTER={state.url}"
    )


@cluster_app.command("stop")
def cluster_stop() -> None:
    """Stop the executors, the worker and the master by PID."""
    from recovery_lib.runtime.cluster import stop_cluster

    state = stop_cluster()
    console.print(f"stopped cluster {state.url}" if state else "no cluster is running")


@cluster_app.command("status")
def cluster_status() -> None:
    from recovery_lib.runtime.cluster import cluster_state, executor_pids

    state = cluster_state()
    if state is None:
        console.print("no cluster is running")
        raise typer.Exit(code=3)
    console.print(
        f"running: {state.url}, master pid {state.master_pid}, worker pid "
        f"{state.worker_pid}, executors {executor_pids(state)}"
    )
