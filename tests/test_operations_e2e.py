"""The operations layer end to end: the job daemon supervising a real NexMark job, checkpoint GC
followed by a kill and a recovery judged by the oracle, the DAGs under ``dag.test()`` (GC, the
consistency report with its SparkSubmitOperator reference run), the deferrable watch trigger,
and real Airflow components running a DAG triggered over the REST API."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from recovery_lib.metrics.store import read_frame
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.producer import ensure_topics, produce_events
from tests.airflow_helpers import PASSWORD, REPO, airflow, airflow_env, dag_test
from tests.helpers import wait_for

EVENTS = 40_000


def write_jobs(path: Path, prefix: str, name: str = "q3_ops", standby: bool = False) -> Path:
    path.write_text(
        f"""
jobs:
  - name: {name}
    job: q3
    input_prefix: {prefix}
    placement: local
    mode: {"standby" if standby else "native"}
    sink_mode: dedup
    heartbeat_timeout_s: 10
    max_restarts: 3
    keep_batches: 2
    extra_args: ["--max-records", "200"]
"""
    )
    return path


def consumed_all(job, gen: GeneratorConfig) -> bool:
    """Q3 reads persons (1 in 50 events) and auctions (3 in 50): all of them committed."""
    from recovery_lib.runtime.checkpoint import committed_offsets

    done = committed_offsets(job.checkpoint)
    topics = [gen.persons_topic, gen.auctions_topic]
    return all(
        sum(done.get(t, {}).values()) >= expected
        for t, expected in zip(topics, (EVENTS // 50, EVENTS * 3 // 50), strict=True)
    )


@pytest.fixture()
def jobs_env(tmp_path, settings_env, recovery_home):
    """A jobs file for this test, visible to this process and its children."""
    jobs = tmp_path / "jobs.yaml"
    settings_env(RECOVERY_JOBS_FILE=jobs)
    return jobs


def judge_q3(raw, gen):  # noqa: ANN001, ANN201 - the oracle's report
    """Q3's contract on the job's output against DuckDB's reference results (no reference run)."""
    from jobs.nexmark.q3 import JOB
    from recovery_lib.verify.inputs import InputView
    from recovery_lib.verify.oracle import judge

    return judge(JOB.name, JOB.contract, raw, None, True, InputView({}, gen, EVENTS))


def test_jobs_file_errors_say_what_to_fix(tmp_path):
    from recovery_lib.ops.config import load_jobs

    bad = tmp_path / "jobs.yaml"
    bad.write_text("jobs:\n  - name: a\n    job: q99\n")
    with pytest.raises(ValueError, match="q99"):
        load_jobs(bad)
    bad.write_text("jobs:\n  - {name: a, job: q1}\n  - {name: a, job: q3}\n")
    with pytest.raises(ValueError, match="duplicate job names"):
        load_jobs(bad)
    with pytest.raises(ValueError, match="does not exist"):
        load_jobs(tmp_path / "nope.yaml")
    bad.write_text("jobs:\n  - {name: a, job: prices, sink_mode: release}\n")
    with pytest.raises(ValueError, match="set mode: causal"):
        load_jobs(bad)
    bad.write_text("jobs:\n  - {name: a, job: prices, sink_mode: release, mode: causal}\n")
    assert load_jobs(bad)["a"].sink_mode == "release"
    repo_jobs = load_jobs(Path(__file__).resolve().parents[1] / "dags" / "streaming_jobs.yaml")
    assert repo_jobs and all(j.job_ref.startswith("jobs.") for j in repo_jobs.values())


def test_every_dag_imports_cleanly(tmp_path, recovery_home):
    jobs = write_jobs(tmp_path / "jobs.yaml", "nx")
    with jobs.open("a") as more:  # a replicated job: its DAG checks the replicas' health too
        more.write("  - {name: q3_kazoo, job: q3, mode: kazoo, sink_mode: release}\n")
    env = airflow_env(tmp_path, recovery_home, jobs)
    result = dag_test(env, "--import-errors")
    assert result["errors"] == {}, result["errors"]
    assert {
        "checkpoint_gc",
        "consistency_report",
        "recovery_experiment",
        "reproduce",
        "state_shipping",
        "stream_q3_ops",
        "stream_q3_kazoo",
        "chaos",
    } <= set(result["dags"])
    assert result["tasks"]["chaos"] == ["inject"]
    assert result["tasks"]["stream_q3_kazoo"] == ["ensure_running", "replica_health", "watch"]
    assert "replica_health" not in result["tasks"]["stream_q3_ops"]
    assert result["tasks"]["reproduce"] == ["reproduce"]
    # The consistency report judges every stage of every pipeline too (dags/pipelines.yaml).
    consistency = set(result["tasks"]["consistency_report"])
    for group in ("q3_ops", "pipeline_q1p_route", "pipeline_q1p_convert", "pipeline_reach_join"):
        assert {f"{group}.snapshot", f"{group}.reference_run", f"{group}.compare"} <= consistency


def test_the_watch_trigger_reports_health_then_failure(tmp_path, monkeypatch, jobs_env):
    """The deferrable watch's trigger, run as the triggerer runs it (asyncio)."""
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    from recovery_lib.ops import daemon
    from recovery_lib.ops.airflow_tasks import JobHealthTrigger
    from recovery_lib.ops.config import get_job

    write_jobs(jobs_env, "nx", "watched")
    job = get_job("watched")
    job.workdir.mkdir(parents=True, exist_ok=True)
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        status = daemon.DaemonStatus("watched", "running", stand_in.pid, 0)
        daemon._write_status(job, status, None)

        async def first_event(trigger: JobHealthTrigger) -> dict:
            async for event in trigger.run():
                return event.payload
            raise AssertionError("no event")

        ok = asyncio.run(first_event(JobHealthTrigger("watched", watch_s=1.0, poll_s=0.2)))
        assert ok["ok"] is True and ok["status"] == "running"
        stand_in.kill()  # the daemon dies without a last word
        stand_in.wait()
        failed = asyncio.run(first_event(JobHealthTrigger("watched", watch_s=60, poll_s=0.2)))
        assert failed["ok"] is False and "gone" in failed["message"]
        classpath, kwargs = JobHealthTrigger("watched", 5).serialize()
        assert classpath.endswith("JobHealthTrigger") and kwargs["watch_s"] == 5
    finally:
        stand_in.kill()


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.parametrize(
    "mode",
    [
        "standby",  # the default tier's standby takeover with a real kill
        pytest.param("native", marks=pytest.mark.long),  # a restart: every experiment has one
    ],
)
def test_daemon_gc_kill_recover_and_the_consistency_dag(
    tmp_path, kafka_bootstrap, admin, recovery_home, jobs_env, settings_env, mode
):
    """GC (with a standby: never past the copy shipped to it), then SIGKILL the job's driver:
    the daemon restarts it, or its standby takes over; the oracle says consistent. Then the
    consistency DAG (snapshot of the live checkpoint -> SparkSubmitOperator reference run ->
    oracle + GX) agrees. (No pipelines here: the long tier runs the DAG on pipeline stages.)"""
    no_pipelines = tmp_path / "pipelines.yaml"
    no_pipelines.write_text("pipelines: []\n")
    settings_env(RECOVERY_PIPELINES_FILE=no_pipelines)
    from recovery_lib.ops import daemon
    from recovery_lib.ops.config import get_job
    from recovery_lib.ops.gc import gc_job
    from recovery_lib.runtime.checkpoint import batch_ids, last_committed
    from recovery_lib.runtime.checkpoint_gc import shipped_batch

    standby = mode == "standby"
    gen = GeneratorConfig(topic_prefix=f"ops{int(time.time())}", partitions=2)
    ensure_topics(gen, admin)
    produce_events(gen, count=EVENTS)
    write_jobs(jobs_env, gen.topic_prefix, standby=standby)
    job = get_job("q3_ops")
    try:
        daemon.start("q3_ops")
        wait_for(
            lambda: (
                (last_committed(job.checkpoint) or 0) >= 6
                and (not standby or (shipped_batch(job.standby_dir) or 0) >= 4)
            ),
            300,
            "6 committed batches (with a standby: 4 of them shipped)",
        )
        old_primary = job.checkpoint.resolve()
        result = gc_job("q3_ops", keep_batches=2)
        assert result["files_removed"] > 0 and result["bytes_freed"] > 0, result
        assert min(batch_ids(job.checkpoint / "commits")) >= result["plan"]["oldest_kept_batch"]
        gc_rows = read_frame(recovery_home / "metrics.duckdb", "SELECT * FROM gc_runs")
        assert "q3_ops" in gc_rows["job"].tolist()

        before = daemon.check("q3_ops")
        assert before.metrics_port, before  # the daemon's /metrics, named by its status
        scraped = restarts_scraped(before.metrics_port, mode)
        assert scraped == 0.0, scraped
        os.killpg(before.job_pid, signal.SIGKILL)  # the driver dies after the GC
        if standby:
            wait_for_takeover(job, old_primary)
        else:
            wait_for(
                lambda: (s := daemon.check("q3_ops")).restarts >= 1 and s.status == "running",
                240,
                "the daemon to restart the job",
            )
        # What Prometheus sees: the recovery counted, GC's bytes, the job up again.
        wait_for(
            lambda: restarts_scraped(before.metrics_port, mode) >= 1, 30, "the recovery scraped"
        )
        up = f'recovery_job_up{{job="q3_ops",mode="{mode}"}} 1.0'
        wait_for(lambda: up in scrape(before.metrics_port), 30, "the job up again, scraped")
        text = scrape(before.metrics_port)
        assert re.search(r"recovery_checkpoint_gc_freed_bytes_total\{[^}]*\} [1-9]", text), text
        if standby:
            assert re.search(r"recovery_takeovers_total\{[^}]*\} [1-9]", text), text
        # The failure's effect on the output, from the daemon's own follower of the topic: the
        # silence after the kill (at least the restart's time), and the input's age.
        wait_for(lambda: output_gap_scraped(before.metrics_port) > 0, 30, "the output gap")
        text = scrape(before.metrics_port)
        assert re.search(r"recovery_input_lag_seconds\{[^}]*\} [0-9]", text), text

        wait_for(lambda: consumed_all(job, gen), 300, "the new primary to consume all input")
        time.sleep(3)
        from recovery_lib.io.sinks.dedup_reader import read_topic

        report = judge_q3(list(read_topic(job.out_topic)), gen)
        assert report.verdict == "consistent", report.to_dict()
        assert all(r.checked and r.ok for r in report.invariants), report.to_dict()

        env = airflow_env(tmp_path, recovery_home, jobs_env)
        env["KAFKA_BOOTSTRAP"] = kafka_bootstrap
        airflow(env, "db", "migrate")
        run = dag_test(env, "consistency_report")
        tasks = run["tasks"]
        assert tasks["q3_ops.reference_run"] == "success", run["log"][-5000:]
        assert tasks["q3_ops.compare"] == "success", run["log"][-5000:]
        reports = read_frame(
            recovery_home / "metrics.duckdb",
            "SELECT verdict FROM consistency_reports WHERE run_id = ?",
            [f"job:{job.out_topic}"],
        )
        assert reports["verdict"].tolist() == ["consistent"]
    finally:
        final = daemon.stop("q3_ops")
    assert final is not None and final.status == "stopped"
    assert not daemon.pid_alive(final.supervisor_pid) and not daemon.pid_alive(final.job_pid)


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.long  # the default tier has a takeover: test_daemon_gc_kill_recover...[standby]
def test_daemon_with_a_standby_ships_state_and_takes_over(
    tmp_path, kafka_bootstrap, admin, recovery_home, jobs_env
):
    """A job with `standby: true`: the state_shipping DAG ships and records the lag; the
    primary is killed; the standby takes over; GC and the oracle follow the new primary."""
    from recovery_lib.io.sinks.dedup_reader import read_topic
    from recovery_lib.ops import daemon
    from recovery_lib.ops.config import get_job
    from recovery_lib.runtime.checkpoint import last_committed

    gen = GeneratorConfig(topic_prefix=f"sb{int(time.time())}", partitions=2)
    ensure_topics(gen, admin)
    produce_events(gen, count=EVENTS)
    write_jobs(jobs_env, gen.topic_prefix, "q3_standby", standby=True)
    job = get_job("q3_standby")
    try:
        daemon.start("q3_standby")
        wait_for(
            lambda: (
                (job.standby_dir / "shipped.json").exists()
                and (last_committed(job.checkpoint) or 0) >= 4
            ),
            300,
            "4 committed batches and a shipped copy",
        )
        env = airflow_env(tmp_path, recovery_home, jobs_env)
        env["KAFKA_BOOTSTRAP"] = kafka_bootstrap
        airflow(env, "db", "migrate")
        run = dag_test(env, "state_shipping")
        assert run["tasks"]["ship[0]"] == "success", run["log"][-5000:]
        shipped = read_frame(recovery_home / "metrics.duckdb", "SELECT * FROM standby_shipments")
        assert "q3_standby" in shipped["job"].tolist()
        assert shipped["lag_batches"].notna().all()
        old_primary = job.checkpoint.resolve()
        os.killpg(daemon.check("q3_standby").job_pid, signal.SIGKILL)
        wait_for_takeover(job, old_primary)

        wait_for(lambda: consumed_all(job, gen), 300, "the new primary to consume all input")
        time.sleep(3)
        report = judge_q3(list(read_topic(job.out_topic)), gen)
        assert report.verdict == "consistent", report.to_dict()
        lag = read_frame(
            recovery_home / "metrics.duckdb",
            "SELECT standby_lag_batches FROM job_status WHERE job = 'q3_standby'",
        )
        assert lag["standby_lag_batches"].notna().any()  # the daemon reported the lag
    finally:
        final = daemon.stop("q3_standby")
    assert final is not None and final.status == "stopped"
    assert not daemon.pid_alive(final.supervisor_pid) and not daemon.pid_alive(final.job_pid)
    nodes = sorted((job.workdir / "supervisor").glob("node-*/heartbeat.json"))
    assert len(nodes) >= 2
    for beat in nodes:  # every node the pair started is gone
        assert not daemon.pid_alive(json.loads(beat.read_text())["pid"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.long  # the default tier triggers a DAG over REST in tests/test_ops_stack.py
def test_real_airflow_runs_a_dag_triggered_over_the_rest_api(tmp_path, recovery_home):
    """api-server, scheduler, dag-processor and triggerer on 127.0.0.1 (SQLite, parallelism 4);
    trigger checkpoint_gc (dry run) with a token; wait for success; stop everything by PID."""
    import httpx

    jobs = write_jobs(tmp_path / "jobs.yaml", "nx", "gc_only")
    env = airflow_env(tmp_path, recovery_home, jobs)
    port = _free_port()
    env["AIRFLOW__API__PORT"] = str(port)
    env["AIRFLOW__API__BASE_URL"] = f"http://127.0.0.1:{port}"
    env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"http://127.0.0.1:{port}/execution/"
    airflow(env, "db", "migrate")
    procs: list[subprocess.Popen] = []
    logs = tmp_path / "logs"
    logs.mkdir()
    try:
        for component in ("api-server", "scheduler", "dag-processor", "triggerer"):
            args = [sys.executable, "-m", "airflow", component]
            if component == "api-server":
                args += ["--host", "127.0.0.1", "--port", str(port)]
            procs.append(
                subprocess.Popen(
                    args,
                    env=env,
                    stdout=open(logs / f"{component}.log", "wb"),  # noqa: SIM115
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                return httpx.get(f"{base}/api/v2/monitor/health", timeout=3).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(healthy, 180, "the api-server")
        password = PASSWORD
        generated = Path(env["AIRFLOW_HOME"]) / "simple_auth_manager_passwords.json.generated"
        if not (Path(env["AIRFLOW_HOME"]) / "passwords.json").exists() and generated.exists():
            password = json.loads(generated.read_text())["admin"]
        r = httpx.post(
            f"{base}/auth/token", json={"username": "admin", "password": password}, timeout=10
        )
        assert r.status_code in (200, 201), r.text
        token = r.json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}

        def parsed() -> bool:
            r = httpx.get(f"{base}/api/v2/dags/checkpoint_gc", headers=headers, timeout=10)
            return r.status_code == 200

        wait_for(parsed, 180, "the dag-processor to parse checkpoint_gc")
        r = httpx.patch(
            f"{base}/api/v2/dags/checkpoint_gc", headers=headers, json={"is_paused": False}
        )
        assert r.status_code == 200, r.text
        r = httpx.post(
            f"{base}/api/v2/dags/checkpoint_gc/dagRuns",
            headers=headers,
            json={"logical_date": None, "conf": {"dry_run": True}},
        )
        assert r.status_code in (200, 201), r.text
        run_id = r.json()["dag_run_id"]
        state = {"value": None}

        def finished() -> bool:
            run = httpx.get(
                f"{base}/api/v2/dags/checkpoint_gc/dagRuns/{run_id}", headers=headers, timeout=10
            ).json()
            state["value"] = run["state"]
            return run["state"] in ("success", "failed")

        wait_for(finished, 300, "the triggered DAG run")
        assert state["value"] == "success", [
            (p.name, p.read_text()[-3000:]) for p in logs.iterdir()
        ]
        rows = read_frame(recovery_home / "metrics.duckdb", "SELECT * FROM gc_runs")
        assert ("gc_only", True) in set(zip(rows["job"], rows["dry_run"], strict=True))
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    assert all(p.poll() is not None for p in procs)


def test_the_reproduce_dag_writes_a_papers_report_from_the_benchmark_reports(
    tmp_path, recovery_home
):
    env = airflow_env(tmp_path, recovery_home, write_jobs(tmp_path / "jobs.yaml", "nx"))
    env["RECOVERY_BENCHMARK_REPORTS"] = str(REPO / "docs" / "benchmarks")
    airflow(env, "db", "migrate")
    result = dag_test(env, "reproduce", {"paper": "cec"})
    assert result["state"] == "success", result["log"]
    report = recovery_home / "reports" / "reproduction" / "cec.md"
    assert report.exists(), result["log"]
    assert "the paper's numbers beside ours" in report.read_text()


# One job per mode the jobs file offers beyond native q3 (the default tier's DAG test above),
# causal (tests/test_causal_e2e.py) and standby (above): the consistency DAG judges each.
EVERY_MODE_JOBS = """
jobs:
  - {{name: q1_release, job: q1, input_prefix: {prefix}, sink_mode: release}}
  - {{name: q1_two_phase, job: q1, input_prefix: {prefix}, sink_mode: two_phase}}
  - {{name: avgprice_cec, job: avgprice, input_prefix: {prefix}, mode: cec}}
  - {{name: q3_liverobin, job: q3, input_prefix: {prefix}, mode: liverobin,
      heartbeat_period_s: 4, sink_mode: release}}
"""


# A two-stage pipeline under UNC: the consistency DAG judges each stage against its input.
EVERY_MODE_PIPELINE = """
pipelines:
  - name: q1_unc
    protocol: unc
    stages:
      - {{name: route, job: "jobs.pipelines.nexmark:ROUTE_BIDS_BY_AUCTION",
          inputs: {{bids: {prefix}.bids}}, trigger_interval: 1 second}}
      - {{name: convert, job: q1, inputs: {{bids: "stage:route"}},
          trigger_interval: 1 second}}
"""


def _gate_caught_up(out_topic: str) -> bool:
    """A replica set's gate forwarded the newest output id its replicas wrote, in every
    partition (it forwards each partition's ids in order, some time after the replicas wrote
    them: a committed checkpoint does not say the output is there yet)."""
    from recovery_lib.ha.replication.gate import id_key, raw_topic
    from recovery_lib.io.sinks.dedup_reader import read_topic

    def newest(topic: str) -> dict[int, tuple[int, int, int]]:
        found: dict[int, tuple[int, int, int]] = {}
        for record in read_topic(topic):
            key = id_key(record.id.encode()) if record.id else None
            if key is not None:
                found[record.partition] = max(found.get(record.partition, key), key)
        return found

    return newest(raw_topic(out_topic)) == newest(out_topic)


def _run_until_consumed(  # noqa: ANN201
    name: str,
    start,  # noqa: ANN001
    stop,  # noqa: ANN001
    checkpoints,  # noqa: ANN001
    outputs: list[str],
    gated: bool = False,
):
    """Start a daemon, wait until each checkpoint committed its input topics' current ends
    (as they were before the start) and its outputs are all out, stop it; its final
    status."""
    from recovery_lib.kafka.clients import client_config
    from recovery_lib.protocols.hooks import topic_ends
    from recovery_lib.runtime.checkpoint import committed_offsets

    try:
        start(name)
        for checkpoint, topics in checkpoints():
            ends = {t: sum(topic_ends(client_config(), t).values()) for t in topics}

            def consumed(checkpoint=checkpoint, ends=ends) -> bool:
                done = committed_offsets(checkpoint)
                return all(sum(done.get(t, {}).values()) >= n for t, n in ends.items())

            wait_for(consumed, 300, f"{name} to consume {sorted(ends)}")
        if gated:  # the gate forwards what the replicas released: wait until it has
            for topic in outputs:
                wait_for(lambda t=topic: _gate_caught_up(t), 120, f"{name}'s gate to forward")
        # The last batch's outputs released / committed: the output ends stay put for 3 s
        # (polled; a fixed sleep was too short when the machine was busy).
        last: dict = {}

        def settled() -> bool:
            now = {t: sum(topic_ends(client_config(), t).values()) for t in outputs}
            if now != last.get("ends"):
                last.update(ends=now, since=time.monotonic())
            return time.monotonic() - last["since"] >= 3

        wait_for(settled, 120, f"{name}'s outputs {outputs} to settle", interval_s=0.5)
    finally:
        final = stop(name)
    assert final is not None and final.status == "stopped", final
    return final


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.long
@pytest.mark.timeout(1800)  # four jobs and a pipeline, one at a time, then the DAG
def test_the_consistency_dag_judges_a_job_of_every_mode(
    tmp_path, kafka_bootstrap, admin, recovery_home, jobs_env, settings_env
):
    """Release and two-phase sinks, a CEC aggregate, a LiveRobin pair and a UNC pipeline,
    each run by its daemon over the same input until it consumed it, then stopped; the
    consistency DAG's reference runs and oracle find each one (each stage) consistent, reading
    each output as its consumers do (the release and two-phase topics through their gates,
    the replicas' through theirs)."""
    from recovery_lib.ops import daemon
    from recovery_lib.ops.config import get_job, load_jobs
    from recovery_lib.pipeline import daemon as pipeline_daemon
    from recovery_lib.pipeline.runner import stage_checkpoint
    from recovery_lib.pipeline.spec import get_pipeline, pipeline_home

    gen = GeneratorConfig(topic_prefix=f"every{int(time.time())}", partitions=2)
    ensure_topics(gen, admin)
    produce_events(gen, count=20_000)
    jobs_env.write_text(EVERY_MODE_JOBS.format(prefix=gen.topic_prefix))
    pipelines = tmp_path / "pipelines.yaml"
    pipelines.write_text(EVERY_MODE_PIPELINE.format(prefix=gen.topic_prefix))
    settings_env(RECOVERY_PIPELINES_FILE=pipelines)
    names = list(load_jobs())
    for name in names:  # one at a time: 2 cores
        job = get_job(name)
        topics = [getattr(gen, f"{i}_topic") for i in job.spec.inputs]
        final = _run_until_consumed(
            name,
            daemon.start,
            daemon.stop,
            lambda j=job, t=topics: [(j.checkpoint, t)],
            [job.out_topic],
            gated=job.recovery_mode.replicated,
        )
        assert not daemon.pid_alive(final.job_pid)
    spec = get_pipeline("q1_unc")

    def stages():  # noqa: ANN202 - route first: convert's input ends once route is done
        for stage in spec.stages:
            yield (
                stage_checkpoint(pipeline_home("q1_unc"), stage),
                list(spec.input_topics(stage).values()),
            )

    _run_until_consumed(
        "q1_unc",
        pipeline_daemon.start,
        pipeline_daemon.stop,
        stages,
        [spec.output_topic(s) for s in spec.stages],
    )

    env = airflow_env(tmp_path, recovery_home, jobs_env)
    env["KAFKA_BOOTSTRAP"] = kafka_bootstrap
    airflow(env, "db", "migrate")
    run = dag_test(env, "consistency_report")
    groups = [*names, *(f"pipeline_q1_unc_{s.name}" for s in spec.stages)]
    for group in groups:
        assert run["tasks"][f"{group}.reference_run"] == "success", run["log"][-5000:]
        assert run["tasks"][f"{group}.compare"] == "success", run["log"][-5000:]
    reports = read_frame(
        recovery_home / "metrics.duckdb",
        "SELECT run_id, verdict, outputs FROM consistency_reports",
    )
    judged = {r.run_id: (r.verdict, r.outputs) for r in reports.itertuples()}
    topics = [get_job(n).out_topic for n in names] + [spec.output_topic(s) for s in spec.stages]
    for topic in topics:
        verdict, outputs = judged[f"job:{topic}"]
        assert verdict == "consistent" and outputs > 0, (topic, verdict, outputs)


def wait_for_takeover(job, old_primary: Path) -> None:  # noqa: ANN001 - a StreamJob
    """Until the job's live checkpoint is a new primary's and its daemon says running."""
    from recovery_lib.ops import daemon

    wait_for(
        lambda: (
            job.checkpoint.resolve() != old_primary and daemon.check(job.name).status == "running"
        ),
        240,
        "the standby to take over",
    )


def output_gap_scraped(port: int) -> float:
    """The daemon's output gap after the last failure (0 while none is known)."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    found = re.search(r"^recovery_last_output_gap_seconds\{[^}]*\} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def scrape(port: int) -> str:
    """The daemon's /metrics text, as Prometheus would scrape it."""
    return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text


def restarts_scraped(port: int, mode: str = "native") -> float:
    """The daemon's restart counter, scraped from its /metrics as Prometheus would."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    found = re.search(rf'recovery_restarts_total\{{job="q3_ops",mode="{mode}"\}} (\S+)', text)
    assert found, text
    return float(found.group(1))
