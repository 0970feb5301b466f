"""``recovery bench nexmark``: throughput and latency per second, and the MST search.

Each run uses fresh topics, a paced generator thread, the query in this process's
SparkSession, the metrics listener and a latency collector on the output topic. Lag = events
produced - input rows the query has processed. MST = the highest rate whose lag stays bounded:
over the second half of the run the least-squares slope of the lag is below 10 % of the rate
(a query that cannot keep up accumulates lag at rate - capacity; micro-batches make the lag
oscillate), and once the input stops the query catches up within 10 s. Topics get one
partition per core; the generator and the latency collector share the machine with the job.
"""

from __future__ import annotations

import json
import shutil
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.machine import broker_description
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError, JobFailed
from recovery_lib.files import write_json_report
from recovery_lib.job import JobOptions, write_output
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.metrics.latency import LatencyCollector
from recovery_lib.metrics.listener import MetricsListener, TerminationAwareListener
from recovery_lib.metrics.stats import percentile
from recovery_lib.metrics.store import MetricsStore
from recovery_lib.nexmark.config import (
    AUCTION_PROPORTION,
    BID_PROPORTION,
    PERSON_PROPORTION,
    TOTAL_PROPORTION,
    GeneratorConfig,
)
from recovery_lib.nexmark.producer import ensure_topics, produce_events
from recovery_lib.nexmark.queries import get_query
from recovery_lib.settings import get_settings
from recovery_lib.spark.session import build_session

BOUNDED_SLOPE = 0.10  # lag growth per second, as a fraction of the rate
MAX_BOUNDED_DRAIN_S = 10.0  # after the input stops, the query must catch up within this
MAX_DRAIN_S = 60.0
# Joins read persons + auctions only (8 % of events): their search starts higher.
DEFAULT_START_RATE = {"q3": 12_000, "q8": 12_000}


@dataclass
class RunResult:
    query: str
    rate: float
    duration_s: float
    run_id: str
    produced: int
    processed: int
    lag: list[tuple[float, int]] = field(default_factory=list)  # (elapsed s, events behind)
    per_second: list[dict[str, Any]] = field(default_factory=list)
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    output_eps: float = 0.0
    input_eps: float = 0.0
    drain_s: float | None = None
    share: float = 1.0  # fraction of generated events the query reads: the lag is in its rows

    @property
    def bounded(self) -> bool:
        slope = self.lag_slope
        return (
            slope is not None
            and slope < BOUNDED_SLOPE * self.rate * self.share
            and self.drain_s is not None
            and self.drain_s <= MAX_BOUNDED_DRAIN_S
        )

    @property
    def generator_bound(self) -> bool:
        return self.produced < 0.95 * self.rate * self.duration_s

    @property
    def lag_slope(self) -> float | None:
        """Least-squares growth of the lag (events/s) over the second half of the run."""
        half = [pt for pt in self.lag if pt[0] >= self.duration_s / 2]
        if len(half) < 3:
            return None
        xs, ys = [p[0] for p in half], [p[1] for p in half]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        var = sum((x - mx) ** 2 for x in xs)
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else None

    def summary(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "rate_eps": self.rate,
            "duration_s": self.duration_s,
            "bounded": self.bounded,
            "produced": self.produced,
            "processed": self.processed,
            "final_lag": self.lag[-1][1] if self.lag else None,
            "lag_slope_eps": round(self.lag_slope, 1) if self.lag_slope is not None else None,
            "drain_s": round(self.drain_s, 1) if self.drain_s is not None else None,
            "input_eps": round(self.input_eps),
            "output_eps": round(self.output_eps, 1),
            "latency_p50_ms": self.latency_p50_ms,
            "latency_p99_ms": self.latency_p99_ms,
        }


class NexmarkBench:
    def __init__(
        self,
        spark: Any,
        store: MetricsStore,
        workdir: Path,
        console: Console,
        skew: float = 0.5,
        seed: int = 42,
        partitions: int = 2,
    ) -> None:
        self.partitions = partitions
        self.spark = spark
        self.store = store
        self.workdir = workdir
        self.console = console
        self.skew = skew
        self.seed = seed
        self.admin = TopicAdmin()
        self.counter = RowCounter()
        spark.streams.addListener(self.counter)

    def run(
        self,
        query: str,
        rate: float,
        duration_s: float,
        mode: str = "native",
        collect: bool = True,
        builder: Any = None,
        causal: bool | str = False,
    ) -> RunResult:
        """One paced run; ``builder(spark, opts)`` overrides the NexMark query (other
        pipelines), ``causal`` switches causal logging on (True, or the storage name)."""
        prefix = f"bench.{query}.{uuid.uuid4().hex[:6]}"
        # Event time follows the paced rate, so event-time windows advance like wall time.
        gen = GeneratorConfig(
            topic_prefix=prefix,
            seed=self.seed,
            hot_ratio=self.skew,
            event_time_rate=rate,
            partitions=self.partitions,
        )
        ensure_topics(gen, self.admin)
        opts = JobOptions(
            query=query,
            prefix=gen.topic_prefix,
            partitions=gen.partitions,
            checkpoint_dir=str(self.workdir / prefix),
        )
        self.admin.create(opts.out_topic, gen.partitions)
        self.admin.create(opts.dlq_topic, 1)
        if causal:
            from recovery_lib.causal.driver import enable

            storage = causal if isinstance(causal, str) else "kafka"
            enable(self.spark, opts.enable_causal(storage=storage), opts.checkpoint_path)
        run_id = self.store.start_run(
            query,
            mode,
            {"rate": rate, "duration_s": duration_s, "skew": self.skew, "seed": self.seed},
        )
        listener = MetricsListener(self.store, run_id) if collect else None
        if listener:
            self.spark.streams.addListener(listener)
        collector = LatencyCollector(
            opts.out_topic, run_id, self.store if collect else None
        ).start()
        streaming = write_output((builder or get_query(query))(self.spark, opts), opts)
        # Wait until the query ran its first (empty) batch: planning is not part of the run.
        deadline = time.monotonic() + 120
        while streaming.lastProgress is None and time.monotonic() < deadline:
            time.sleep(0.2)
        produced = [0]
        stop = threading.Event()

        def generate() -> None:
            produce_events(
                gen,
                duration_s=duration_s,
                rate=rate,
                on_progress=lambda n: produced.__setitem__(0, n),
                stop=stop.is_set,
            )

        share = input_share(query)
        producer = threading.Thread(target=generate, name="nexmark-generator")
        started = time.monotonic()
        producer.start()
        result = RunResult(query, rate, duration_s, run_id, 0, 0, share=share)
        try:
            while producer.is_alive():
                time.sleep(1.0)
                result.lag.append(
                    (time.monotonic() - started, self._behind(streaming, produced[0], share))
                )
                if streaming.exception() is not None:
                    raise JobFailed(f"{query} failed: {streaming.exception()}")
            # Drain: how long until every produced input is processed (capped).
            drain_started = time.monotonic()
            while self._behind(streaming, produced[0], share) > 0:
                if time.monotonic() - drain_started > MAX_DRAIN_S:
                    break
                time.sleep(0.25)
            result.drain_s = time.monotonic() - drain_started
            time.sleep(2.0)  # let the last outputs reach the latency collector
        finally:
            stop.set()
            producer.join()
            streaming.stop()
            collector.stop()
            self.counter.wait_terminated(streaming.id)  # its last batches' rows count too
            if listener:
                listener.wait_terminated(streaming.id)
                self.spark.streams.removeListener(listener)
            self.store.finish_run(run_id)
        result.produced = produced[0]
        result.processed = self.counter.rows.get(str(streaming.id), 0)
        elapsed = max(time.monotonic() - started, 1e-9)
        result.input_eps = result.processed / elapsed
        samples = collector.samples
        result.output_eps = len(samples) / elapsed if samples else 0.0
        result.latency_p50_ms = percentile([s[1] for s in samples], 50)
        result.latency_p99_ms = percentile([s[1] for s in samples], 99)
        by_second: dict[int, list[int]] = {}
        for visible, latency in samples:
            by_second.setdefault(visible // 1000, []).append(latency)
        t0 = min(by_second) if by_second else 0
        result.per_second = [
            {
                "t": sec - t0,
                "outputs": collector.per_second.get(sec, 0),
                "p50_ms": percentile(lat, 50),
                "p99_ms": percentile(lat, 99),
            }
            for sec, lat in sorted(by_second.items())
        ]
        shutil.rmtree(self.workdir / prefix, ignore_errors=True)
        # Topics stay: deleting them under cached clients makes librdkafka misreport metadata.
        return result

    def _behind(self, streaming: Any, produced: int, share: float) -> int:
        return max(0, int(produced * share) - self.counter.rows.get(str(streaming.id), 0))

    def collection_overhead(self, events: int = 200_000, rounds: int = 2) -> dict[str, Any]:
        """Q1 over the same backlog, alternately with and without metrics collection
        (listener + latency collector): the ratio of their processing rates."""
        prefix = f"bench.overhead.{uuid.uuid4().hex[:6]}"
        gen = GeneratorConfig(topic_prefix=prefix, seed=self.seed, partitions=self.partitions)
        ensure_topics(gen, self.admin)
        produce_events(gen, count=events)
        rates: dict[str, list[float]] = {"off": [], "on": []}
        for i in range(rounds * 2):
            mode = "on" if i % 2 else "off"
            opts = JobOptions(
                query="q1",
                prefix=gen.topic_prefix,
                partitions=gen.partitions,
                available_now=True,
                checkpoint_dir=str(self.workdir / f"{prefix}-{i}"),
                output_topic=f"{prefix}.out.{i}",
            )
            self.admin.create(opts.out_topic, gen.partitions)
            self.admin.create(opts.dlq_topic, 1)
            listener = collector = None
            run_id = f"overhead-{prefix}-{i}"
            if mode == "on":
                listener = MetricsListener(self.store, run_id)
                self.spark.streams.addListener(listener)
                collector = LatencyCollector(opts.out_topic, run_id, self.store).start()
            streaming = write_output(get_query("q1")(self.spark, opts), opts)
            streaming.awaitTermination()
            if listener:
                listener.wait_terminated(streaming.id)
                self.spark.streams.removeListener(listener)
            if collector:
                collector.stop()
            progress = [p for p in streaming.recentProgress if p["numInputRows"]]
            rows = sum(p["numInputRows"] for p in progress)
            busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
            rates[mode].append(rows / busy)
        off, on = statistics.fmean(rates["off"]), statistics.fmean(rates["on"])
        return {
            "events": events,
            "rounds": rounds,
            "eps_without": round(off),
            "eps_with": round(on),
            "with_over_without": round(on / off, 3),
        }

    def mst(
        self,
        query: str,
        start_rate: float,
        step: float,
        duration_s: float,
        max_rate: float,
        collect: bool = False,
    ) -> tuple[float | None, list[RunResult]]:
        runs: list[RunResult] = []
        best: float | None = None
        rate = start_rate
        while rate <= max_rate:
            self.console.print(f"  {query}: trying {rate:,.0f} ev/s for {duration_s:.0f} s ...")
            result = self.run(query, rate, duration_s, mode="mst-search", collect=collect)
            runs.append(result)
            self.console.print(
                f"    final lag {result.lag[-1][1] if result.lag else '?'} events, "
                f"{'bounded' if result.bounded else 'growing'}"
            )
            if result.generator_bound:
                self.console.print("    the generator could not keep this rate: MST >= this")
                best = rate if result.bounded else best
                break
            if not result.bounded:
                break
            best = rate
            rate *= step
        return best, runs


QUERY_INPUTS = {"q3": ("persons", "auctions"), "q8": ("persons", "auctions")}


def input_share(query: str) -> float:
    """Fraction of generated events the query reads (bids are 46 of every 50 events)."""

    sizes = {"persons": PERSON_PROPORTION, "auctions": AUCTION_PROPORTION, "bids": BID_PROPORTION}
    return sum(sizes[k] for k in QUERY_INPUTS.get(query, ("bids",))) / TOTAL_PROPORTION


class RowCounter(TerminationAwareListener):
    """Input rows processed per query id, for the lag; cheaper than polling recentProgress."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, int] = {}

    def onQueryStarted(self, event) -> None:  # noqa: ANN001, N802
        pass

    def onQueryProgress(self, event) -> None:  # noqa: ANN001, N802
        key = str(event.progress.id)
        self.rows[key] = self.rows.get(key, 0) + int(event.progress.numInputRows)

    def onQueryIdle(self, event) -> None:  # noqa: ANN001, N802
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: ANN001, N802
        self._mark_terminated(event.id)


def run_nexmark_bench(
    queries: list[str],
    rate: float | None,
    duration_s: float,
    mst: bool,
    out_prefix: str,
    console: Console,
    start_rate: float = 2_000,
    step: float = 1.5,
    mst_duration_s: float = 30,
    max_rate: float = 200_000,
    skew: float = 0.5,
    metrics_path: str | None = None,
    overhead: bool = True,
) -> dict[str, Any]:
    for q in queries:
        get_query(q)  # fail fast on an unknown name
    if rate is not None and rate <= 0:
        raise ConfigurationError(f"rate must be a positive number of events per second, got {rate}")
    if not 0 <= skew <= 1:
        raise ConfigurationError(f"skew must be within [0, 1], got {skew}")
    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    settings = get_settings()
    store = MetricsStore(metrics_path or settings.home / "metrics.duckdb").start_background_flush()
    workdir = settings.home / "bench" / uuid.uuid4().hex[:6]
    spark = build_session("bench_nexmark")
    report: dict[str, Any] = {
        "queries": {},
        "machine": f"2 cores, local[2], {broker_description()}",
    }
    try:
        bench = NexmarkBench(spark, store, workdir, console, skew=skew)
        console.print("warm-up run (Python workers start on first use) ...")
        bench.run(queries[0], 1000, 10, mode="warmup", collect=False)
        if overhead:
            console.print("metrics collection overhead (q1, same backlog, with vs without) ...")
            report["collection_overhead"] = bench.collection_overhead()
            console.print_json(json.dumps(report["collection_overhead"]))
        for query in queries:
            entry: dict[str, Any] = {}
            measure_rate = rate
            if mst:
                first = start_rate or DEFAULT_START_RATE.get(query, 4_000)
                console.print(f"[bold]{query}[/]: MST search from {first:,.0f} ev/s, x{step}")
                best, runs = bench.mst(query, first, step, mst_duration_s, max_rate)
                entry["mst_eps"] = best
                entry["mst_runs"] = [r.summary() for r in runs]
                if best is not None and rate is None:
                    measure_rate = 0.8 * best
            if measure_rate:
                console.print(f"[bold]{query}[/]: {measure_rate:,.0f} ev/s for {duration_s:.0f} s")
                result = bench.run(query, measure_rate, duration_s)
                entry["run"] = result.summary()
                entry["per_second"] = result.per_second
                entry["lag"] = result.lag
            report["queries"][query] = entry
            console.print_json(
                json.dumps({k: v for k, v in entry.items() if k in ("mst_eps", "run")})
            )
    finally:
        spark.stop()
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)
    write_json_report(f"{out}.json", report)
    _chart(report, Path(f"{out}.png"))
    console.print(f"report: {out}.json, chart: {out}.png")
    return report


def _chart(report: dict[str, Any], path: Path) -> None:
    queries = [q for q, e in report["queries"].items() if e.get("per_second")]
    if not queries:
        return
    fig, axes = new_figure(len(queries), 2, figsize=(12, 3.2 * len(queries)), squeeze=False)
    for row, query in enumerate(queries):
        entry = report["queries"][query]
        secs = entry["per_second"]
        t = [s["t"] for s in secs]
        ax = axes[row][0]
        ax.plot(t, [s["outputs"] for s in secs], color="#1f77b4")
        ax.set_title(f"{query}: output records/s at {entry['run']['rate_eps']:,.0f} ev/s in")
        ax.set_xlabel("s")
        ax = axes[row][1]
        ax.plot(t, [s["p50_ms"] for s in secs], label="p50", color="k")
        ax.plot(t, [s["p99_ms"] for s in secs], label="p99", color="r")
        mst = entry.get("mst_eps")
        ax.set_title(
            f"{query}: latency per second (ms)" + (f", MST {mst:,.0f} ev/s" if mst else "")
        )
        ax.set_xlabel("s")
        ax.legend()
    save_figure(fig, path, dpi=100)
