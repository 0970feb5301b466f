"""``recovery bench tables``: what a lakehouse table sink costs per micro-batch, against the
Parquet sink (io/sinks/table_sink.py), by trigger interval.

For every trigger interval, q1 runs once per sink (parquet, delta, iceberg), one after another in
one Spark application (each interval starting with another sink), on the same generated input
at the same rate. Per batch: the batch's
duration from Spark's own progress (``durationMs.addBatch``: the foreachBatch call, i.e. the
batch's computation plus its write) and the sink's write alone (the table commit, timed around
``write_batch``); per output: latency to visibility (the write's end minus the ingest time of
its input). The goal compares medians as ratios in the same run: delta and iceberg at most 1.5x
the Parquet sink's per-batch time at every interval. The first ``warmup_s`` seconds are left out.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.machine import broker_description
from recovery_lib.bench.sink_bench import feed_paced
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError
from recovery_lib.files import write_json_report
from recovery_lib.io.sinks.table_sink import ParquetTableSink, TableSink, with_lineage
from recovery_lib.io.sinks.table_target import TableTarget
from recovery_lib.job import JobOptions
from recovery_lib.job.spec import resolve_job
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.metrics.stats import percentile
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.producer import ensure_topics
from recovery_lib.settings import get_settings
from recovery_lib.spark.session import build_session

SINKS = ("parquet", "delta", "iceberg")
GOAL = 1.5  # a table sink's median batch time over the Parquet sink's, at every interval
OUTPUT_COLUMNS = ("key", "value", "ingest_ms")


@dataclass
class TimedSink:
    """foreachBatch: the output with its lineage, written by ``sink``; the write timed."""

    sink: TableSink
    writes_ms: list[tuple[int, float]] = field(default_factory=list)  # (batch end ms, write ms)
    latencies: list[tuple[int, int]] = field(default_factory=list)  # (visible ms, latency ms)
    rows: int = 0

    def __call__(self, df: Any, batch_id: int) -> None:
        table = with_lineage(df.select(*OUTPUT_COLUMNS), batch_id).toArrow()
        started = time.perf_counter()
        self.sink.write_batch(table, batch_id)
        took = (time.perf_counter() - started) * 1000
        visible = int(time.time() * 1000)
        self.writes_ms.append((visible, took))
        self.rows += table.num_rows
        ingests = table.column("ingest_ms").to_pylist()
        step = max(1, len(ingests) // 500)  # at most 500 samples per batch
        self.latencies += [(visible, visible - int(i)) for i in ingests[::step] if i is not None]


def make_sink(kind: str, location: Path, job: str) -> TableSink:
    if kind == "parquet":
        return ParquetTableSink(location)
    return TableTarget.parse(f"{kind}:{location}").sink("bench", job)


def measure(
    spark: Any,
    kind: str,
    interval_s: float,
    rate: float,
    duration_s: float,
    warmup_s: float,
    workdir: Path,
    console: Console,
) -> dict[str, Any]:
    spec = resolve_job("q1")
    prefix = f"bench.tables.{kind}.{uuid.uuid4().hex[:6]}"
    gen = GeneratorConfig(topic_prefix=prefix, seed=42, event_time_rate=rate, partitions=2)
    admin = TopicAdmin()
    ensure_topics(gen, admin)
    opts = JobOptions(
        query=f"q1_{kind}",
        prefix=prefix,
        partitions=gen.partitions,
        checkpoint_dir=str(workdir / prefix / "ck"),
        trigger_interval=f"{interval_s:g} seconds",
    )
    admin.create(opts.dlq_topic, 1)
    timed = TimedSink(make_sink(kind, workdir / prefix / "table", spec.name))
    query = (
        spec.build(spark, opts)
        .writeStream.foreachBatch(timed)
        .option("checkpointLocation", opts.checkpoint_path)
        .trigger(processingTime=opts.trigger_interval)
        .queryName(opts.query)
        .start()
    )
    try:
        t0_ms, produced = feed_paced(
            query,
            gen,
            duration_s,
            f"q1 with the {kind} sink",
            console,
            lambda: f"every {interval_s:g} s: {timed.rows:,} written",
        )
        time.sleep(2 * interval_s + 2)  # the last batch
        batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()
    skip_ms = t0_ms + int(warmup_s * 1000)
    add_batch = [
        p["durationMs"].get("addBatch", 0) for p in batches if _epoch_ms(p["timestamp"]) >= skip_ms
    ]
    writes = [ms for end, ms in timed.writes_ms if end >= skip_ms]
    lat = [lat for visible, lat in timed.latencies if visible >= skip_ms]
    return {
        "events": produced,
        "rows": timed.rows,
        "batches": len(add_batch),
        "batch_ms_p50": _median(add_batch),
        "batch_ms_p90": percentile(add_batch, 90),
        "write_ms_p50": _median(writes),
        "write_ms_p90": percentile(writes, 90),
        "latency_p50_ms": percentile(lat, 50),
        "latency_p99_ms": percentile(lat, 99),
    }


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def _epoch_ms(timestamp: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)


def run_table_bench(
    intervals: list[float],
    rate: float,
    duration_s: float,
    out_prefix: str,
    console: Console,
    warmup_s: float = 8.0,
) -> dict[str, Any]:
    if rate <= 0 or duration_s <= 0 or not intervals or min(intervals) <= 0:
        raise ConfigurationError("rate, duration and every interval must be positive")
    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    workdir = get_settings().home / "bench" / f"tables-{uuid.uuid4().hex[:6]}"
    report: dict[str, Any] = {
        "machine": f"2 cores, local[2], {broker_description()}",
        "job": "q1",
        "sinks": list(SINKS),
        "rate_eps": rate,
        "duration_s": duration_s,
        "warmup_s": warmup_s,
        "goal": GOAL,
        "points": [],
    }
    spark = build_session("bench_tables")
    try:
        for n, interval in enumerate(intervals):
            row: dict[str, Any] = {"interval_s": interval}
            # Each interval starts with another sink: the application's warm-up (JIT, Python
            # workers) does not always favour the same one.
            for kind in SINKS[n % len(SINKS) :] + SINKS[: n % len(SINKS)]:
                console.print(f"[bold]{kind}[/]: trigger every {interval:g} s, {rate:,.0f} ev/s")
                row[kind] = measure(
                    spark,
                    kind,
                    interval,
                    rate,
                    max(duration_s, 6 * interval + warmup_s),
                    max(warmup_s, 2 * interval),
                    workdir,
                    console,
                )
            base = row["parquet"]
            for kind in SINKS[1:]:
                for stat in ("batch_ms_p50", "write_ms_p50"):
                    mine, theirs = row[kind][stat], base[stat]
                    ratio = round(mine / theirs, 3) if mine and theirs else None
                    row[kind][f"{stat}_over_parquet"] = ratio
            report["points"].append(row)
            console.print_json(json.dumps(row))
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    report["within_goal"] = {
        kind: all(
            (p[kind]["batch_ms_p50_over_parquet"] or float("inf")) <= GOAL for p in report["points"]
        )
        for kind in SINKS[1:]
    }
    write_json_report(f"{out}.json", report)
    chart(report, Path(f"{out}.png"))
    console.print(f"report: {out}.json, chart: {out}.png")
    return report


def chart(report: dict[str, Any], path: Path) -> None:
    points = report["points"]
    x = [p["interval_s"] for p in points]
    colors = {"parquet": "#7f7f7f", "delta": "#1f77b4", "iceberg": "#ff7f0e"}
    fig, axes = new_figure(1, 3, figsize=(16, 4))
    panels = (
        ("batch_ms_p50", "median micro-batch time (addBatch, ms)"),
        ("write_ms_p50", "median sink write (ms)"),
        ("latency_p50_ms", "p50 latency to visibility (ms)"),
    )
    for ax, (stat, title) in zip(axes, panels, strict=True):
        for kind in report["sinks"]:
            ax.plot(x, [p[kind][stat] for p in points], marker="o", color=colors[kind], label=kind)
        ax.set_title(title)
        ax.set_xlabel("trigger interval (s)")
        ax.set_xticks(x)
        ax.legend()
    fig.suptitle(
        f"q1 into Parquet, Delta and Iceberg at {report['rate_eps']:,.0f} ev/s "
        f"(goal: table / parquet batch time <= {report['goal']}x)"
    )
    save_figure(fig, path, dpi=110)
