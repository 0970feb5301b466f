"""``recovery bench sinks``: when an output becomes visible to a consumer, per sink mode and
trigger interval (FlameStream paper 004, Figs. 10-12, on Spark).

For every (job, trigger interval, input rate) the job runs once per sink mode (at-least-once,
release, two-phase, and transactional where the broker hides aborted records), one after
another in one Spark application, on the same generated input at the same rate (running them
side by side overloaded this 2-core machine: every sink then measured the backlog, 15-19 s,
not the sink). Latency = the time a record becomes visible to the mode's consumer (its own
append time; for two-phase its batch's commit record's; for transactional its transaction's
commit, which a read_committed consumer waits for) minus the ingest time of the newest input
it depends on. The first ``warmup`` seconds of outputs are left
out (Python workers and code generation).

Where Spark changes the picture: Spark commits a checkpoint with every micro-batch, so the
checkpoint interval *is* the trigger interval and every mode waits for the next batch to start;
two-phase holds outputs further, until every task of the batch finished and the driver
committed, while release shows them as each task finishes.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.machine import broker_description
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError, JobFailed
from recovery_lib.files import write_json_report
from recovery_lib.io.sinks.modes import output_partitions, visibility_gate
from recovery_lib.job import JobOptions, write_output
from recovery_lib.job.runner import check_sink_mode
from recovery_lib.job.spec import resolve_job
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.capabilities import hides_aborted_records
from recovery_lib.metrics.latency import LatencyCollector
from recovery_lib.metrics.stats import percentile
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.producer import ensure_topics, produce_events
from recovery_lib.runtime.logs import ProgressThrottle
from recovery_lib.settings import get_settings
from recovery_lib.spark.session import build_session

SINKS = ("at_least_once", "release", "two_phase", "transactional")
# What the paper's goal compares: release within 10 % of at-least-once at every interval.
RELEASE_GOAL = 1.10


@dataclass(frozen=True)
class Point:
    """One point of the benchmark: a job at a trigger interval and input rate."""

    job: str
    interval_s: float
    rate: float
    duration_s: float  # seconds of paced input
    warmup_s: float  # outputs visible this early are left out
    partitions: int = 2
    seed: int = 42


def measure(
    spark: Any, point: Point, workdir: Path, console: Console, sinks: tuple[str, ...] = SINKS
) -> dict[str, Any]:
    """One point: the job with each sink in turn, in one application, on the same paced input
    (same seed and rate)."""
    result: dict[str, Any] = {"interval_s": point.interval_s, "rate_eps": point.rate}
    for sink in sinks:
        result[sink] = _measure_sink(spark, point, sink, workdir, console)
    base = result["at_least_once"]["p50_ms"]
    for sink in sinks[1:]:
        p50 = result[sink]["p50_ms"]
        result[sink]["p50_over_at_least_once"] = round(p50 / base, 3) if base and p50 else None
    return result


def _measure_sink(
    spark: Any, point: Point, sink: str, workdir: Path, console: Console
) -> dict[str, Any]:
    job, interval_s, rate = point.job, point.interval_s, point.rate
    spec = resolve_job(job)
    prefix = f"bench.sinks.{spec.name}.{sink}.{uuid.uuid4().hex[:6]}"
    gen = GeneratorConfig(
        topic_prefix=prefix, seed=point.seed, event_time_rate=rate, partitions=point.partitions
    )
    admin = TopicAdmin()
    ensure_topics(gen, admin)
    opts = JobOptions(
        query=f"{spec.name}_{sink}",
        prefix=gen.topic_prefix,
        partitions=gen.partitions,
        checkpoint_dir=str(workdir / prefix),
        output_topic=f"{prefix}.out",
        sink_mode=sink,
        trigger_interval=f"{interval_s:g} seconds",
    )
    admin.create(opts.out_topic, output_partitions(sink, gen.partitions))
    admin.create(opts.dlq_topic, 1)
    collector = LatencyCollector(opts.out_topic, prefix, None, gate=visibility_gate(sink)).start()
    query = write_output(spec.build(spark, opts), opts)
    try:
        t0_ms, produced = feed_paced(
            query,
            gen,
            point.duration_s,
            f"{job} with sink {sink}",
            console,
            lambda: f"every {interval_s:g} s: {len(collector.samples):,} outputs",
        )
        _drain(query, collector, interval_s, console)
        time.sleep(2.0)  # the last outputs and commit records reach the collector
    finally:
        query.stop()
        collector.stop()
    skip_ms = t0_ms + int(point.warmup_s * 1000)
    lat = [latency for visible, latency in collector.samples if visible >= skip_ms]
    return {
        "events": produced,
        "outputs": len(collector.samples),
        "measured": len(lat),
        "p50_ms": percentile(lat, 50),
        "p99_ms": percentile(lat, 99),
    }


def feed_paced(
    query: Any,
    gen: GeneratorConfig,
    duration_s: float,
    what: str,
    console: Console,
    status: Callable[[], str],
) -> tuple[int, int]:
    """Once ``query`` has made its first progress: ``duration_s`` of generated input at the
    generator's rate, the query watched (its failure raised, a progress line per 10 s with
    ``status()``). Returns when the input started (epoch ms) and how many events went in."""
    deadline = time.monotonic() + 120
    while query.lastProgress is None:
        if time.monotonic() > deadline:
            raise JobFailed(
                f"{what} did not start within 120 s; stop other Spark work and run it again"
            )
        time.sleep(0.2)
    produced = [0]
    feeder = threading.Thread(
        target=lambda: produce_events(
            gen,
            duration_s=duration_s,
            rate=gen.event_time_rate,
            on_progress=lambda n: produced.__setitem__(0, n),
        ),
        name="bench-generator",
    )
    t0_ms = int(time.time() * 1000)
    feeder.start()
    progress = ProgressThrottle(console.print)  # a line per 10 s, not per check
    while feeder.is_alive():
        feeder.join(timeout=5)
        if query.exception() is not None:
            raise JobFailed(f"{what} failed: {query.exception()}")
        progress(f"  {what}: {produced[0]:,} events, {status()}")
    return t0_ms, produced[0]


def _drain(query: Any, collector: LatencyCollector, interval_s: float, console: Console) -> None:
    """Until the query found no new input and its outputs stopped growing (capped)."""
    deadline = time.monotonic() + max(120.0, 10 * interval_s)
    count = -1
    while time.monotonic() < deadline:
        time.sleep(max(1.0, interval_s))
        status = query.status
        idle = not status["isDataAvailable"] and not status["isTriggerActive"]
        if idle and len(collector.samples) == count:
            return
        count = len(collector.samples)
    console.print("  [yellow]still behind after the drain cap[/]")


def run_sink_bench(
    jobs: list[str],
    intervals: list[float],
    rates: list[float],
    duration_s: float,
    out_prefix: str,
    console: Console,
    warmup_s: float = 8.0,
) -> dict[str, Any]:
    for job in jobs:
        spec = resolve_job(job)  # fail fast on an unknown name
        check_sink_mode(
            spec,
            "release",
            causal=False,
            fix="Choose a deterministic job: this benchmark does not run causal mode",
        )
    if not rates or min(rates) <= 0 or duration_s <= 0 or not intervals or min(intervals) <= 0:
        raise ConfigurationError("every rate and interval, and the duration, must be positive")
    # transactional only where a read_committed consumer does not see aborted records.
    sinks = SINKS if hides_aborted_records() else SINKS[:-1]
    if len(sinks) < len(SINKS):
        console.print("[yellow]the broker shows aborted records: no transactional sink[/]")
    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    workdir = get_settings().home / "bench" / f"sinks-{uuid.uuid4().hex[:6]}"
    report: dict[str, Any] = {
        "machine": f"2 cores, local[2], {broker_description()}",
        "sinks": list(sinks),
        "rates_eps": rates,
        "rate_eps": rates[0],  # the rate of the paper's comparison (reproduce/)
        "duration_s": duration_s,
        "warmup_s": warmup_s,
        "release_goal": RELEASE_GOAL,
        "jobs": {},
    }
    spark = build_session("bench_sinks")
    try:
        for job in jobs:
            rows = []
            for rate in rates:
                for interval in intervals:
                    console.print(f"[bold]{job}[/]: trigger every {interval:g} s, {rate:,.0f} ev/s")
                    point = Point(
                        job,
                        interval,
                        rate,
                        duration_s=max(duration_s, 6 * interval + warmup_s),
                        warmup_s=max(warmup_s, 2 * interval),
                    )
                    row = measure(spark, point, workdir, console, sinks)
                    rows.append(row)
                    console.print_json(json.dumps(row))
            report["jobs"][job] = rows
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    report["release_within_goal"] = all(  # the release barrier's (the paper's) goal
        (row["release"]["p50_over_at_least_once"] or 0) <= RELEASE_GOAL
        for rows in report["jobs"].values()
        for row in rows
    )
    write_json_report(f"{out}.json", report)
    chart(report, Path(f"{out}.png"))
    console.print(f"report: {out}.json, chart: {out}.png")
    return report


def chart(report: dict[str, Any], path: Path) -> None:
    """Per job, p50 and p99: a group of bars (one per sink) for each (trigger interval, rate)
    point, so that every mode of a point stands side by side."""
    jobs = list(report["jobs"])
    sinks = report["sinks"]
    fig, axes = new_figure(1, 2 * len(jobs), figsize=(6 * len(jobs) * 2, 4.5), squeeze=False)
    colors = {
        "at_least_once": "#7f7f7f",
        "release": "#2ca02c",
        "two_phase": "#d62728",
        "transactional": "#1f77b4",
    }
    width = 0.8 / len(sinks)
    for i, job in enumerate(jobs):
        rows = report["jobs"][job]
        labels = [f"{r['interval_s']:g} s @ {r['rate_eps']:,.0f} ev/s" for r in rows]
        for col, stat in enumerate(("p50_ms", "p99_ms")):
            ax = axes[0][2 * i + col]
            for k, sink in enumerate(sinks):
                ax.bar(
                    [x + (k - (len(sinks) - 1) / 2) * width for x in range(len(rows))],
                    [r[sink][stat] or 0 for r in rows],
                    width,
                    color=colors[sink],
                    label=sink,
                )
            ax.set_xticks(range(len(rows)), labels, fontsize=8)
            ax.set_title(f"{job}: {stat[:3]} latency to visibility")
            ax.set_xlabel("trigger interval (= checkpoint interval) @ input rate")
            ax.set_ylabel("ms")
            ax.legend(fontsize=7)
    fig.suptitle(
        f"Sink modes, one after another in one application per point ({report['machine']})"
    )
    save_figure(fig, path, dpi=100)
