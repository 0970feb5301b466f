"""What the DAGs in dags/ run: Airflow-facing wrappers around the ops layer, kept here (an
installed package) so that the triggerer and the workers import them by class path.

``JobHealthTrigger`` watches a job's daemon status file asynchronously in the triggerer, so the
``watch`` task of a ``stream_<job>`` DAG holds no worker slot while it waits (deferrable).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException
from airflow.triggers.base import BaseTrigger, TriggerEvent

log = logging.getLogger(__name__)


def _daemon(kind: str) -> Any:
    """The daemon module of a job or of a pipeline (recovery_lib/pipeline/daemon.py)."""
    if kind == "pipeline":
        from recovery_lib.pipeline import daemon as pipeline_daemon

        return pipeline_daemon
    from recovery_lib.ops import daemon

    return daemon


class JobHealthTrigger(BaseTrigger):
    """Fires ``ok`` once the job (or pipeline, ``kind``) has stayed healthy for ``watch_s``
    seconds, or ``failed`` as soon as its daemon reports failure or disappears."""

    def __init__(self, job: str, watch_s: float, poll_s: float = 10.0, kind: str = "job") -> None:
        super().__init__()
        self.job = job
        self.watch_s = watch_s
        self.poll_s = poll_s
        self.kind = kind

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "recovery_lib.ops.airflow_tasks.JobHealthTrigger",
            {"job": self.job, "watch_s": self.watch_s, "poll_s": self.poll_s, "kind": self.kind},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from recovery_lib.ops import daemon

        watched = _daemon(self.kind)
        deadline = time.monotonic() + self.watch_s
        while True:
            status = await asyncio.to_thread(watched.check, self.job)
            if status.status in ("failed", "stopped"):
                yield TriggerEvent({"ok": False, **daemon.describe(status)})
                return
            if time.monotonic() >= deadline:
                yield TriggerEvent({"ok": True, **daemon.describe(status)})
                return
            await asyncio.sleep(self.poll_s)


class WatchJobOperator(BaseOperator):
    """Defers to ``JobHealthTrigger``; fails the task with the daemon's message on failure."""

    template_fields = ("watch_s",)

    def __init__(
        self,
        job: str,
        watch_s: float | str,
        poll_s: float = 10.0,
        kind: str = "job",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job = job
        self.watch_s = watch_s
        self.poll_s = poll_s
        self.kind = kind

    def execute(self, context: Any) -> None:
        self.defer(
            trigger=JobHealthTrigger(self.job, float(self.watch_s), self.poll_s, self.kind),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        if not event.get("ok"):
            where = "pipelines" if self.kind == "pipeline" else "jobs"
            raise AirflowFailException(
                f"streaming {self.kind} {self.job} is {event.get('status')}: "
                f"{event.get('message')} (restarts {event.get('restarts')}); its log is under "
                f"<RECOVERY_HOME>/{where}/{self.job}/. Fix the cause, then clear this task or "
                "trigger the DAG again to start it."
            )
        return event


def ensure_running(job_name: str, restart_failed: bool) -> dict[str, Any]:
    """Start the job's daemon if it is not alive. A daemon that gave up (restart budget spent)
    is restarted only when the policy says so; otherwise the task fails with its reason."""
    from recovery_lib.ops import daemon
    from recovery_lib.ops.config import get_job

    job = get_job(job_name)
    current = daemon.read_status(job)
    if current is not None and current.alive and current.status in daemon.ACTIVE:
        return daemon.describe(current)
    if current is not None and current.status == "failed" and not restart_failed:
        raise AirflowFailException(
            f"streaming job {job_name} failed and its policy is on_exhausted=alert: "
            f"{current.message}. Fix the cause and trigger with restart_failed=true."
        )
    return daemon.describe(daemon.start(job_name))


def replica_health(job_name: str) -> dict[str, Any]:
    """A replicated job's newest replication state (replicas, leader, lag, replacements); fails
    when a dead replica was not replaced or its replacement did not catch up in time."""
    from recovery_lib.ops.replication import newest_state
    from recovery_lib.settings import get_settings

    settings = get_settings()  # the task's edge: read once, passed down
    state = newest_state(job_name, settings)
    if state is None:
        return {"job": job_name, "state": "no replication state reported yet"}
    problems = state.problems(
        int(time.time() * 1000),
        settings.replication_replace_after_s,
        settings.replication_join_timeout_s,
    )
    if problems:
        raise AirflowFailException(
            f"replicated job {job_name}: {'; '.join(problems)}. The daemon's log and each "
            f"replica's job.log are under <RECOVERY_HOME>/jobs/{job_name}/supervisor/replicas/."
        )
    return state.to_dict()


def reference_submit_args(job_name: str, run_tag: str) -> dict[str, Any]:
    """Snapshot of the live job and the arguments of its bounded reference run."""
    import json

    from recovery_lib.kafka.admin import TopicAdmin
    from recovery_lib.ops.config import get_job
    from recovery_lib.ops.reports import snapshot

    job = get_job(job_name)
    snap = snapshot(job.checkpoint)
    reference_topic = f"{job.out_topic}.reference.{run_tag}"
    TopicAdmin(settings=job.settings).create(reference_topic, 2)
    ref_dir = job.workdir / "reference" / run_tag
    # The reference writes its own topic and checkpoint, failure-free and read deduplicated
    # whatever the job's sink; the rest of the job's launch stays.
    reference = job.launch().as_reference(str(ref_dir), reference_topic)
    args = reference.replace(available_now=True, ending_offsets=json.dumps(snap["offsets"]))
    args = args.to_argv()
    target = job.table_target
    return {
        "snapshot": snap,
        "reference_topic": reference_topic,
        "inputs": job.input_topics,
        "args": args,
        # A job writing a table is judged on the table's rows (the reference writes a topic).
        "table": target.spell() if target is not None else None,
    }


def stage_reference_submit_args(pipeline: str, stage_name: str, run_tag: str) -> dict[str, Any]:
    """Snapshot of one stage of a running pipeline and the arguments of its bounded reference
    run: the stage's job, failure-free, on the stage's own input topics up to the offsets of
    its last committed batch. Each stage judged against its actual input judges the pipeline:
    the first stages read the sources, every later one what its upstream wrote."""
    import json

    from recovery_lib.kafka.admin import TopicAdmin
    from recovery_lib.ops.reports import snapshot
    from recovery_lib.pipeline.runner import stage_checkpoint
    from recovery_lib.pipeline.spec import get_pipeline, pipeline_home, pipelines_file
    from recovery_lib.runtime.launch import JobLaunch
    from recovery_lib.settings import get_settings

    settings = get_settings()  # the task's edge: read once, passed down
    spec = get_pipeline(pipeline, pipelines_file(settings))
    stage = spec.stage(stage_name)
    home = pipeline_home(pipeline, settings)
    snap = snapshot(stage_checkpoint(home, stage))
    run_topic = spec.output_topic(stage)
    reference_topic = f"{run_topic}.reference.{run_tag}"
    TopicAdmin(settings=settings).create(reference_topic, stage.partitions)
    launch = JobLaunch(
        job=stage.spec().ref,
        name=stage.name,
        prefix=spec.name,
        inputs=spec.input_topics(stage),
        params=dict(stage.params),
        partitions=stage.partitions,
        available_now=True,
        ending_offsets=json.dumps(snap["offsets"]),
    ).as_reference(str(home / "reference" / run_tag / stage.name), reference_topic)
    args = launch.to_argv()
    return {
        "snapshot": snap,
        "reference_topic": reference_topic,
        "run_topic": run_topic,
        "job": stage.spec().ref,
        "inputs": spec.input_topics(stage),
        "args": args,
    }


def judge_output(
    label: str, job: str, run_topic: str, info: dict[str, Any], sink_mode: str
) -> dict[str, Any]:
    """The consistency DAG's compare task: the oracle and the job's GX suite on ``run_topic``
    against the reference run of ``info`` (a ``*reference_submit_args`` result), recorded in
    the metrics store. An inconsistency or a failed expectation fails the task; a verdict the
    oracle cannot give (e.g. a stage judged only by invariants over inputs it does not read)
    skips it with the reason: not consistent, and not an alert."""
    from airflow.sdk.exceptions import AirflowSkipException

    from recovery_lib.metrics.store import MetricsStore
    from recovery_lib.ops.reports import consistency_report
    from recovery_lib.settings import get_settings

    home = get_settings().home  # the task's edge: read once, passed down
    metrics = home / "metrics.duckdb"
    with MetricsStore(metrics) as store:
        report = consistency_report(
            job,
            run_topic,
            info["reference_topic"],
            snap=info["snapshot"],
            sink_mode=sink_mode,
            store=store,
            inputs=info.get("inputs"),
            table=info.get("table"),
            home=home,
        )
    # The task log's last line of our own: the verdict and where the report is kept.
    log.info(
        "%s: verdict %s (%s); report: %s, table consistency_reports",
        label,
        report["verdict"],
        report.get("guarantee"),
        metrics,
    )
    gx_ok = report.get("expectations", {}).get("success", True)
    if report["verdict"] == "inconclusive" and gx_ok:
        raise AirflowSkipException(f"{label}: inconclusive: {report['inconclusive_because']}")
    if not report["ok"]:
        raise AirflowFailException(
            f"{label}: verdict {report['verdict']} (lost {report['lost']}, duplicated "
            f"{report['duplicated']}, divergent {report['divergent']}, extra {report['extra']}, "
            f"guarantee {report['guarantee']}); expectations "
            f"{report.get('expectations', {}).get('failures')}"
        )
    return {k: report[k] for k in ("verdict", "outputs", "reference_outputs")}


def application_path(job_name: str) -> str:
    """The file spark-submit runs for a job: the generic launcher (its args name the job)."""
    import recovery_lib.job.__main__ as launcher

    del job_name  # every job runs through the launcher; kept for the DAG's call
    return str(launcher.__file__)


def ensure_pipeline_running(name: str, restart_failed: bool) -> dict[str, Any]:
    """As ``ensure_running``, for a pipeline's daemon (recovery_lib/pipeline/daemon.py)."""
    from recovery_lib.ops.daemon import ACTIVE, describe
    from recovery_lib.pipeline import daemon

    current = daemon.read_status(name)
    if current is not None and current.alive and current.status in ACTIVE:
        return describe(current)
    if current is not None and current.status == "failed" and not restart_failed:
        raise AirflowFailException(
            f"pipeline {name} failed: {current.message}. Fix the cause and trigger with "
            "restart_failed=true."
        )
    return describe(daemon.start(name))
