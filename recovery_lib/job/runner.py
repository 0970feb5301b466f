"""The generic job runtime: a job's options from the command line, and its supervised run
(topics, metrics, heartbeats, causal logging, standby role, fencing epoch).

Every job process runs ``run(spec, argv)``: ``python -m recovery_lib.job --job mod:attr ...``
(what the supervisor launches), or a job module's own ``main()``."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from recovery_lib.io.sinks.modes import SINK_MODES, output_partitions, sink_mode
from recovery_lib.job.options import JobOptions, parse_pairs
from recovery_lib.job.spec import JobSpec, StartsItsQuery

JOB_MODES = ("native", "causal", "cec")


def parse_options(
    spec: JobSpec, argv: list[str] | None = None
) -> tuple[JobOptions, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        description=spec.description or f"job {spec.name} on Spark Structured Streaming"
    )
    parser.add_argument("--job", default=None, help="module:attr of the job (the launcher's)")
    parser.add_argument(
        "--prefix",
        default=spec.default_prefix,
        help=f"topic prefix: input x is read from <prefix>.x (inputs: {', '.join(spec.inputs)})",
    )
    parser.add_argument(
        "--input", action="append", default=[], help="input=topic: read an input from a topic"
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        help=f"name=value for the job ({', '.join(spec.params) or 'none needed'})",
    )
    parser.add_argument("--partitions", type=int, default=None, help="output topic partitions")
    parser.add_argument("--checkpoints", default=".recovery/jobs/checkpoints")
    parser.add_argument("--output-topic", default=None)
    parser.add_argument(
        "--sink-mode",
        default="dedup",
        type=sink_mode,
        help=f"how outputs reach consumers: {', '.join(SINK_MODES)} (io/sinks/modes.py)",
    )
    parser.add_argument("--max-records", type=int, default=None)
    parser.add_argument(
        "--trigger-interval",
        default="0 seconds",
        help="processing-time trigger, e.g. '2 seconds' (default: as soon as the last ended)",
    )
    parser.add_argument(
        "--source-option",
        action="append",
        default=[],
        help="name=value passed to every input's source (a mechanism's cut policy and options)",
    )
    parser.add_argument(
        "--sink-option",
        action="append",
        default=[],
        help="name=value passed to the sink (a mechanism's commit hook, record headers)",
    )
    parser.add_argument(
        "--causal-option",
        action="append",
        default=[],
        help="name=value for causal logging (mode causal): streamSource=module:attr shares "
        "streams between processes that compute them together (active replication), the rest "
        "goes to that source",
    )
    parser.add_argument(
        "--follow-log",
        default=None,
        help="re-run batches with the boundaries of this offset log, then cut freely (the "
        "tail `recovery checkpoint rewind` moved aside: <moved_to>/offsets)",
    )
    parser.add_argument(
        "--available-now", action="store_true", help="process what is there, then stop"
    )
    parser.add_argument(
        "--ending-offsets",
        default=None,
        help='read no further than these offsets, JSON {"topic": {"0": 42}} (a bounded run)',
    )
    parser.add_argument("--metrics", default=None, help="DuckDB metrics store to write to")
    parser.add_argument(
        "--mode",
        default="native",
        choices=JOB_MODES,
        help="native | causal (log nondeterminism, replay it) | cec (a CEC aggregate's windows "
        "checkpointed into its output log, recovery_lib/cec)",
    )
    parser.add_argument("--run-id", default=None, help="metrics run id (the supervisor's)")
    parser.add_argument("--heartbeat", default=None, help="file the driver rewrites every second")
    parser.add_argument(
        "--task-retries",
        type=int,
        default=1,
        help="attempts per task in local mode (Spark's maxFailures)",
    )
    standby = parser.add_argument_group("standby jobs (recovery_lib/ha/standby)")
    standby.add_argument("--role", default="primary", choices=["primary", "standby"])
    standby.add_argument(
        "--epoch-store", default=None, help="fencing epoch directory (shared storage)"
    )
    standby.add_argument("--primary-checkpoint", default=None, help="standby: what to ship")
    standby.add_argument("--primary-heartbeat", default=None, help="standby: the lease to watch")
    standby.add_argument("--standby-dir", default=None, help="standby: its own storage")
    args = parser.parse_args(argv)
    if args.role == "standby" and not (
        args.primary_checkpoint and args.primary_heartbeat and args.standby_dir and args.epoch_store
    ):
        parser.error(
            "--role standby needs --primary-checkpoint, --primary-heartbeat, --standby-dir "
            "and --epoch-store"
        )
    try:
        inputs = parse_pairs(args.input, "--input")
        params = parse_pairs(args.param, "--param")
        source_options = parse_pairs(args.source_option, "--source-option")
        sink_options = parse_pairs(args.sink_option, "--sink-option")
        causal_options = parse_pairs(args.causal_option, "--causal-option")
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    unknown = sorted(set(inputs) - set(spec.inputs))
    if unknown:
        parser.error(f"--input {unknown}: job {spec.name} has inputs {list(spec.inputs)}")
    missing = [p for p in spec.params if p not in params]
    if missing:
        parser.error(f"job {spec.name} needs --param {'=... --param '.join(missing)}=...")
    opts = JobOptions(
        query=spec.name,
        prefix=args.prefix,
        partitions=args.partitions or JobOptions.partitions,
        inputs=inputs,
        params=params,
        checkpoint_dir=args.checkpoints,
        output_topic=args.output_topic,
        sink_mode=args.sink_mode,
        available_now=args.available_now,
        max_records_per_batch=args.max_records,
        trigger_interval=args.trigger_interval,
        ending_offsets=args.ending_offsets,
        follow_log=args.follow_log,
        source_options=source_options,
        sink_options=sink_options,
    )
    if args.mode == "cec" and args.sink_mode != "dedup":
        parser.error(
            f"--sink-mode {args.sink_mode} with --mode cec: a CEC aggregate writes its output "
            "log itself, and a plain consumer already reads each result once; leave the sink "
            "mode at its default"
        )
    if args.mode == "causal":
        from recovery_lib.settings import get_settings

        settings = get_settings()
        causal = opts.enable_causal(settings.causal_on_missing, settings.causal_storage)
        if causal_options:
            source = causal_options.pop("streamSource", "")
            if not source:
                parser.error("--causal-option needs streamSource=module:attr")
            opts.causal = dataclasses.replace(
                causal, source=source, source_options=causal_options, storage="kafka"
            )
    elif causal_options:
        parser.error("--causal-option is for --mode causal")
    try:
        check_sink_mode(spec, opts.sink_mode, opts.causal is not None)
    except ValueError as exc:
        parser.error(str(exc))
    return opts, args


def check_sink_mode(
    spec: JobSpec,
    sink_mode: str,
    causal: bool,
    fix: str = "Run it with --mode causal (its nondeterminism is then logged and replayed), "
    "or choose sink mode two_phase or dedup",
) -> None:
    """The release barrier drops re-computed outputs by id: a re-run must recompute what the
    first run released, which a nondeterministic or order-sensitive job does only under
    causal logging. ``fix`` says what to change where the check runs."""
    if sink_mode == "release" and spec.contract.replay_needs_causal and not causal:
        why = "nondeterministic" if not spec.contract.deterministic else "order-sensitive"
        raise ValueError(
            f"sink mode release needs a replay that recomputes what was released, and job "
            f"{spec.name} is {why} (its consistency contract says so): a re-run would release "
            f"different outputs under ids already released. {fix}"
        )


def _start(built: Any, opts: JobOptions, own_log: bool, events: Any = None) -> Any:
    """Start what ``build`` returned: an output DataFrame through the sink, or a plan that
    starts its own query (``StartsItsQuery``, e.g. a CEC aggregate)."""
    from recovery_lib.job.frames import write_output

    if isinstance(built, StartsItsQuery):
        return built.start_own_query(opts, own_log, events)
    if own_log:
        raise SystemExit(
            f"--mode cec: job {opts.query}'s build returns a DataFrame, not a CEC aggregate; "
            "mode cec needs a job whose build returns recovery_lib.cec.cec_aggregate(...)"
        )
    return write_output(built, opts)


def run(spec: JobSpec, argv: list[str] | None = None) -> None:
    """Run ``spec.build(spark, opts)`` as a supervised streaming job: topics, metrics,
    heartbeats (works under spark-submit and python -m)."""
    from recovery_lib.kafka.admin import TopicAdmin
    from recovery_lib.metrics.listener import MetricsListener
    from recovery_lib.metrics.store import MetricsStore
    from recovery_lib.runtime.faults import mark_driver_process_group
    from recovery_lib.runtime.heartbeat import HeartbeatWriter
    from recovery_lib.settings import get_settings
    from recovery_lib.spark.session import build_session

    opts, args = parse_options(spec, argv)
    query = spec.name
    build = spec.build
    mark_driver_process_group()
    heartbeat = (
        HeartbeatWriter(
            args.heartbeat, get_settings().standby_heartbeat_interval_s, role=args.role
        ).start()
        if args.heartbeat
        else None
    )
    admin = TopicAdmin(opts.kafka)
    admin.create(opts.out_topic, output_partitions(opts.sink_mode, opts.partitions))
    admin.create(opts.dlq_topic, 1)
    master = None
    if args.task_retries > 1 and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        master = f"local[2,{args.task_retries}]"
    spark = build_session(f"job_{query}", master=master)
    if heartbeat is not None:
        spark.streams.addListener(heartbeat)
    store: Any = None
    run_id = args.run_id
    if args.metrics:
        store = MetricsStore(args.metrics).start_background_flush()
        if run_id is None:
            run_id = store.start_run(query, args.mode, {"argv": argv})
        metrics_listener = MetricsListener(store, run_id)
        spark.streams.addListener(metrics_listener)
    status = "failed"
    standby = None
    if args.role == "standby":
        from recovery_lib.ha.standby.process import StandbyConfig, StandbyJob

        standby = StandbyJob(
            spark,
            opts,
            StandbyConfig.from_settings(
                primary_checkpoint=args.primary_checkpoint,
                primary_heartbeat=args.primary_heartbeat,
                standby_dir=args.standby_dir,
                epoch_store=args.epoch_store,
            ),
            heartbeat,
            build=build,
        )
    elif args.epoch_store:  # a primary under fencing: a new incarnation takes a new epoch
        from recovery_lib.ha.fencing import EPOCH_GUARD_HOOK, EpochStore

        opts.epoch = EpochStore(args.epoch_store).advance(f"primary {args.checkpoints}")
        opts.epoch_store = args.epoch_store
        if opts.causal is not None:
            opts.causal = dataclasses.replace(
                opts.causal,
                epoch=opts.epoch,
                epoch_store=args.epoch_store,
                write_guard=EPOCH_GUARD_HOOK,
            )
        if heartbeat is not None:
            heartbeat.epoch = opts.epoch
            heartbeat.beat()
    df = build(spark, opts)  # a standby builds its query ahead of time
    if standby is not None:
        cause = standby.wait_for_takeover()
        standby.take_over(cause)
    if opts.causal is not None:
        from recovery_lib.causal.driver import TruncatingListener, enable
        from recovery_lib.settings import get_settings

        settings = get_settings()
        replay = enable(spark, opts.causal, opts.checkpoint_path)
        print(f"causal logging on: determinants in {opts.causal.topic}; replaying batch {replay}")
        spark.streams.addListener(
            TruncatingListener(
                opts.causal, settings.causal_keep_batches, settings.causal_truncate_every
            )
        )
    try:
        events = None
        if store is not None:

            def events(kind: str, detail: dict[str, Any]) -> None:
                store.event(run_id, kind, detail)

        streaming = _start(df, opts, args.mode == "cec", events)
        streaming.awaitTermination()
        status = "finished"
        if store is not None:  # the last batches' progress events may still be on their way
            metrics_listener.wait_terminated(streaming.id)
    finally:
        if heartbeat is not None:
            heartbeat.stop()
        if store is not None:
            if args.run_id is None:  # a supervised run is finished by its supervisor
                store.finish_run(run_id, status)
            store.close()
