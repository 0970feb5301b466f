"""The generic job runtime: a job's options from the command line, and its supervised run
(topics, metrics, heartbeats, causal logging, standby role, fencing epoch).

Every job process runs ``run(spec, argv)``: ``python -m recovery_lib.job --job mod:attr ...``
(what the supervisor launches), or a job module's own ``main()``."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from recovery_lib.io.parked import POISON_BATCH_ENV, ParkedRecord
from recovery_lib.io.sinks.modes import (
    NEEDS_BROKER_TRANSACTIONS,
    REPLAY_BY_ID,
    output_partitions,
)
from recovery_lib.io.sinks.table_target import TableTarget
from recovery_lib.job.frames import OUTPUT, write_output
from recovery_lib.job.options import JobOptions
from recovery_lib.job.poison import find_and_park
from recovery_lib.job.spare_warmth import SpareWarmth, spare_rehearsal, stop_rehearsals
from recovery_lib.job.spec import JobSpec, StartsItsQuery
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.outage import OUTAGE_FILE_ENV
from recovery_lib.metrics.listener import MetricsListener
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.runtime.faults import mark_driver_process_group
from recovery_lib.runtime.heartbeat import HeartbeatWriter
from recovery_lib.runtime.launch import JobLaunch, LaunchRefused
from recovery_lib.runtime.logs import configure_logging
from recovery_lib.runtime.spare import SPARE_GO_ENV, wait_for_go
from recovery_lib.settings import get_settings
from recovery_lib.spark.session import build_session, stop_session
from recovery_lib.verify.schema import SCHEMA_DIR

log = logging.getLogger(__name__)

# When this module (and with it the library and PySpark's Python side) finished importing: the
# first of a job process's start-up phases (the "job_phases" event, see ``run``).
IMPORTED_MS = now_ms()


def parse_options(spec: JobSpec, argv: list[str] | None = None) -> tuple[JobOptions, JobLaunch]:
    """The job process's argv, parsed once: its launch, and the options its build sees.
    Exits with the usage and what to fix when the launch does not suit the job."""
    launch = JobLaunch.from_argv(
        list(sys.argv[1:] if argv is None else argv),
        description=spec.description or f"job {spec.name} on Spark Structured Streaming",
        prefix_help=f"topic prefix: input x is read from <prefix>.x (inputs: "
        f"{', '.join(spec.inputs)}; default {spec.default_prefix!r})",
        param_help=f"name=value for the job ({', '.join(spec.params) or 'none needed'})",
    )
    try:
        return job_options(spec, launch), launch
    except ValueError as exc:
        raise SystemExit(f"job {spec.name}: {exc}") from None


def job_options(spec: JobSpec, launch: JobLaunch) -> JobOptions:
    """What the job's build is told of its launch; ``LaunchRefused`` (a ``ValueError``) says
    what does not suit."""
    unknown = sorted(set(launch.inputs) - set(spec.inputs))
    if unknown:
        raise LaunchRefused(f"--input {unknown}: job {spec.name} has inputs {list(spec.inputs)}")
    missing = [p for p in spec.params if p not in launch.params]
    if missing:
        raise LaunchRefused(f"job {spec.name} needs --param {'=... --param '.join(missing)}=...")
    if launch.own_log and launch.sink_mode != "dedup":
        raise LaunchRefused(
            f"--sink-mode {launch.sink_mode} with --mode cec: a CEC aggregate writes its output "
            "log itself, and a plain consumer already reads each result once; leave the sink "
            "mode at its default"
        )
    opts = JobOptions(
        query=spec.name,
        prefix=spec.default_prefix if launch.prefix is None else launch.prefix,
        partitions=launch.partitions or JobOptions.partitions,
        inputs=dict(launch.inputs),
        params=dict(launch.params),
        checkpoint_dir=launch.checkpoints,
        output_topic=launch.output_topic,
        sink_mode=launch.sink_mode,
        output_mode=spec.output_mode,
        available_now=launch.available_now,
        max_records_per_batch=launch.max_records,
        trigger_interval=launch.trigger_interval,
        ending_offsets=launch.ending_offsets,
        follow_log=launch.follow_log,
        source_options=dict(launch.source_options),
        sink_options=dict(launch.sink_options),
        table_sink=launch.table_sink,
        schema_store=str(get_settings().home / SCHEMA_DIR),
    )
    if launch.causal:
        settings = get_settings()
        causal = opts.enable_causal(settings.causal_on_missing, settings.causal_storage)
        if launch.causal_options:
            shared = dict(launch.causal_options)
            source = shared.pop("streamSource")
            opts.causal = dataclasses.replace(
                causal, source=source, source_options=shared, storage="kafka"
            )
    check_sink_mode(spec, opts.sink_mode, opts.causal is not None)
    if opts.table_sink:
        TableTarget.parse(opts.table_sink)  # raises naming the spelling
        if launch.own_log:
            raise LaunchRefused(
                "--table-sink with --mode cec: a CEC aggregate's output log is its state; "
                "write its results to a table downstream, or run it native or causal"
            )
        if opts.causal is not None and opts.causal.storage == "output":
            raise LaunchRefused(
                "--table-sink with causal determinants piggybacked on the output "
                "(RECOVERY_CAUSAL_STORAGE=output): a table row does not carry them; set "
                "RECOVERY_CAUSAL_STORAGE=kafka"
            )
    return opts


def check_sink_mode(
    spec: JobSpec,
    sink_mode: str,
    causal: bool,
    fix: str = "Run it with --mode causal (its nondeterminism is then logged and replayed), "
    "or choose sink mode two_phase or dedup",
) -> None:
    """The release barrier (sink modes release and transactional) drops re-computed outputs
    by id: a re-run must recompute what the first run wrote, which a nondeterministic or
    order-sensitive job does only under causal logging. ``fix`` says what to change where the
    check runs."""
    if sink_mode in REPLAY_BY_ID and spec.contract.replay_needs_causal and not causal:
        why = "nondeterministic" if not spec.contract.deterministic else "order-sensitive"
        raise LaunchRefused(
            f"sink mode {sink_mode} needs a replay that recomputes what was written, and job "
            f"{spec.name} is {why} (its consistency contract says so): a re-run would write "
            f"different outputs under ids already written. {fix}"
        )


def check_broker_transactions(opts: JobOptions) -> None:
    """Sink mode transactional is correct only where read_committed consumers hide aborted
    records: tried on the job's broker (kafka/capabilities.py) before the query starts."""
    if opts.sink_mode in NEEDS_BROKER_TRANSACTIONS:
        from recovery_lib.kafka.capabilities import require_hidden_aborts

        require_hidden_aborts(
            opts.kafka, "sink mode transactional", "sink mode dedup, release or two_phase"
        )


def create_topics(opts: JobOptions) -> None:
    """The job's output topic (a table sink creates its table with the first batch) and its
    dead-letter topic; a transactional sink's broker tried first."""
    check_broker_transactions(opts)
    admin = TopicAdmin(opts.kafka)
    if not opts.table_sink:
        admin.create(opts.out_topic, output_partitions(opts.sink_mode, opts.partitions))
    admin.create(opts.dlq_topic, 1)


def causal_truncation(spark: Any, opts: JobOptions) -> Any:
    """Causal logging made ready before the query starts; returns the listener that forgets
    determinants of old committed batches (to be added for the job's query)."""
    from recovery_lib.causal.driver import TruncatingListener, enable

    assert opts.causal is not None
    settings = get_settings()
    replay = enable(spark, opts.causal, opts.checkpoint_path)
    log.info("causal logging on: determinants in %s; replaying batch %s", opts.causal.topic, replay)
    return TruncatingListener(
        opts.causal, settings.causal_keep_batches, settings.causal_truncate_every
    )


def start_built(built: Any, opts: JobOptions, own_log: bool, events: Any = None) -> Any:
    """Start what ``build`` returned: an output DataFrame through the sink, or a plan that
    starts its own query (``StartsItsQuery``, e.g. a CEC aggregate)."""

    if isinstance(built, StartsItsQuery):
        return built.start_own_query(opts, own_log, events)
    if own_log:
        raise SystemExit(
            f"--mode cec: job {opts.query}'s build returns a DataFrame, not a CEC aggregate; "
            "mode cec needs a job whose build returns recovery_lib.cec.cec_aggregate(...)"
        )
    return write_output(built, opts)


def spare_warm_up(spark: Any, opts: JobOptions, spec: JobSpec, scratch: str) -> SpareWarmth:
    """What a spare runs while it waits: the Python workers up, a held write through the
    job's sink (none for a job that writes its output itself), and now and then a rehearsal
    of the job's query on a copy of its checkpoint (job/spare_warmth.py)."""
    from recovery_lib.ha.standby.rehearsal import warm_workers

    output = None if spec.own_sink else OUTPUT
    every_s = get_settings().supervisor_spare_rehearse_every_s
    # A job that writes its output itself has no held sink to rehearse through.
    rehearsal = (
        None if spec.own_sink else spare_rehearsal(spark, spec.build, opts, Path(scratch), output)
    )
    return SpareWarmth(
        lambda: warm_workers(spark, opts, scratch, output),
        rehearsal,
        lambda: stop_rehearsals(spark),
        every_s,
    )


def run(spec: JobSpec, argv: list[str] | None = None) -> None:
    """Run ``spec.build(spark, opts)`` as a supervised streaming job: topics, metrics,
    heartbeats (works under spark-submit and python -m)."""

    configure_logging()
    opts, launch = parse_options(spec, argv)
    query = spec.name
    build = spec.build
    mark_driver_process_group()
    outage = None
    if launch.heartbeat:  # the Kafka clients' waits for the broker, carried by the heartbeat
        outage = os.environ[OUTAGE_FILE_ENV] = f"{launch.heartbeat}.outage"

    def start_heartbeat() -> HeartbeatWriter | None:
        if not launch.heartbeat:
            return None
        interval = get_settings().standby_heartbeat_interval_s
        return HeartbeatWriter(
            launch.heartbeat, interval, role=launch.role.value, outage_path=outage
        ).start()

    # A spare (runtime/spare.py) beats only once it is the job: the job's heartbeat is the
    # live process's.
    spare_go = os.environ.pop(SPARE_GO_ENV, None)
    heartbeat = start_heartbeat() if spare_go is None else None
    master = None
    if launch.task_retries > 1 and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        master = f"local[2,{launch.task_retries}]"
    # The topics and the metrics store are made ready while the JVM starts (a restart waits
    # for the slowest of the three, not their sum).
    with ThreadPoolExecutor(2, thread_name_prefix="job-setup") as setup:
        topics = setup.submit(create_topics, opts)
        opened = setup.submit(MetricsStore, launch.metrics) if launch.metrics else None
        spark = build_session(f"job_{query}", master=master)
        topics.result()
        store: Any = opened.result() if opened is not None else None
    # Where a start-up's time goes (the restart breakdown of `recovery bench state`).
    phases = {"imported_ms": IMPORTED_MS, "session_ready_ms": now_ms()}
    if heartbeat is not None:
        spark.streams.addListener(heartbeat)
    run_id = launch.run_id
    if store is not None:
        store.start_background_flush()
        if run_id is None:
            run_id = store.start_run(query, launch.process_mode.value, {"argv": launch.to_argv()})
        metrics_listener = MetricsListener(store, run_id)
        spark.streams.addListener(metrics_listener)
    status = "failed"
    standby = None
    if launch.standby is not None:
        from recovery_lib.ha.standby.process import StandbyConfig, StandbyJob

        standby = StandbyJob(
            spark,
            opts,
            StandbyConfig.from_settings(
                primary_checkpoint=launch.standby.primary_checkpoint,
                primary_heartbeat=launch.standby.primary_heartbeat,
                standby_dir=launch.standby.standby_dir,
                epoch_store=str(launch.epoch_store),
            ),
            heartbeat,
            build=None if spec.own_sink else build,  # nothing of the project's to rehearse
            inputs=len(spec.inputs),
            output=OUTPUT,
            own_sink=spec.own_sink,
        )
    elif launch.epoch_store:  # a primary under fencing: a new incarnation takes a new epoch
        from recovery_lib.ha.fencing import EPOCH_GUARD_HOOK, EpochStore

        opts.epoch = EpochStore(launch.epoch_store).advance(f"primary {launch.checkpoints}")
        opts.epoch_store = launch.epoch_store
        if opts.causal is not None:
            opts.causal = dataclasses.replace(
                opts.causal,
                epoch=opts.epoch,
                epoch_store=launch.epoch_store,
                write_guard=EPOCH_GUARD_HOOK,
            )
        if heartbeat is not None:
            heartbeat.epoch = opts.epoch
            heartbeat.beat()
    poison_batch = os.environ.pop(POISON_BATCH_ENV, None)
    if poison_batch is not None and spec.own_sink:
        log.error("batch %s fails again and again; a job that writes its output itself is "
                  "not searched for a poison record", poison_batch)  # fmt: skip
    elif poison_batch is not None and standby is None:  # the same batch failed again and again
        batch = int(poison_batch)

        def parked(record: ParkedRecord) -> None:  # the dashboard's and the report's record
            if store is not None and run_id is not None:
                store.event(
                    run_id,
                    "poison_parked",
                    {"position": record.position, "reason": record.reason, "batch": batch},
                )

        find_and_park(spark, build, opts, batch, parked)
    df = build(spark, opts)  # a standby builds its query ahead of time
    phases["query_built_ms"] = now_ms()
    if spare_go is not None:
        with tempfile.TemporaryDirectory(prefix="spare-warm-") as scratch:
            warmth = spare_warm_up(spark, opts, spec, scratch)
            went = wait_for_go(
                Path(spare_go), warm=warmth, warm_every_s=get_settings().standby_warm_every_s
            )
            warmth.stop()  # a rehearsal still running gives way to the job's query
        if not went:
            log.warning("spare: its supervisor is gone; exiting without starting the query")
            stop_session(spark)
            return
        phases["takeover_ms"] = now_ms()
        heartbeat = start_heartbeat()
        if heartbeat is not None:
            spark.streams.addListener(heartbeat)
    events = None
    if store is not None:

        def events(kind: str, detail: dict[str, Any]) -> None:
            store.event(run_id, kind, detail)

    if standby is not None:
        if standby.hot:  # its query runs from now on, held until the takeover
            standby.start_follower(df, lambda: start_built(df, opts, launch.own_log, events))
        cause = standby.wait_for_takeover()
        phases["takeover_ms"] = now_ms()
        standby.take_over(cause)
    if opts.causal is not None:
        spark.streams.addListener(causal_truncation(spark, opts))
    try:
        if standby is not None and standby.follower_alive():  # a hot standby's own query
            streaming = standby.follower
        else:
            streaming = start_built(df, opts, launch.own_log, events)
        if store is not None:
            store.event(run_id, "job_phases", {**phases, "query_started_ms": now_ms()})
        streaming.awaitTermination()
        status = "finished"
        if store is not None:  # the last batches' progress events may still be on their way
            metrics_listener.wait_terminated(streaming.id)
    finally:
        if heartbeat is not None:
            heartbeat.stop()
        if store is not None:
            if launch.run_id is None:  # a supervised run is finished by its supervisor
                store.finish_run(run_id, status)
            store.close()
