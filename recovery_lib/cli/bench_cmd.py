"""``recovery bench io|nexmark|recovery|standby|campaign|causal|sinks|cec``: benchmarks that
write a JSON report and a PNG chart (bench/)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer

from recovery_lib.cli.output import abort, console
from recovery_lib.errors import ConfigurationError
from recovery_lib.kafka.exceptions import KafkaLayerError

bench_app = typer.Typer(help="Benchmarks that write JSON + PNG reports.", no_args_is_help=True)


@bench_app.callback()
def bench_broker(ctx: typer.Context) -> None:
    """Every benchmark talks to a broker: ``KAFKA_BOOTSTRAP``, the embedded one if it runs, or
    one started for this command and stopped when it ends."""
    from recovery_lib.kafka.broker import broker_for_run

    if ctx.resilient_parsing or "--help" in sys.argv[1:]:
        return  # the subcommand's arguments are not parsed yet: help needs no broker
    try:
        ctx.with_resource(broker_for_run(console.print))
    except KafkaLayerError as exc:
        abort(exc)


@bench_app.command("io")
def bench_io(
    events: int = typer.Option(300_000, help="Events per measured path."),
    out: str = typer.Option("reports/bench_io", help="Report prefix (.json and .png)."),
) -> None:
    """Throughput of source -> noop / stateful count / Kafka sink, broker ceiling, latency."""
    from recovery_lib.bench.io_bench import run_io_bench

    run_io_bench(events=events, out_prefix=out, console=console)


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
        abort(exc)


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
        abort(exc)


def _rate_map(text: str, needed: list[str]) -> dict[str, float]:
    try:
        rates = {k.strip().lower(): float(v) for k, v in (i.split("=", 1) for i in text.split(","))}
    except ValueError:
        raise ConfigurationError(f"rates must look like q3=48600,q8=32400, got {text!r}") from None
    missing = sorted(set(needed) - set(rates))
    if missing:
        raise ConfigurationError(
            f"no rate given for {missing} in {text!r}; add QUERY=RATE for each"
        )
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
        abort(ValueError(f"unknown part(s) {unknown}; choose from {list(PARTS)}"))
        return
    try:
        rate_map = _rate_map(rates, [q.lower() for q in query] if "compare" in part else [])
        takeover_map = _rate_map(
            takeover_rates,
            [q.lower() for q in takeover_query] if "takeovers" in part else [],
        )
    except ValueError as exc:
        abort(exc)
        return
    from recovery_lib.settings import STATE_STORES, reload_settings

    if state_store not in STATE_STORES:
        abort(ValueError(f"--state-store must be one of {sorted(STATE_STORES)}"))
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
        abort(exc)
    console.print(f"report: {out}.json, chart: {out}.png")


@bench_app.command("campaign")
def bench_campaign(
    suite: str = typer.Option(
        "causal",
        help="causal (causal vs native) | release (release and transactional sinks vs "
        "at-least-once) | faults (network, broker, disk and poison faults across the recovery "
        "modes) | brokers (partition leaders killed in a three-node Kafka cluster, per sink) | "
        "tables (Delta and Iceberg table sinks vs plain appends).",
    ),
    mode: list[str] = typer.Option(
        [], help="Only the variants with this mode or sink (repeatable), e.g. causal, release."
    ),
    out: str = typer.Option(None, help="Report prefix (.json and .png); reports/<suite>_campaign."),
    case: list[str] = typer.Option(
        [], help="Run only these cases (e.g. lastbids-cluster; repeatable); default all."
    ),
    merge: bool = typer.Option(
        False, help="Keep the other cases' results from an existing report with this prefix."
    ),
) -> None:
    """20 injected failures of every kind per variant, judged by the oracle: causal logging
    against native Spark on the nondeterministic jobs, the release sink against
    at-least-once read by a plain consumer, or faults beyond a killed process across the
    recovery modes."""
    from recovery_lib.bench.campaign import SUITE_TIMING, run_campaign, select

    try:
        cases, variants = select(suite, case, mode)
        out = out or f"reports/{suite}_campaign"
        timing = SUITE_TIMING.get(suite, {})
        run_campaign(out, console, cases=cases, variants=variants, merge=merge, **timing)
    except (ValueError, KafkaLayerError) as exc:
        abort(exc)


@bench_app.command("causal")
def bench_causal(
    pipeline: list[str] = typer.Option(["q12", "prices"], help="q12 | prices (repeatable)."),
    events: int = typer.Option(200_000, help="Backlog size for the capacity runs."),
    rounds: int = typer.Option(7, help="Capacity runs per variant (alternating off/on)."),
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
        abort(exc)


@bench_app.command("sinks")
def bench_sinks(
    job: list[str] = typer.Option(["q1", "q3"], help="Deterministic jobs (repeatable)."),
    intervals: str = typer.Option("1,2,5,10", help="Trigger intervals (s), comma-separated."),
    rates: str = typer.Option(
        "3000", help="Input events per second, comma-separated (every sink at each)."
    ),
    duration: float = typer.Option(40, help="Seconds of input per point (at least 6 intervals)."),
    out: str = typer.Option("reports/bench_sinks", help="Report prefix (.json and .png)."),
) -> None:
    """Latency to visibility of at-least-once, release, two-phase and transactional sinks by
    trigger interval and rate, one after another in one application per point (FlameStream
    Figs. 10-12; transactional only where the broker hides aborted records)."""
    from recovery_lib.bench.sink_bench import run_sink_bench

    try:
        values = [float(x) for x in intervals.split(",") if x.strip()]
        per_s = [float(x) for x in rates.split(",") if x.strip()]
    except ValueError:
        abort(
            ValueError(
                f"--intervals and --rates take numbers separated by commas, got {intervals!r} "
                f"and {rates!r}"
            )
        )
    try:
        run_sink_bench(job, values, per_s, duration, out, console)
    except (ValueError, KafkaLayerError) as exc:
        abort(exc)


@bench_app.command("tables")
def bench_tables(
    intervals: str = typer.Option("1,2,5", help="Trigger intervals (s), comma-separated."),
    rate: float = typer.Option(3000, help="Input events per second (the same for every run)."),
    duration: float = typer.Option(30, help="Seconds of input per point (at least 6 intervals)."),
    out: str = typer.Option("reports/bench_tables", help="Report prefix (.json and .png)."),
) -> None:
    """Per-batch time of the Delta and Iceberg table sinks against the Parquet sink, by
    trigger interval, one after another in one application (goal: <= 1.5x Parquet)."""
    from recovery_lib.bench.table_bench import run_table_bench

    try:
        values = [float(x) for x in intervals.split(",") if x.strip()]
    except ValueError:
        abort(ValueError(f"--intervals takes seconds separated by commas, got {intervals!r}"))
    try:
        run_table_bench(values, rate, duration, out, console)
    except (ValueError, KafkaLayerError) as exc:
        abort(exc)


@bench_app.command("cec")
def bench_cec(
    scale: float = typer.Option(1.0, help="Multiplies every backlog (0.1 for a quick look)."),
    out: str = typer.Option("reports/bench_cec", help="Report prefix (.json and .png)."),
    only: str = typer.Option(
        "", help="ec-load: only the EC-load sweep, added to the existing report at --out."
    ),
) -> None:
    """CEC against Spark's HDFS and RocksDB state checkpointing on one aggregate: overhead,
    recovery cost by Q, U and CP, Spark's own restart, and EC-load against the extent
    (paper 003, Figs. 5-9)."""
    from recovery_lib.bench.cec_bench import add_ec_load_sweep, run_cec_bench

    if scale <= 0:
        abort(ValueError(f"--scale must be positive, got {scale}"))
    if only not in ("", "ec-load"):
        abort(ValueError(f"--only takes ec-load, got {only!r}"))
    try:
        if only:
            add_ec_load_sweep(out, console)
        else:
            run_cec_bench(out, console, scale=scale)
    except (ValueError, RuntimeError, KafkaLayerError) as exc:
        abort(exc)


@bench_app.command("protocols")
def bench_protocols(
    suite: list[str] = typer.Option(
        ["uniform", "recovery", "cyclic"],
        help="uniform (capacity, overheads), recovery (local vs global), cyclic, skew.",
    ),
    pipeline: list[str] = typer.Option([], help="Only these pipelines (default: the suite's)."),
    out: str = typer.Option("reports/bench_protocols", help="Report prefix (.json and .png)."),
    merge: bool = typer.Option(
        False,
        help="Keep the other suites and trials of an existing report, and its MST searches "
        "(the paced trials run now reuse them).",
    ),
    load: list[float] = typer.Option(
        [], help="Only paced trials at these fractions of the MST (e.g. --load 0.8)."
    ),
    protocol: list[str] = typer.Option(
        [], help="Only these protocols' trials (none, coor, unc, cic), e.g. to run one again."
    ),
    hot: list[float] = typer.Option(
        [], help="Only skewed trials at these hot ratios (e.g. --hot 0.3)."
    ),
    rederive: bool = typer.Option(
        False,
        help="Run nothing: recompute the recovery times of the report's trials from their "
        "per-second latency with the current definition, and redraw the chart.",
    ),
) -> None:
    """COOR, UNC and CIC (and no protocol) on pipelines of Spark stages: capacity, latency,
    checkpoint time, invalid and forced checkpoints, message overhead, recovery (paper 001)."""
    from recovery_lib.bench.protocol_bench import rederive_report, run_protocol_bench

    try:
        if rederive:
            rederive_report(out, console)
            return
        run_protocol_bench(
            suite,
            out,
            console,
            pipeline or None,
            merge=merge,
            loads=load or None,
            protocols=protocol or None,
            hot_ratios=hot or None,
        )
    except (ValueError, RuntimeError, KafkaLayerError) as exc:
        abort(exc)


@bench_app.command("replication")
def bench_replication(
    part: list[str] = typer.Option(
        ["masking", "cost", "heartbeat", "slow", "kills", "zombie"],
        help="masking | cost | heartbeat | slow | kills | zombie (repeatable).",
    ),
    query: list[str] = typer.Option(["q3", "q8", "prices"], help="masking, cost: jobs."),
    rates: str = typer.Option(
        "q3=5000,q8=2000,prices=1000",
        help="Input rate per job (ev/s) for masking and cost (two replicas share the host: "
        "q8 at 5,000 ev/s gave no output within 50 s here).",
    ),
    duration: float = typer.Option(
        120, help="masking, cost: seconds of input per run (80 s after the kill to recover)."
    ),
    fail_at: float = typer.Option(40, help="masking: the kill this far in (30 s before it)."),
    hb_query: str = typer.Option("q1", help="heartbeat, slow, zombie: the job."),
    hb_rate: float = typer.Option(2000, help="heartbeat, slow, zombie: input rate."),
    periods: str = typer.Option("0.25,0.5,1,2", help="heartbeat: periods (s)."),
    delays: str = typer.Option("0,0.5,1,2", help="slow: one partition's heartbeat delays (s)."),
    kill_jobs: list[str] = typer.Option(["q3", "prices"], help="kills: jobs."),
    repeat: int = typer.Option(3, help="kills: kills per run."),
    every: float = typer.Option(45, help="kills: seconds between kills."),
    pause: float = typer.Option(6, help="zombie: seconds the leader is paused (lease 3 s)."),
    liverobin_period: float = typer.Option(
        8.0,
        help="masking, cost, kills: LiveRobin's heartbeat period (s). It must exceed a batch's "
        "cost, or the replicas never catch up (q3 with two replicas here: 4-6 s a batch).",
    ),
    append: bool = typer.Option(False, help="Add to an existing report."),
    reuse: bool = typer.Option(
        False,
        help="Take each run whose experiment report exists at --out from it instead of running "
        "it again (resume an interrupted invocation with the same settings).",
    ),
    rederive: bool = typer.Option(
        False, help="Run nothing: recompute the report's comparisons and redraw its chart."
    ),
    out: str = typer.Option("reports/bench_replication", help="Report prefix (.json, .png)."),
) -> None:
    """KaZoo and LiveRobin against native restart and standby takeover (a replica's death at the
    sink), their cost, LiveRobin's heartbeat period and a slow partition, repeated kills and a
    zombie leader, every run judged by the oracle."""
    from recovery_lib.bench.replication_bench import PARTS, ReplicationBench

    unknown = sorted(set(part) - set(PARTS))
    if unknown:
        abort(ValueError(f"unknown part(s) {unknown}; choose from {list(PARTS)}"))
        return
    jobs = [q.lower() for q in query]
    try:
        rate_map = _rate_map(rates, jobs if {"masking", "cost"} & set(part) else [])
        kill_map = _rate_map(rates, [j.lower() for j in kill_jobs] if "kills" in part else [])
        hb_periods = [float(p) for p in periods.split(",")]
        slow_delays = [float(d) for d in delays.split(",")]
    except ValueError as exc:
        abort(exc)
        return
    bench = ReplicationBench(
        out,
        console,
        append=append or rederive or reuse,
        liverobin_period_s=liverobin_period,
        reuse=reuse,
    )
    if rederive:
        bench.rederive()
        console.print(f"report: {out}.json, chart: {out}.png")
        return
    try:
        if "masking" in part:
            bench.masking(jobs, rate_map, duration, fail_at)
        if "cost" in part:
            bench.cost(jobs, rate_map, duration)
        if "heartbeat" in part:
            bench.heartbeat(hb_query, hb_rate, hb_periods, 40.0)
        if "slow" in part:
            bench.slow(hb_query, hb_rate, slow_delays, 40.0)
        if "kills" in part:
            bench.kills([j.lower() for j in kill_jobs], kill_map, repeat, every)
        if "zombie" in part:
            bench.zombie(hb_query, hb_rate, pause)
    except (ValueError, KafkaLayerError) as exc:
        abort(exc)
    console.print(f"report: {out}.json, chart: {out}.png")


@bench_app.command("compare")
def bench_compare(
    job: str = typer.Option("q3", help="The job: a name of jobs/ or a user's module:attr."),
    variant: list[str] = typer.Option(
        None,
        help="native | causal | standby | standby-hot | cec | kazoo | liverobin | release | "
        "two-phase | coor | unc | cic | coor-shared | unc-shared | cic-shared (the stages "
        "as queries of one Spark application) (repeatable; default: all).",
    ),
    rate: float = typer.Option(
        2_000,
        help="Input rate (ev/s): replicated variants run two "
        "replicas on the same cores, so keep it below half the MST.",
    ),
    duration: float = typer.Option(90, help="Seconds of input per run."),
    fail_at: float = typer.Option(40, help="The job's process is SIGKILLed this far in."),
    seed: int = typer.Option(42, help="The generator's seed: the same input for every variant."),
    pipeline: str = typer.Option(
        None, help="coor, unc, cic: the pipeline (default: the one whose last stage is the job)."
    ),
    liverobin_period: float = typer.Option(8.0, help="LiveRobin's heartbeat period (s)."),
    kazoo_trigger: float = typer.Option(
        None, help="KaZoo's leader's trigger (s; default: batches back to back)."
    ),
    out: str = typer.Option("reports/bench_compare", help="Report prefix (.json, .png)."),
) -> None:
    """The same job, input and failure under every recovery mode: restart and recovery time,
    output gap, p99 after/before, latency without a failure against native, processes and
    memory, and the oracle's guarantee class, in one report."""
    from recovery_lib.bench.compare_bench import VARIANTS, CompareBench, CompareConfig
    from recovery_lib.runtime.progress import progress_display

    names = list(variant or VARIANTS)
    cfg = CompareConfig(
        job, rate, duration, fail_at, seed, liverobin_period, pipeline,
        kazoo_trigger_s=kazoo_trigger,
    )  # fmt: skip
    # A faulty and a reference run of duration seconds each, plus start-up and drain.
    estimate_min = len(names) * (2 * duration + 60) / 60
    console.print(f"{len(names)} variants of {job}, about {estimate_min:.0f} min")
    bench = CompareBench(cfg, out, console)
    with progress_display(console, transient=True) as progress:
        task = progress.add_task("compare", total=len(names))

        def step(done: int, name: str) -> None:
            progress.update(task, description=f"{name} ({done + 1}/{len(names)})", completed=done)

        try:
            bench.run(names, progress=step)
        except (ValueError, KafkaLayerError) as exc:
            abort(exc)
        progress.update(task, completed=len(names))
    console.print(f"report: {out}.json, chart: {out}.png")


@bench_app.command("state")
def bench_state(
    sizes: str = typer.Option(
        "10000,100000,1000000", help="Distinct keys in state per point, comma-separated."
    ),
    store: list[str] = typer.Option(
        None, help="rocksdb | hdfs (repeatable; default both; hdfs up to --hdfs-max-keys)."
    ),
    variant: list[str] = typer.Option(
        None, help="native | standby | standby-hot | kazoo | liverobin (repeatable; default all)."
    ),
    hdfs_max_keys: int = typer.Option(
        1_000_000, help="Largest state for the HDFS-backed store (it keeps state in the heap)."
    ),
    rate: float = typer.Option(2_000, help="Timed input rate (ev/s), the same at every size."),
    duration: float = typer.Option(90, help="Seconds of timed input per run."),
    fail_at: float = typer.Option(40, help="The job's process is SIGKILLed this far in."),
    seed: int = typer.Option(42, help="The input's seed: the same events at every point."),
    append: bool = typer.Option(
        False, help="Keep the points of an existing report (re-measured points are replaced)."
    ),
    keep_workdirs: bool = typer.Option(
        False, help="Keep each point's checkpoints (a 10^7-key point's are gigabytes)."
    ),
    cuts: str = typer.Option(
        "on",
        help="off,on: run each restarting variant without and with the restart cuts (the "
        "before and after, in one report); on: as the product runs; spare: with a spare "
        "process of the job started ahead (RECOVERY_SUPERVISOR_SPARE).",
    ),
    job: str = typer.Option(
        "keyed_state", help="Another job (e.g. q3): on its own input, one point per store."
    ),
    event_log: bool = typer.Option(
        False,
        help="Write Spark's event log in each point and take the restart's first micro-batch "
        "apart (a waterfall per point: <out>_first_batch.png).",
    ),
    out: str = typer.Option("reports/bench_state", help="Report prefix (.json and .png)."),
) -> None:
    """Recovery against state size: a keyed job with 10^4 .. 10^7 keys in state, one SIGKILL
    after the state is built, under native, standby, kazoo and liverobin, with RocksDB and
    the HDFS-backed store: restart, recovery, output gap, state load and where a restart's
    time goes, and the oracle's verdict per point."""
    from recovery_lib.bench.state_bench import STATE_VARIANTS, STORES, StateBench, StateConfig
    from recovery_lib.runtime.progress import progress_display

    try:
        keys = tuple(int(x) for x in sizes.split(",") if x.strip())
    except ValueError:
        abort(f"--sizes takes integers separated by commas, got {sizes!r}")
        return
    cfg = StateConfig(
        job=job,
        cuts=tuple(c.strip() for c in cuts.split(",") if c.strip()),
        sizes=keys,
        stores=tuple(store or STORES),
        variants=tuple(variant or STATE_VARIANTS),
        hdfs_max_keys=hdfs_max_keys,
        rate=rate,
        duration_s=duration,
        fail_at_s=fail_at,
        seed=seed,
        keep_workdirs=keep_workdirs,
        event_log=event_log,
    )
    points = cfg.points()
    # Two runs of duration seconds per point, plus the warm-up and start-up.
    estimate_min = sum(2 * duration + 90 + 2 * k / 20_000 for _, k, _, _ in points) / 60
    console.print(f"{len(points)} points, about {estimate_min:.0f} min")
    bench = StateBench(cfg, out, console)
    if append:
        bench.load()
    with progress_display(console, transient=True) as progress:
        task = progress.add_task("state", total=len(points))

        def step(done: int, name: str) -> None:
            progress.update(task, description=f"{name} ({done + 1}/{len(points)})", completed=done)

        try:
            bench.run(progress=step)
        except (ValueError, KafkaLayerError) as exc:
            abort(exc)
        progress.update(task, completed=len(points))
    console.print(f"report: {out}.json, chart: {out}.png")


@bench_app.command("oracle")
def bench_oracle(
    sizes: str = typer.Option(
        "10000,100000,1000000,10000000", help="Outputs per side, comma-separated."
    ),
    out: str = typer.Option("reports/bench_oracle", help="Report prefix (.json and .png)."),
) -> None:
    """Time and peak memory of the oracle (Exact, Fields, KeyTotals) by outputs per side,
    against a plain consumer reading both topics."""
    from recovery_lib.bench.oracle_bench import run_oracle_bench

    try:
        values = tuple(int(x) for x in sizes.split(",") if x.strip())
    except ValueError:
        abort(ValueError(f"--sizes takes counts separated by commas, got {sizes!r}"))
        return
    from recovery_lib.runtime.logs import ProgressThrottle

    try:  # a line per phase (topic, size) and per 10 s, not per 100k records
        report = run_oracle_bench(values, out, ProgressThrottle(console.print))
    except (ValueError, KafkaLayerError, RuntimeError) as exc:
        abort(exc)
        return
    console.print_json(json.dumps(report["goals"]))
    console.print(f"report: {out}.json, chart: {out}.png")


@bench_app.command("realtime")
def bench_realtime(
    seconds: float = typer.Option(20.0, help="Seconds of input per configuration and rate."),
    out: str = typer.Option("reports/bench_realtime", help="Report prefix (.json and .png)."),
) -> None:
    """Spark's real-time mode for stateless stages: q1 and a 3-stage pipeline at 1,000 and
    5,000 ev/s against micro-batches, then the real-time pipeline with a stage killed (its
    restart, output gap and the oracle's verdict, plain and through the dedup reader)."""
    import tempfile
    from pathlib import Path

    from recovery_lib.bench.realtime_bench import run_realtime_bench
    from recovery_lib.runtime.logs import ProgressThrottle

    if seconds <= 0:
        abort(ValueError("--seconds must be positive"))
        return
    with tempfile.TemporaryDirectory(prefix="bench-realtime-") as workdir:
        try:
            report = run_realtime_bench(
                out, Path(workdir), seconds=seconds, progress=ProgressThrottle(console.print)
            )
        except (ValueError, KafkaLayerError, RuntimeError) as exc:
            abort(exc)
            return
    console.print_json(json.dumps(report["summary"]))
    console.print(f"report: {out}.json, chart: {out}.png")


@bench_app.command("batch-cost")
def bench_batch_cost(
    variant: list[str] = typer.Option(
        None, help="spark | filesystem | quick-jit | both (repeatable; default all)."
    ),
    warmup: float = typer.Option(40.0, help="Seconds each query runs before the window."),
    window: float = typer.Option(60.0, help="Seconds measured per variant."),
    out: str = typer.Option("reports/bench_batch_cost", help="Report prefix (.json, .png)."),
) -> None:
    """The driver's CPU per micro-batch of a small stateful query under Spark's defaults and
    under the session's cuts (checkpoint files through Hadoop's FileSystem API, C1 only), each
    in a JVM of its own, one after another."""
    from recovery_lib.bench.batch_cost_bench import VARIANTS, run_batch_cost_bench
    from recovery_lib.errors import RecoveryError
    from recovery_lib.runtime.progress import progress_display

    names = list(variant or VARIANTS)
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown or warmup < 0 or window <= 0:
        abort(ValueError(f"variants are {', '.join(VARIANTS)}; window > 0, warmup >= 0"))
        return
    console.print(
        f"{len(names)} variants, about {len(names) * (warmup + window + 20) / 60:.0f} min"
    )
    with progress_display(console, transient=True) as progress:
        task = progress.add_task("batch cost", total=len(names))

        def step(done: int, name: str) -> None:
            progress.update(task, description=f"{name} ({done + 1}/{len(names)})", completed=done)

        try:
            report = run_batch_cost_bench(out, names, warmup, window, progress=step)
        except RecoveryError as exc:
            abort(exc)
            return
        progress.update(task, completed=len(names))
    for row in report["results"]:
        versus = "-" if row["cpu_vs_spark"] is None else f"{row['cpu_vs_spark']}x"
        console.print(
            f"{row['variant']:>10}: {row['driver_cpu_s_per_batch']:.3f} CPU s per batch "
            f"({versus} Spark's defaults), "
            f"median batch {row['median_batch_ms']:.0f} ms"
        )
    console.print(f"report: {out}.json, chart: {out}.png")
