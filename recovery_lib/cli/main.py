"""``recovery``: broker, topics, demo and benchmarks from the command line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.console import Console

from recovery_lib.cli.ops_cmd import ops_app
from recovery_lib.kafka import broker as broker_mod
from recovery_lib.kafka.exceptions import KafkaLayerError

app = typer.Typer(help="Consistent, fast recovery for Spark streaming jobs.", no_args_is_help=True)
broker_app = typer.Typer(help="The embedded Kafka-protocol broker (tansu).", no_args_is_help=True)
topics_app = typer.Typer(help="Topic administration.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks that write JSON + PNG reports.", no_args_is_help=True)
nexmark_app = typer.Typer(help="The NexMark workload.", no_args_is_help=True)
cluster_app = typer.Typer(help="A Spark standalone cluster on 127.0.0.1.", no_args_is_help=True)
experiment_app = typer.Typer(help="Recovery experiments with real failures.", no_args_is_help=True)
job_app = typer.Typer(
    help="Supervised long-running jobs (dags/streaming_jobs.yaml).", no_args_is_help=True
)
app.add_typer(broker_app, name="broker")
app.add_typer(topics_app, name="topics")
app.add_typer(bench_app, name="bench")
app.add_typer(nexmark_app, name="nexmark")
app.add_typer(cluster_app, name="cluster")
app.add_typer(experiment_app, name="experiment")
app.add_typer(job_app, name="job")
standby_app = typer.Typer(
    help="Standby jobs: state shipping and its lag (recovery_lib/ha/standby).", no_args_is_help=True
)
app.add_typer(standby_app, name="standby")
app.add_typer(ops_app, name="ops")
console = Console()


@app.callback()
def _main() -> None:
    """Consistent, fast recovery for Spark streaming jobs."""
    # Airflow and process managers stop a command with SIGTERM: unwind like Ctrl-C, so every
    # `finally` runs and the jobs, clusters and brokers a command started are stopped.
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))


EXIT_INCONCLUSIVE = 4  # a requested failure did not fire, or nothing was produced


def _fail(exc: Exception) -> None:
    console.print(f"[red]error:[/] {exc}")
    raise typer.Exit(code=1)


def _pairs(items: list[str], option: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{option} takes name=value, got {item!r}")
        out[name] = value
    return out


def _offsets(text: str | None, option: str) -> dict[str, dict[int, int]] | None:
    if not text:
        return None
    try:
        raw = json.loads(text)
        return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f'{option} takes JSON {{"topic": {{"0": 42}}}}, got {text!r}') from exc


@broker_app.command("start")
def broker_start(
    port: int = typer.Option(0, help="Port on 127.0.0.1 (0 = a free one)."),
    foreground: bool = typer.Option(False, help="Stay attached; Ctrl-C stops the broker."),
) -> None:
    """Start the embedded broker (detached unless --foreground)."""
    b = broker_mod.EmbeddedBroker(port=port or None)
    try:
        state = b.start(detached=not foreground)
    except KafkaLayerError as exc:
        _fail(exc)
        return
    console.print(
        f"broker up: pid {state.pid}, bootstrap [bold]{state.bootstrap}[/], log {state.log_file}"
    )
    if foreground:
        try:
            while b.process is not None and b.process.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            b.stop()
            console.print("broker stopped")


@broker_app.command("stop")
def broker_stop() -> None:
    """Stop the recorded embedded broker by PID."""
    state = broker_mod.stop_recorded()
    console.print(f"stopped broker pid {state.pid}" if state else "no embedded broker is running")


@broker_app.command("status")
def broker_status() -> None:
    """Print whether the embedded broker runs, and where."""
    state = broker_mod.running_state()
    if state is None:
        console.print("no embedded broker is running")
        raise typer.Exit(code=3)
    console.print(f"running: pid {state.pid}, bootstrap {state.bootstrap}, log {state.log_file}")


@topics_app.command("create")
def topics_create(name: str, partitions: int = typer.Option(1, min=1)) -> None:
    from recovery_lib.kafka.admin import TopicAdmin

    try:
        created = TopicAdmin().create(name, partitions)
    except KafkaLayerError as exc:
        _fail(exc)
        return
    console.print(
        f"created {name} ({partitions} partitions)" if created else f"{name} already exists"
    )


@topics_app.command("delete")
def topics_delete(name: str) -> None:
    from recovery_lib.kafka.admin import TopicAdmin

    try:
        deleted = TopicAdmin().delete(name)
    except KafkaLayerError as exc:
        _fail(exc)
        return
    console.print(f"deleted {name}" if deleted else f"{name} does not exist")


@topics_app.command("list")
def topics_list() -> None:
    from recovery_lib.kafka.admin import TopicAdmin

    try:
        for name in TopicAdmin().list():
            console.print(name)
    except KafkaLayerError as exc:
        _fail(exc)


@app.command("demo")
def demo(
    events: int = typer.Option(50_000, help="Events to generate."),
    recovery: bool = typer.Option(
        True, help="Also run the native-vs-causal recovery demo (about 5 minutes)."
    ),
) -> None:
    """Run the main job end to end on embedded defaults, then a nondeterministic pipeline killed
    mid-write, native vs causal, judged by the oracle (starts and stops its own broker unless
    KAFKA_BOOTSTRAP is set)."""
    from recovery_lib.demo import print_recovery_result, print_result, run_demo, run_recovery_demo
    from recovery_lib.settings import get_settings

    owned = None
    if not get_settings().kafka_bootstrap and broker_mod.running_state() is None:
        owned = broker_mod.EmbeddedBroker()
        state = owned.start()
        console.print(f"embedded broker started on {state.bootstrap} (pid {state.pid})")
    try:
        result = run_demo(events, console)
        print_result(result, console)
        if recovery:
            print_recovery_result(run_recovery_demo(console), console)
    finally:
        if owned is not None:
            owned.stop()
            console.print("embedded broker stopped")


@bench_app.command("io")
def bench_io(
    events: int = typer.Option(300_000, help="Events per measured path."),
    out: str = typer.Option("reports/bench_io", help="Report prefix (.json and .png)."),
) -> None:
    """Throughput of source -> noop / stateful count / Kafka sink, broker ceiling, latency."""
    from recovery_lib.bench.io_bench import run_io_bench

    run_io_bench(events=events, out_prefix=out, console=console)


@nexmark_app.command("generate")
def nexmark_generate(
    events: int = typer.Option(None, help="Number of events (or give --duration with --rate)."),
    duration: float = typer.Option(None, help="Seconds to generate for, at --rate."),
    rate: float = typer.Option(None, help="Events per second; unpaced when omitted."),
    seed: int = typer.Option(42),
    skew: float = typer.Option(0.5, help="Hot-item ratio in [0, 1]: 0 uniform, 0.5 Beam default."),
    prefix: str = typer.Option("nexmark", help="Topics <prefix>.persons/.auctions/.bids"),
    partitions: int = typer.Option(4),
    first_event_id: int = typer.Option(0, help="Continue a stream: the id of the first event."),
) -> None:
    """Write deterministic NexMark events to Kafka (same seed + ids = same bytes)."""
    from pydantic import ValidationError
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from recovery_lib.nexmark.config import GeneratorConfig
    from recovery_lib.nexmark.producer import ensure_topics, produce_events

    if rate is not None and rate <= 0:
        _fail(ValueError(f"--rate must be a positive number of events per second, got {rate}"))
    try:
        config = GeneratorConfig(
            seed=seed,
            hot_ratio=skew,
            topic_prefix=prefix,
            partitions=partitions,
            event_time_rate=rate or 10_000.0,
        )
    except ValidationError as exc:
        _fail(ValueError("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())))
        return
    if events is None and (duration is None or rate is None):
        _fail(ValueError("give --events N, or --duration S together with --rate R"))
    total = events if events is not None else int(duration * rate)
    try:
        ensure_topics(config)
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,}/{task.total:,}"),
            TimeRemainingColumn(),
            console=console,
        ) as progress:
            task = progress.add_task(f"generating into {prefix}.*", total=total)
            stats = produce_events(
                config,
                count=total,
                rate=rate,
                first_event_id=first_event_id,
                on_progress=lambda n: progress.update(task, completed=n),
            )
    except (KafkaLayerError, ValueError) as exc:
        _fail(exc)
        return
    console.print(
        f"{stats.events:,} events ({stats.persons:,} persons, {stats.auctions:,} auctions, "
        f"{stats.bids:,} bids) in {stats.elapsed_s:.1f} s = {stats.events_per_s:,.0f} ev/s"
    )


@bench_app.command("nexmark")
def bench_nexmark(
    query: list[str] = typer.Option(["q1"], help="Query (repeatable): q1 q2 q3 q5 q7 q8 q12."),
    rate: float = typer.Option(None, help="Fixed input rate; default 80% of the MST found."),
    duration: float = typer.Option(60, help="Seconds of the measured run."),
    mst: bool = typer.Option(True, help="Search the maximum sustainable throughput first."),
    start_rate: float = typer.Option(None, help="First MST rate (default 4k; 12k for joins)."),
    step: float = typer.Option(1.5, help="Rate multiplier between MST steps."),
    mst_duration: float = typer.Option(30, help="Seconds per MST step."),
    skew: float = typer.Option(0.5),
    overhead: bool = typer.Option(True, help="Measure the metrics-collection overhead first."),
    out: str = typer.Option("reports/bench_nexmark", help="Report prefix (.json and .png)."),
) -> None:
    """Throughput and p50/p99 latency per second, and the MST search."""
    from recovery_lib.bench.nexmark_bench import run_nexmark_bench

    try:
        run_nexmark_bench(
            [q.lower() for q in query],
            rate,
            duration,
            mst,
            out,
            console,
            start_rate=start_rate,
            step=step,
            mst_duration_s=mst_duration,
            skew=skew,
            overhead=overhead,
        )
    except ValueError as exc:
        _fail(exc)


@bench_app.command("recovery")
def bench_recovery(
    query: list[str] = typer.Option(["q3", "q8"], help="Query (repeatable)."),
    placement: list[str] = typer.Option(["local", "cluster"], help="local | cluster"),
    duration: float = typer.Option(150, help="Seconds of input per run."),
    fail_at: float = typer.Option(20, help="Driver SIGKILL this many seconds into the run."),
    nexmark_report: str = typer.Option(
        None, help="Take the local MST from this NexMark report instead of searching it."
    ),
    rate: float = typer.Option(None, help="Fixed input rate instead of 80% of a searched MST."),
    rates: str = typer.Option(None, help="Fixed rate per query, e.g. q3=48600,q8=32400."),
    append: bool = typer.Option(False, help="Add the results to an existing report."),
    mst_start: float = typer.Option(12_000, help="MST search: first rate (ev/s)."),
    mst_step: float = typer.Option(2.0, help="MST search: factor between tried rates."),
    mst_duration: float = typer.Option(20, help="MST search: seconds per tried rate."),
    out: str = typer.Option("reports/bench_recovery", help="Report prefix (.json and .png)."),
) -> None:
    """Native restart and recovery times at 80% of MST, local and on a standalone cluster."""
    from pathlib import Path

    from recovery_lib.bench.recovery_bench import run_recovery_bench

    try:
        run_recovery_bench(
            [q.lower() for q in query],
            placement,
            out,
            console,
            Path(nexmark_report) if nexmark_report else None,
            duration_s=duration,
            fail_at_s=fail_at,
            rate=rate,
            rates={
                k.strip().lower(): float(v)
                for k, v in (item.split("=", 1) for item in rates.split(","))
            }
            if rates
            else None,
            append=append,
            mst_start_rate=mst_start,
            mst_step=mst_step,
            mst_duration_s=mst_duration,
        )
    except (ValueError, KafkaLayerError) as exc:
        _fail(exc)


def _rate_map(text: str, needed: list[str]) -> dict[str, float]:
    try:
        rates = {k.strip().lower(): float(v) for k, v in (i.split("=", 1) for i in text.split(","))}
    except ValueError:
        raise ValueError(f"rates must look like q3=48600,q8=32400, got {text!r}") from None
    missing = sorted(set(needed) - set(rates))
    if missing:
        raise ValueError(f"no rate given for {missing} in {text!r}")
    return rates


@bench_app.command("standby")
def bench_standby(
    part: list[str] = typer.Option(
        ["compare", "sizes", "takeovers"], help="compare | sizes | takeovers (repeatable)."
    ),
    query: list[str] = typer.Option(["q3", "q8"], help="compare: queries (repeatable)."),
    rates: str = typer.Option(
        "q3=48600,q8=32400,prices=2000",
        help="Input rate per query (ev/s); the defaults are 80 % of the local MSTs of "
        "docs/benchmarks/bench_recovery.json.",
    ),
    duration: float = typer.Option(150, help="compare: seconds of input per run."),
    fail_at: float = typer.Option(20, help="compare/sizes: driver SIGKILL this far in."),
    mst_search: bool = typer.Option(
        False, help="compare: search the MSTs first (this state store) and run at 80 %."
    ),
    mst_start: float = typer.Option(8_000, help="MST search: first rate (ev/s), x1.5 steps."),
    state_store: str = typer.Option(
        "rocksdb", help="State store of every run, native and standby alike: rocksdb | hdfs."
    ),
    size_query: str = typer.Option("q3", help="sizes: the query."),
    size_rate: float = typer.Option(5000, help="sizes: input rate."),
    warmups: str = typer.Option(
        "2,30,90", help="sizes: seconds of input processed before the timed phase."
    ),
    takeover_query: list[str] = typer.Option(
        ["q3", "q8", "prices"], help="takeovers: queries (repeatable)."
    ),
    takeover_rates: str = typer.Option(
        "q3=5000,q8=5000,prices=1000", help="takeovers: input rate per query."
    ),
    repeat: int = typer.Option(4, help="takeovers: failures per query."),
    every: float = typer.Option(60, help="takeovers: seconds between failures."),
    append: bool = typer.Option(False, help="Add to an existing report."),
    out: str = typer.Option("reports/bench_standby", help="Report prefix (.json and .png)."),
) -> None:
    """Standby takeover vs native restart (same run), takeover time vs state size, shipped
    bytes vs changed state, and repeated takeovers judged by the oracle."""
    from recovery_lib.bench.standby_bench import PARTS, StandbyBench

    unknown = sorted(set(part) - set(PARTS))
    if unknown:
        _fail(ValueError(f"unknown part(s) {unknown}; choose from {list(PARTS)}"))
        return
    try:
        rate_map = _rate_map(rates, [q.lower() for q in query] if "compare" in part else [])
        takeover_map = _rate_map(
            takeover_rates,
            [q.lower() for q in takeover_query] if "takeovers" in part else [],
        )
    except ValueError as exc:
        _fail(exc)
        return
    import os

    from recovery_lib.settings import STATE_STORES, reload_settings

    if state_store not in STATE_STORES:
        _fail(ValueError(f"--state-store must be one of {sorted(STATE_STORES)}"))
        return
    os.environ["RECOVERY_STATE_STORE"] = state_store  # the job processes inherit it
    reload_settings()
    bench = StandbyBench(out, console, append=append)
    bench.report["state_store"] = state_store
    try:
        if "compare" in part:
            if mst_search:
                rate_map.update(bench.search_rates([q.lower() for q in query], mst_start))
            bench.compare([q.lower() for q in query], rate_map, duration, fail_at)
        if "sizes" in part:
            sizes = [float(w) for w in warmups.split(",")]
            bench.sizes(size_query.lower(), size_rate, sizes, 60.0, fail_at)
        if "takeovers" in part:
            bench.takeovers([q.lower() for q in takeover_query], takeover_map, repeat, every)
    except (ValueError, KafkaLayerError) as exc:
        _fail(exc)
    console.print(f"report: {out}.json, chart: {out}.png")


@bench_app.command("campaign")
def bench_campaign(
    mode: list[str] = typer.Option(["causal", "native"], help="causal | native (repeatable)."),
    out: str = typer.Option("reports/causal_campaign", help="Report prefix (.json and .png)."),
    case: list[str] = typer.Option(
        [], help="Run only these cases (e.g. lastbids-cluster; repeatable); default all."
    ),
    merge: bool = typer.Option(
        False, help="Keep the other cases' results from an existing report with this prefix."
    ),
) -> None:
    """20 injected failures of every kind per mode on the nondeterministic pipelines, judged by
    the oracle: causal logging against native Spark."""
    from recovery_lib.bench.causal_campaign import run_campaign, select_cases

    try:
        run_campaign(out, console, cases=select_cases(case), modes=tuple(mode), merge=merge)
    except (ValueError, KafkaLayerError) as exc:
        _fail(exc)


@bench_app.command("causal")
def bench_causal(
    pipeline: list[str] = typer.Option(["q12", "prices"], help="q12 | prices (repeatable)."),
    events: int = typer.Option(200_000, help="Backlog size for the capacity runs."),
    rounds: int = typer.Option(3, help="Capacity runs per variant (alternating off/on)."),
    duration: float = typer.Option(30, help="Seconds of each paced latency run."),
    out: str = typer.Option("reports/bench_causal", help="Report prefix (.json and .png)."),
) -> None:
    """Causal logging off vs on: capacity ratio and p50/p99 latency, in one run."""
    from recovery_lib.bench.causal_bench import run_causal_bench

    try:
        run_causal_bench(
            out,
            console,
            pipelines=[p.lower() for p in pipeline],
            events=events,
            rounds=rounds,
            latency_duration_s=duration,
        )
    except (ValueError, KafkaLayerError) as exc:
        _fail(exc)


@cluster_app.command("start")
def cluster_start(cores: int = typer.Option(2), memory: str = typer.Option("6g")) -> None:
    """Start a master and one worker (spark-class from the pyspark package), detached."""
    from recovery_lib.runtime.cluster import ClusterError, start_cluster

    try:
        state = start_cluster(cores=cores, memory=memory)
    except ClusterError as exc:
        _fail(exc)
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


@experiment_app.command("run")
def experiment_run(
    job: str = typer.Option(
        None,
        help="The job: module:attr of a JobSpec (its directory on PYTHONPATH), or a job of "
        "this repository's jobs/ by name (q1 ... q12, prices, lastbids).",
    ),
    query: str = typer.Option("q3", help="Same as --job (a name of jobs/)."),
    replay: list[str] = typer.Option(
        None,
        help="input=topic: replay records of an existing topic as the job's input instead of "
        "generated NexMark events (repeat per input).",
    ),
    replay_from: str = typer.Option(
        None, help='Offsets to replay from, JSON {"topic": {"0": 42}} (default: the start).'
    ),
    replay_to: str = typer.Option(
        None, help='Offsets to replay up to (exclusive), JSON (default: the end).'
    ),
    param: list[str] = typer.Option(None, help="name=value for the job (repeat)."),
    mode: str = typer.Option(
        "native", help="Recovery mode: native | causal | standby (later: active)."
    ),
    fail: str = typer.Option(
        "driver-kill",
        help="driver-kill | mid-write | executor-kill | task-retry | pause | none; several, "
        "comma-separated, take turns when --repeat > 1",
    ),
    fail_at: float = typer.Option(20.0, help="Seconds into the faulty run."),
    repeat: int = typer.Option(1, help="Number of failures in the faulty run."),
    every: float = typer.Option(20.0, help="Seconds between repeated failures."),
    jitter: float = typer.Option(0.0, help="Each failure up to this many seconds later."),
    rate: float = typer.Option(2000.0, help="Input events per second."),
    duration: float = typer.Option(60.0, help="Seconds of input."),
    seed: int = typer.Option(42),
    sink: str = typer.Option("dedup", help="at-least-once | dedup"),
    cluster: bool = typer.Option(
        False, help="Run against a standalone cluster (started if needed)."
    ),
    executor_cores: int = typer.Option(
        None, help="Cluster: cores per executor (1 = one executor per worker core)."
    ),
    keep_input: bool = typer.Option(
        False, help="Keep the generated input topics (deleted by default; outputs are kept)."
    ),
    report: str = typer.Option(
        "reports/experiment.json", help="JSON report; the PNG goes beside it."
    ),
) -> None:
    """A reference run and a faulty run on the same input, judged by the oracle."""
    from rich.live import Live
    from rich.text import Text

    from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report

    try:
        replay_map = _pairs(replay or [], "--replay")
        params = _pairs(param or [], "--param")
        replay_start = _offsets(replay_from, "--replay-from")
        replay_end = _offsets(replay_to, "--replay-to")
    except ValueError as exc:
        _fail(exc)
        return
    cfg = ExperimentConfig(
        query=job or query.lower(),
        replay=replay_map or None,
        replay_start=replay_start,
        replay_end=replay_end,
        params=params or None,
        mode=mode,
        fail=None if fail == "none" else fail,
        fail_at_s=fail_at,
        repeat=repeat,
        every_s=every,
        jitter_s=jitter,
        rate=rate,
        duration_s=duration,
        seed=seed,
        sink=sink,
        cluster=cluster,
        executor_cores=executor_cores,
        keep_input=keep_input,
    )
    started = time.monotonic()
    try:
        with (
            broker_mod.broker_for_run(console.print),
            Live(Text("starting ..."), console=console, refresh_per_second=4) as live,
        ):

            def show(message: str) -> None:
                live.update(Text(f"[{time.monotonic() - started:6.1f} s] {message}"))
                if message.startswith("verdict") or "never fired" in message:
                    console.print(message)  # stays on screen

            result = Experiment(cfg, console, progress=show).run()
    except (ValueError, KafkaLayerError) as exc:
        _fail(exc)
        return
    path = write_report(result, report)
    c = result["consistency"]
    console.print_json(
        json.dumps(
            {
                k: result[k]
                for k in (
                    "query",
                    "mode",
                    "failures",
                    "throughput_eps",
                    "latency_ms",
                    "restart_time_s",
                    "recovery_time_s",
                    "output_gap_s",
                )
            }
            | {
                "consistency": {
                    k: c[k]
                    for k in (
                        "outputs",
                        "reference_outputs",
                        "lost",
                        "duplicated",
                        "divergent",
                        "extra",
                        "guarantee",
                        "verdict",
                        "inconclusive_because",
                    )
                }
            },
            default=str,
        )
    )
    console.print(f"report: {path}, timeline: {path.with_suffix('.png')}")
    if c["verdict"] == "inconclusive":
        raise typer.Exit(code=EXIT_INCONCLUSIVE)
    if c["verdict"] != "consistent":
        raise typer.Exit(code=2)


@app.command("verify")
def verify(
    topic: str = typer.Argument(..., help="The run's sink topic."),
    reference_topic: str = typer.Option(None, help="The failure-free reference run's sink topic."),
    query: str = typer.Option(
        "q3",
        "--job",
        "--query",
        help="The job (module:attr or a name of jobs/) whose contract judges.",
    ),
    dedup: bool = typer.Option(True, help="Consumers read through the dedup reader."),
    events: int = typer.Option(
        None, help="Events generated: also check the query's reference results (DuckDB)."
    ),
    seed: int = typer.Option(42, help="Generator seed of the input (with --events)."),
    rate: float = typer.Option(10_000.0, help="Generator event-time rate (with --events)."),
    skew: float = typer.Option(0.5, help="Generator hot ratio (with --events)."),
    metrics: str = typer.Option(None, help="Metrics store to write the report to."),
    expectations: bool = typer.Option(
        False, help="Also run the query's Great Expectations suite on the output."
    ),
) -> None:
    """The oracle: lost, extra, duplicated and divergent outputs and the guarantee class; exits
    1 when inconsistent (or when --expectations finds a failed expectation), 4 when
    inconclusive."""
    from recovery_lib.io.sinks.dedup_reader import read_topic
    from recovery_lib.job.spec import resolve_job
    from recovery_lib.nexmark.config import GeneratorConfig
    from recovery_lib.verify.inputs import InputView
    from recovery_lib.verify.oracle import judge

    if reference_topic is None and events is None:
        _fail(ValueError("give --reference-topic, --events, or both: nothing to compare against"))
        return
    try:
        spec = resolve_job(query)
        generator = GeneratorConfig(seed=seed, event_time_rate=rate, hot_ratio=skew)
        run = list(read_topic(topic))
        ref = list(read_topic(reference_topic)) if reference_topic else None
    except (KafkaLayerError, ValueError) as exc:
        _fail(exc)
        return
    inputs = InputView({}, generator=generator, events=events) if events else None
    report = judge(spec.name, spec.contract, run, ref, dedup, inputs).to_dict()
    gx_result = None
    if expectations:
        from recovery_lib.verify.expectations import validate_output

        gx_result = validate_output(spec.name, run, dedup, topic)
        report["expectations"] = gx_result.to_dict()
    if metrics:
        from recovery_lib.metrics.store import MetricsStore
        from recovery_lib.verify.expectations import record

        store = MetricsStore(metrics)
        store.add_consistency(f"verify:{topic}", reference_topic, report)
        if gx_result is not None:
            record(store, f"verify:{topic}", gx_result)
        store.close()
    console.print_json(json.dumps(report, default=str))
    if report["verdict"] == "inconclusive":
        raise typer.Exit(code=EXIT_INCONCLUSIVE)
    if report["verdict"] != "consistent" or (gx_result is not None and not gx_result.success):
        raise typer.Exit(code=1)


# -- operations: jobs, GC, reports, expectations -------------------------------------------------


@job_app.command("list")
def job_list() -> None:
    """The configured jobs and their daemon status."""
    from recovery_lib.ops import daemon
    from recovery_lib.ops.config import load_jobs

    try:
        jobs = load_jobs()
    except ValueError as exc:
        _fail(exc)
        return
    rows = {}
    for name, job in jobs.items():
        status = daemon.read_status(job)
        rows[name] = {
            "query": job.query,
            "mode": job.mode,
            "placement": job.placement,
            "status": status.status if status else "never started",
            "alive": status.alive if status else False,
        }
    console.print_json(json.dumps(rows))


@job_app.command("start")
def job_start(name: str) -> None:
    """Start the job's supervisor daemon (detached); no-op if it is alive."""
    from recovery_lib.ops import daemon

    try:
        console.print_json(json.dumps(daemon.describe(daemon.start(name))))
    except (ValueError, RuntimeError) as exc:
        _fail(exc)


@job_app.command("status")
def job_status(name: str) -> None:
    """The daemon's status as JSON; exit 1 when the job failed or its daemon is gone."""
    from recovery_lib.ops import daemon

    try:
        status = daemon.check(name)
    except (ValueError, RuntimeError) as exc:
        _fail(exc)
        return
    console.print_json(json.dumps(daemon.describe(status)))
    if status.status == "failed":
        raise typer.Exit(code=1)


@job_app.command("stop")
def job_stop(name: str) -> None:
    """SIGTERM the daemon: the job's queries stop, then the daemon."""
    from recovery_lib.ops import daemon

    try:
        console.print_json(json.dumps(daemon.describe(daemon.stop(name))))
    except ValueError as exc:
        _fail(exc)


@app.command("gc")
def gc(
    name: str = typer.Argument(..., help="A configured job."),
    dry_run: bool = typer.Option(False, help="List what would be removed; change nothing."),
    keep: int = typer.Option(None, help="Committed batches to keep (default: the job's)."),
    delete_input_records: bool = typer.Option(False, help="Also DeleteRecords on inputs."),
) -> None:
    """Checkpoint GC of one job (what the checkpoint_gc DAG runs)."""
    from recovery_lib.ops.gc import gc_job

    try:
        result = gc_job(name, dry_run, keep, delete_input_records)
    except ValueError as exc:
        _fail(exc)
        return
    console.print_json(json.dumps(result, default=str))
    if result["errors"]:
        raise typer.Exit(code=1)


@standby_app.command("ship")
def standby_ship(
    name: str = typer.Argument(None, help="A configured job with `standby: true`."),
    checkpoint: str = typer.Option(None, help="Or: a query checkpoint directory to ship ..."),
    to: str = typer.Option(None, help="... into this standby directory."),
) -> None:
    """One state-shipping round: a new checksummed copy if the primary committed since the
    last one (what the state_shipping DAG runs)."""
    from dataclasses import asdict

    from recovery_lib.ha.standby.shipping import Shipper
    from recovery_lib.ops.shipping import NoStandby, ship_job

    if name:
        try:
            result = ship_job(name)
        except (NoStandby, ValueError) as exc:
            _fail(exc)
            return
    elif checkpoint and to:
        if not Path(checkpoint, "offsets").is_dir():
            _fail(ValueError(f"{checkpoint} is not a Spark query checkpoint (no offsets/ in it)"))
            return
        shipper = Shipper(checkpoint, to)
        shipped = shipper.ship()
        result = {
            "shipped": asdict(shipped) if shipped else None,
            "lag": asdict(shipper.lag()),
        }
    else:
        _fail(ValueError("name a configured job, or give both --checkpoint and --to"))
        return
    console.print_json(json.dumps(result, default=str))


@standby_app.command("status")
def standby_status(
    name: str = typer.Argument(None, help="A configured job with `standby: true`."),
    checkpoint: str = typer.Option(None, help="Or: the primary's query checkpoint ..."),
    to: str = typer.Option(None, help="... and the standby directory."),
) -> None:
    """The standby's copies (verified), the newest usable one and the lag behind the primary."""
    from dataclasses import asdict

    from recovery_lib.ha.standby.shipping import Shipper, latest_complete
    from recovery_lib.ops.shipping import NoStandby, shipper_for

    try:
        shipper = shipper_for(name) if name else Shipper(checkpoint, to)
    except (NoStandby, ValueError, TypeError) as exc:
        _fail(
            exc if not isinstance(exc, TypeError) else ValueError("name a job or --checkpoint/--to")
        )
        return
    rejected: list = []
    usable = latest_complete(shipper.dir, verify=True, rejected=rejected)
    console.print_json(
        json.dumps(
            {
                "usable_copy": {"seq": usable.seq, "batch": usable.batch, "bytes": usable.bytes}
                if usable
                else None,
                "rejected_copies": [{"seq": s, "problems": p[:5]} for s, p in rejected],
                "lag": asdict(shipper.lag()),
            }
        )
    )


@app.command("expectations")
def expectations_cmd(
    metrics: str = typer.Option(None, help="Metrics store (default: the project's)."),
) -> None:
    """Run the metrics-table Great Expectations suites; exit 1 on a failed expectation."""
    from pathlib import Path

    from recovery_lib.metrics.store import MetricsStore
    from recovery_lib.settings import get_settings
    from recovery_lib.verify.expectations import record, validate_metrics

    path = Path(metrics) if metrics else get_settings().home / "metrics.duckdb"
    if not path.exists():
        _fail(ValueError(f"no metrics store at {path}"))
        return
    results = validate_metrics(path)
    with MetricsStore(path) as store:
        for result in results:
            record(store, None, result)
    console.print_json(json.dumps([r.to_dict() for r in results], default=str))
    if any(not r.success for r in results):
        raise typer.Exit(code=1)


if __name__ == "__main__":
    app()
