"""Cluster mode: a Spark standalone master and worker from the pyspark package, jobs submitted
with spark-submit, executors as separate JVMs that the fault injector kills with SIGKILL.

Also the `recovery verify` command line on the experiments' real output: exit 0 when
consistent, non-zero when the oracle finds damage.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from recovery_lib.experiment.runner import Experiment, ExperimentConfig
from recovery_lib.processes import pid_alive
from recovery_lib.runtime.cluster import (
    ClusterError,
    cluster_state,
    executor_pids,
    start_cluster,
    stop_cluster,
)
from tests.helpers import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.broker, pytest.mark.long]


@pytest.fixture(scope="module")
def cluster(kafka_bootstrap):
    state = start_cluster(memory="4g")
    try:
        yield state
    finally:
        stop_cluster()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recovery_lib.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )


def test_status_reports_the_running_cluster_and_a_second_start_is_refused(cluster):
    status = cli("cluster", "status")
    assert status.returncode == 0, status.stderr
    assert cluster.url in status.stdout
    with pytest.raises(ClusterError, match="already running"):
        start_cluster()


def test_executor_kill_is_recovered_by_spark_without_a_driver_restart(cluster):
    cfg = ExperimentConfig(
        query="q3", fail="executor-kill", cluster=True, rate=1000.0, duration_s=24.0, fail_at_s=12
    )
    report = Experiment(cfg).run()
    killed = report["failures"][0]["pids"]
    assert killed and not any(pid_alive(p) for p in killed)
    assert report["restarts"] == []  # the driver survived; Spark relaunched the executor
    c = report["consistency"]
    assert c["outputs"] > 0 and c["outputs"] == c["reference_outputs"]
    assert c["verdict"] == "consistent", c
    assert c["invariants"] and all(i["checked"] and i["ok"] for i in c["invariants"]), c
    # Every output checked against the value's Spark type the job's writer recorded.
    assert c["output_schema"] == ["name", "city", "state", "id"] and c["malformed"] == 0, c
    assert cluster_state() is not None  # master and worker untouched

    topics = (report["faulty_run_id"], report["reference_run_id"])
    assert all(topics)
    ok = cli(
        "verify",
        f"exp.{report['experiment']}.out.faulty",
        "--reference-topic",
        f"exp.{report['experiment']}.out.reference",
        "--query",
        "q3",
        "--events",
        str(report["events"]),
        "--rate",
        str(cfg.rate),
        "--seed",
        str(cfg.seed),
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert '"output_schema": [' in ok.stdout, ok.stdout  # the recorded schema, found by topic
    assert json.loads(ok.stdout[ok.stdout.index("{") :])["verdict"] == "consistent"


def test_mid_write_kill_on_the_cluster_kills_the_driver_and_spares_the_cluster(cluster):
    cfg = ExperimentConfig(
        query="q1",
        fail="mid-write",
        sink="at-least-once",
        cluster=True,
        rate=400.0,
        duration_s=24.0,
        fail_at_s=12,
    )
    report = Experiment(cfg).run()
    assert report["restarts"] and report["restarts"][0]["cause"].startswith("exit")
    assert report["consistency"]["duplicated"] > 0
    assert cluster_state() is not None  # the executor's kill hook spared master and worker

    bad = cli(
        "verify",
        f"exp.{report['experiment']}.out.faulty",
        "--reference-topic",
        f"exp.{report['experiment']}.out.reference",
        "--query",
        "q1",
        "--no-dedup",
    )
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert '"inconsistent"' in bad.stdout


def test_ordered_input_keeps_a_non_commutative_operator_consistent_on_the_cluster(cluster):
    """Last five auctions per bidder on two one-core executors (remote shuffle fetches arrive
    in random order), a driver kill: with causal mode (lineage order) no output id diverges."""
    common = dict(
        query="lastbids",
        fail="driver-kill",
        cluster=True,
        executor_cores=1,
        rate=600.0,
        duration_s=24.0,
        fail_at_s=12,
    )
    causal_report = Experiment(ExperimentConfig(mode="causal", **common)).run()
    c = causal_report["consistency"]
    assert causal_report["restarts"] and c["outputs"] > 0
    assert c["divergent"] == 0 and c["verdict"] == "consistent", c


def test_stop_ends_master_worker_and_executors(cluster, tmp_path):
    # An application holds an executor while the cluster stops (none runs between tests, and
    # a check over no executors would judge nothing).
    app = textwrap.dedent(f"""
        import time
        from pyspark.sql import SparkSession
        spark = (
            SparkSession.builder.master({cluster.url!r})
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.cores.max", "1")
            .config("spark.executor.memory", "512m")
            .getOrCreate()
        )
        spark.range(10).count()
        time.sleep(600)
    """)
    with open(tmp_path / "app.log", "wb") as log:
        driver = subprocess.Popen(
            [sys.executable, "-c", app],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(lambda: executor_pids(cluster), 180, "the application's executor")
        executors = executor_pids(cluster)
        stop_cluster()
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    assert executors
    assert not any(pid_alive(p) for p in [cluster.master_pid, cluster.worker_pid, *executors])
    assert cluster_state() is None


def test_an_interrupted_start_stops_what_it_started(recovery_home, monkeypatch):
    """A start cut short while the worker registers (SIGTERM raised as an exception by a
    daemon's handler) leaves neither master nor worker running."""
    import recovery_lib.runtime.cluster as cluster_mod

    assert cluster_state() is None, "runs after the module's cluster was stopped"
    launched: list[subprocess.Popen[bytes]] = []
    real_launch, real_wait = cluster_mod._launch, cluster_mod._wait

    def launch(args, log_path):  # noqa: ANN001, ANN202
        launched.append(real_launch(args, log_path))
        return launched[-1]

    def wait(cond, timeout_s, what, proc, log):  # noqa: ANN001, ANN202
        if "worker" in what:
            raise KeyboardInterrupt("terminated while the worker registers")
        real_wait(cond, timeout_s, what, proc, log)

    monkeypatch.setattr(cluster_mod, "_launch", launch)
    monkeypatch.setattr(cluster_mod, "_wait", wait)
    with pytest.raises(KeyboardInterrupt):
        start_cluster(memory="1g")
    assert len(launched) == 2  # the master came up and the worker was started
    assert not any(pid_alive(p.pid) for p in launched)
    assert cluster_state() is None


def test_cec_survives_executor_kills_on_the_cluster(cluster):
    """An executor kill makes Spark re-run read tasks, the windows in the driver stay; a
    mid-write kill loses them, and CEC rebuilds them from the log."""
    cfg = ExperimentConfig(
        query="avgprice",
        mode="cec",
        fail="executor-kill,mid-write",
        repeat=2,
        every_s=15.0,
        fail_at_s=12.0,
        rate=800.0,
        duration_s=40.0,
        cluster=True,
        executor_cores=1,
    )
    report = Experiment(cfg).run()
    c = report["consistency"]
    assert [f["fired"] for f in report["failures"]] == [True, True], report["failures"]
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c
