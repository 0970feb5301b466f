"""``recovery bench causal``: what causal logging costs, off vs on, in one run.

For each pipeline (Q12 with the causal clock; the prices pipeline with a logged random seed and
logged HTTP answers):

- capacity (the MST's upper bound, precise enough for a 5 % question): the same backlog
  processed in micro-batches of ``batch_events``, alternately off and on, ``rounds`` times
  each after an unmeasured warm-up run of every variant; input rows / busy seconds. The
  headline is the median over the rounds of each round's on/off ratio (Clonos: 6-7 % cost;
  goal here: on takes <= 1.05 x the time of off).
- latency: a paced run at 80 % of the off capacity, off and on, p50/p99 of output latency.

"On" comes in two determinant storages: ``kafka`` (a determinant topic, written synchronously
before the output leaves the operator) and ``output`` (piggybacked on the output records).
Piggybacking needs the causal operator and the sink in one stage, so Q12 (the clock feeds an
aggregation) runs with ``kafka`` only.

Nothing else may run meanwhile: the 2 cores are the measurement.
"""

from __future__ import annotations

import json
import shutil
import statistics
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.machine import broker_description
from recovery_lib.bench.nexmark_bench import NexmarkBench, input_share
from recovery_lib.causal.driver import enable
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError
from recovery_lib.files import write_json_report
from recovery_lib.job import JobOptions, write_output
from recovery_lib.job.spec import resolve_job
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.metrics.store import MetricsStore
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.producer import ensure_topics, produce_events
from recovery_lib.runtime.price_service import PriceService
from recovery_lib.settings import get_settings
from recovery_lib.spark.session import build_session

PIPELINES = ("q12", "prices")
VARIANTS = ("off", "kafka", "output")


def variants_for(pipeline: str) -> tuple[str, ...]:
    """Q12's clock feeds an aggregation: its determinants cannot ride on the output."""
    return ("off", "kafka") if pipeline == "q12" else VARIANTS


def paired_ratios(rates: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Each variant against off, round by round (a round's runs are neighbours in time, so a
    disturbance of the shared cores hits both): the median of the rounds' capacity ratios
    (on / off), the time ratio it means (off / on: the issue's "x the time of causal off"),
    and every round's ratio, whose spread says how far the median can be trusted."""
    off = rates["off"]
    per_round = {
        v: [r / o for r, o in zip(runs, off, strict=True) if o]
        for v, runs in rates.items()
        if v != "off"
    }
    return {
        "on_over_off": {v: round(statistics.median(r), 3) for v, r in per_round.items() if r},
        "time_over_off": {
            v: round(statistics.median(1 / x for x in r), 3) for v, r in per_round.items() if r
        },
        "round_ratios": {v: [round(x, 3) for x in r] for v, r in per_round.items()},
    }


def _builder(pipeline: str, price_url: str | None) -> Any:
    build = resolve_job(pipeline).build

    def with_params(spark: Any, opts: JobOptions) -> Any:
        if price_url is not None:
            opts.params.setdefault("price_url", price_url)
        return build(spark, opts)

    return with_params


def capacity(
    spark: Any,
    pipeline: str,
    builder: Any,
    gen: GeneratorConfig,
    workdir: Path,
    variant: str,
    batch_events: int,
    tag: str,
) -> float:
    """Input rows per busy second over the whole backlog (available-now, fixed batch size)."""

    opts = JobOptions(
        query=pipeline,
        prefix=gen.topic_prefix,
        partitions=gen.partitions,
        available_now=True,
        max_records_per_batch=batch_events,
        checkpoint_dir=str(workdir / tag),
        output_topic=f"{gen.topic_prefix}.out.{tag}",
    )
    admin = TopicAdmin()
    admin.create(opts.out_topic, gen.partitions)
    admin.create(opts.dlq_topic, 1)
    if variant != "off":
        enable(spark, opts.enable_causal(storage=variant), opts.checkpoint_path)
    streaming = write_output(builder(spark, opts), opts)
    streaming.awaitTermination()
    progress = [p for p in streaming.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return rows / busy if busy else 0.0


def run_causal_bench(
    out_prefix: str,
    console: Console,
    pipelines: list[str] | None = None,
    events: int = 200_000,
    rounds: int = 7,
    batch_events: int = 20_000,
    latency_duration_s: float = 30.0,
) -> dict[str, Any]:
    pipelines = pipelines or list(PIPELINES)
    for p in pipelines:
        if p not in PIPELINES:
            raise ConfigurationError(f"unknown pipeline {p!r}; choose from {', '.join(PIPELINES)}")
    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    settings = get_settings()
    workdir = settings.home / "bench" / f"causal-{uuid.uuid4().hex[:6]}"
    store = MetricsStore(settings.home / "metrics.duckdb").start_background_flush()
    spark = build_session("bench_causal")
    report: dict[str, Any] = {
        "events": events,
        "rounds": rounds,
        "batch_events": batch_events,
        "machine": f"2 cores, local[2], {broker_description()}",
        "pipelines": {},
    }
    try:
        with PriceService() as prices:
            bench = NexmarkBench(spark, store, workdir, console)
            for pipeline in pipelines:
                builder = _builder(pipeline, prices.url)
                gen = GeneratorConfig(topic_prefix=f"bench.causal.{uuid.uuid4().hex[:6]}")
                ensure_topics(gen, TopicAdmin())
                produce_events(gen, count=events)
                variants = variants_for(pipeline)
                # Warm-up, not measured: JIT, Python workers and every variant's clients.
                for variant in variants:
                    console.print(f"[bold]{pipeline}[/]: warm-up {variant} over the backlog ...")
                    capacity(
                        spark, pipeline, builder, gen, workdir, variant, batch_events, f"w{variant}"
                    )
                rates: dict[str, list[float]] = {v: [] for v in variants}
                for i in range(rounds):
                    for variant in variants if i % 2 == 0 else reversed(variants):
                        eps = capacity(
                            spark,
                            pipeline,
                            builder,
                            gen,
                            workdir,
                            variant,
                            batch_events,
                            f"{variant}-{i}",
                        )
                        rates[variant].append(eps)
                        console.print(f"  capacity {variant:>5} round {i}: {eps:,.0f} rows/s")
                # Median of the rounds: one disturbed round (2 shared cores) does not decide.
                cap = {v: statistics.median(r) for v, r in rates.items()}
                # Paced latency runs at 80 % of the off capacity (in generated events/s).
                rate = 0.8 * cap["off"] / input_share(pipeline)
                latency = {}
                for variant in variants:
                    console.print(f"  latency {variant} at {rate:,.0f} ev/s ...")
                    result = bench.run(
                        pipeline,
                        rate,
                        latency_duration_s,
                        mode=f"causal-{variant}",
                        builder=builder,
                        causal=False if variant == "off" else variant,
                    )
                    latency[variant] = {
                        "p50_ms": result.latency_p50_ms,
                        "p99_ms": result.latency_p99_ms,
                        "bounded": result.bounded,
                        "input_eps": round(result.input_eps),
                    }
                entry = {
                    "capacity_rows_per_s": {v: round(c) for v, c in cap.items()},
                    "capacity_runs": {v: [round(x) for x in r] for v, r in rates.items()},
                    **paired_ratios(rates),
                    "latency_rate_eps": round(rate),
                    "latency": latency,
                }
                report["pipelines"][pipeline] = entry
                console.print_json(json.dumps(entry))
    finally:
        spark.stop()
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)
    write_json_report(f"{out}.json", report)
    _chart(report, Path(f"{out}.png"))
    console.print(f"report: {out}.json, chart: {out}.png")
    return report


def _chart(report: dict[str, Any], path: Path) -> None:
    names = list(report["pipelines"])
    fig, (ax1, ax2) = new_figure(1, 2, figsize=(11, 4.5))
    width = 0.8 / len(VARIANTS)
    for i, variant in enumerate(VARIANTS):
        entries = [report["pipelines"][n] for n in names]
        caps = [e["capacity_rows_per_s"].get(variant, 0) for e in entries]
        xs = [x + (i - (len(VARIANTS) - 1) / 2) * width for x in range(len(names))]
        ax1.bar(xs, caps, width, label=variant)
        lat = [e["latency"].get(variant, {}) for e in entries]
        ax2.bar(xs, [x.get("p99_ms") or 0 for x in lat], width, alpha=0.4, label=f"{variant} p99")
        ax2.bar(xs, [x.get("p50_ms") or 0 for x in lat], width, label=f"{variant} p50")
    labels = [
        n + "".join(f"\n{v}/off {r}" for v, r in report["pipelines"][n]["on_over_off"].items())
        for n in names
    ]
    ax1.set_xticks(range(len(names)), labels)
    ax1.set_ylabel("input rows / s (backlog)")
    ax1.set_title("capacity, causal logging off vs on")
    ax1.legend()
    ax2.set_xticks(range(len(names)), names)
    ax2.set_ylabel("output latency, ms")
    ax2.set_title("latency at 80 % of the off capacity")
    ax2.legend(fontsize=8)
    save_figure(fig, path, dpi=100)
