"""What every NexMark job module shares: options from the command line, the run with metrics."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.streams import QueryOptions


def parse_options(
    query: str, argv: list[str] | None = None
) -> tuple[QueryOptions, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        description=f"NexMark {query.upper()} on Spark Structured Streaming"
    )
    parser.add_argument("--prefix", default="nexmark", help="topic prefix of the generated events")
    parser.add_argument("--checkpoints", default=".recovery/nexmark/checkpoints")
    parser.add_argument("--output-topic", default=None)
    parser.add_argument(
        "--sink-mode", default="dedup", choices=["at_least_once", "dedup", "transactional"]
    )
    parser.add_argument("--max-records", type=int, default=None)
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
        "--mode", default="native", help="native | causal (log nondeterminism, replay it)"
    )
    parser.add_argument("--run-id", default=None, help="metrics run id (the supervisor's)")
    parser.add_argument("--heartbeat", default=None, help="file the driver rewrites every second")
    parser.add_argument(
        "--task-retries",
        type=int,
        default=1,
        help="attempts per task in local mode (Spark's maxFailures)",
    )
    standby = parser.add_argument_group("standby jobs (recovery_lib/standby)")
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
    opts = QueryOptions(
        query=query,
        generator=GeneratorConfig(topic_prefix=args.prefix),
        checkpoint_dir=args.checkpoints,
        output_topic=args.output_topic,
        sink_mode=args.sink_mode,
        available_now=args.available_now,
        max_records_per_batch=args.max_records,
        ending_offsets=args.ending_offsets,
    )
    if args.mode == "causal":
        from recovery_lib.settings import get_settings

        settings = get_settings()
        opts.enable_causal(settings.causal_on_missing, settings.causal_storage)
    return opts, args


def run(query: str, argv: list[str] | None = None) -> None:
    """Entry point of jobs/nexmark/<query>.py (works under spark-submit and python -m)."""
    from recovery_lib.nexmark.queries import get_query

    run_with(query, get_query(query), argv)


def run_with(query: str, build: Any, argv: list[str] | None = None) -> None:
    """Run ``build(spark, opts)`` as a supervised streaming job: topics, metrics, heartbeats."""
    from recovery_lib.kafka.admin import TopicAdmin
    from recovery_lib.metrics.listener import MetricsListener
    from recovery_lib.metrics.store import MetricsStore
    from recovery_lib.nexmark.streams import write_output
    from recovery_lib.runtime.faults import mark_driver_process_group
    from recovery_lib.runtime.heartbeat import HeartbeatWriter
    from recovery_lib.settings import get_settings
    from recovery_lib.spark.session import build_session

    opts, args = parse_options(query, argv)
    mark_driver_process_group()
    heartbeat = (
        HeartbeatWriter(
            args.heartbeat, get_settings().standby_heartbeat_interval_s, role=args.role
        ).start()
        if args.heartbeat
        else None
    )
    admin = TopicAdmin(opts.kafka)
    admin.create(opts.out_topic, opts.generator.partitions)
    admin.create(opts.dlq_topic, 1)
    master = None
    if args.task_retries > 1 and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        master = f"local[2,{args.task_retries}]"
    spark = build_session(f"nexmark_{query}", master=master)
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
        from recovery_lib.standby.process import StandbyConfig, StandbyJob

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
        from recovery_lib.standby.fencing import EpochStore

        opts.epoch = EpochStore(args.epoch_store).advance(f"primary {args.checkpoints}")
        opts.epoch_store = args.epoch_store
        if opts.causal is not None:
            opts.causal = dataclasses.replace(
                opts.causal, epoch=opts.epoch, epoch_store=args.epoch_store
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
        streaming = write_output(df, opts)
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
