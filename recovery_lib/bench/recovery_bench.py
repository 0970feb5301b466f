"""``recovery bench recovery``: native Spark restart and recovery times at 80 % of MST.

For each placement (local mode; a standalone cluster whose executors are separate JVMs) and
each query, one experiment (``recovery experiment run``: faulty run with a driver SIGKILL, a
failure-free reference run, the oracle) at 80 % of that placement's MST. Both MSTs are searched
in the same run (the NexMark bench's bounded-lag search, coarser steps), unless a NexMark report
is given for the local one; the search runs with the latency collector and metrics listener on,
as the experiments do. At 80 % load a job catches up at a quarter of the input rate, so the
input must go on for several outage lengths after the failure (default: 150 s, failure at 20 s)
or the recovery time cannot be observed. Nothing else may run meanwhile: the 2 cores are the
measurement.
Writes JSON + a bar chart of restart time, recovery time and output gap per query and
placement.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.nexmark_bench import NexmarkBench
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError
from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report
from recovery_lib.files import write_json_report
from recovery_lib.metrics.store import MetricsStore
from recovery_lib.runtime import cluster as cluster_mod
from recovery_lib.settings import get_settings
from recovery_lib.spark.session import build_session

PLACEMENTS = ("local", "cluster")
MST_SHARE = 0.8


def mst_from_report(path: Path, query: str) -> float | None:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return report.get("queries", {}).get(query, {}).get("mst_eps")


def search_mst(
    queries: list[str],
    master: str,
    console: Console,
    start_rate: float,
    step: float,
    duration_s: float,
    max_rate: float,
) -> dict[str, dict[str, Any]]:
    """The bounded-lag MST search of the NexMark bench, with the session on ``master``."""

    settings = get_settings()
    workdir = settings.home / "bench" / f"mst-{uuid.uuid4().hex[:6]}"
    store = MetricsStore(settings.home / "metrics.duckdb").start_background_flush()
    spark = build_session("bench_recovery_mst", master=master)
    found: dict[str, dict[str, Any]] = {}
    try:
        bench = NexmarkBench(spark, store, workdir, console)
        console.print(f"warm-up run on {master} ...")
        bench.run(queries[0], 1000, 10, mode="warmup", collect=False)
        for query in queries:
            console.print(f"[bold]{query}[/]: MST search on {master} from {start_rate:,.0f} ev/s")
            # With the latency collector and metrics listener on, as in the experiments.
            best, runs = bench.mst(query, start_rate, step, duration_s, max_rate, collect=True)
            found[query] = {"mst_eps": best, "mst_runs": [r.summary() for r in runs]}
    finally:
        spark.stop()
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return found


def run_recovery_bench(
    queries: list[str],
    placements: list[str],
    out_prefix: str,
    console: Console,
    nexmark_report: Path | None,
    duration_s: float = 150.0,
    fail_at_s: float = 20.0,
    mst_start_rate: float = 12_000,
    mst_step: float = 2.0,
    mst_duration_s: float = 20.0,
    max_rate: float = 200_000,
    rate: float | None = None,
    rates: dict[str, float] | None = None,
    append: bool = False,
) -> dict[str, Any]:
    """``rate`` fixes the input rate for every run instead of 80 % of a searched MST; ``rates``
    does so per query. With ``append`` the results are added to an existing report (the JSON
    and the chart are rewritten after every experiment, so an interrupted run keeps what it
    measured)."""
    for placement in placements:
        if placement not in PLACEMENTS:
            raise ConfigurationError(
                f"unknown placement {placement!r}; use {' or '.join(PLACEMENTS)}"
            )
    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "failure": "driver-kill",
        "mst_share": MST_SHARE,
        "duration_s": duration_s,
        "fail_at_s": fail_at_s,
        "machine": "2 cores shared by broker, generator, driver, executors",
        "results": [],
    }
    if append and Path(f"{out}.json").exists():
        previous = json.loads(Path(f"{out}.json").read_text())
        report = {**previous, "results": previous.get("results", [])}
    started_cluster = False
    try:
        for placement in placements:
            msts: dict[str, dict[str, Any]] = {}
            if rate is not None or rates:
                msts = {
                    q: {"mst_eps": (rates or {}).get(q, rate) / MST_SHARE, "fixed_rate": True}
                    for q in queries
                    if (rates or {}).get(q, rate) is not None
                }
                if placement == "cluster" and cluster_mod.cluster_state() is None:
                    console.print("starting a Spark standalone cluster (master + worker) ...")
                    cluster_mod.start_cluster()
                    started_cluster = True
            elif placement == "local":
                for q in queries:
                    found = mst_from_report(nexmark_report, q) if nexmark_report else None
                    msts[q] = {"mst_eps": found}
                missing = [q for q, m in msts.items() if m["mst_eps"] is None]
                if missing:
                    msts.update(
                        search_mst(
                            missing,
                            get_settings().spark_master,
                            console,
                            mst_start_rate,
                            mst_step,
                            mst_duration_s,
                            max_rate,
                        )
                    )
            else:
                state = cluster_mod.cluster_state()
                if state is None:
                    console.print("starting a Spark standalone cluster (master + worker) ...")
                    state = cluster_mod.start_cluster()
                    started_cluster = True
                msts = search_mst(
                    queries, state.url, console, mst_start_rate, mst_step, mst_duration_s, max_rate
                )
            for query in queries:
                mst = msts.get(query, {}).get("mst_eps")
                if not mst:
                    console.print(f"[red]{query} {placement}: no sustainable rate found; skipped")
                    continue
                run_rate = round(MST_SHARE * mst)
                console.print(f"[bold]{query} {placement}[/]: driver-kill at {run_rate:,} ev/s ...")
                cfg = ExperimentConfig(
                    query=query,
                    fail="driver-kill",
                    fail_at_s=fail_at_s,
                    rate=run_rate,
                    duration_s=duration_s,
                    cluster=placement == "cluster",
                )
                t0 = time.monotonic()
                result = Experiment(cfg, console, progress=lambda _m: None).run()
                path = write_report(result, out.parent / f"{out.name}_{query}_{placement}.json")
                entry = {
                    "query": query,
                    "placement": placement,
                    "mst_eps": None if msts[query].get("fixed_rate") else mst,
                    "rate_basis": "fixed" if msts[query].get("fixed_rate") else "80 % of MST",
                    "mst_runs": msts[query].get("mst_runs"),
                    "rate": run_rate,
                    "restart_time_s": result["restart_time_s"],
                    "recovery_time_s": result["recovery_time_s"],
                    "output_gap_s": result["output_gap_s"],
                    "latency_ms": result["latency_ms"],
                    "verdict": result["consistency"]["verdict"],
                    "experiment_report": str(path),
                    "elapsed_s": round(time.monotonic() - t0, 1),
                }
                report["results"].append(entry)
                write_json_report(f"{out}.json", report)
                _chart(report, Path(f"{out}.png"))
                console.print_json(
                    json.dumps({k: v for k, v in entry.items() if k != "mst_runs"}, default=str)
                )
    finally:
        if started_cluster:
            cluster_mod.stop_cluster()
    write_json_report(f"{out}.json", report)
    _chart(report, Path(f"{out}.png"))
    console.print(f"report: {out}.json, chart: {out}.png")
    return report


def _chart(report: dict[str, Any], path: Path) -> None:
    results = report["results"]
    labels = [
        f"{r['query']} {r['placement']}\n{r['rate']:,} ev/s\n{r.get('rate_basis', '80 % of MST')}"
        for r in results
    ]
    metrics = (
        ("restart_time_s", "restart"),
        ("recovery_time_s", "recovery"),
        ("output_gap_s", "output gap"),
    )
    fig, ax = new_figure(figsize=(10, 5))
    width = 0.8 / len(metrics)
    for i, (key, name) in enumerate(metrics):
        values = [r[key] if r[key] is not None else 0 for r in results]
        xs = [j + (i - 1) * width for j in range(len(results))]
        ax.bar(xs, values, width, label=name)
        for x, r in zip(xs, results, strict=True):
            if r[key] is None:
                ax.annotate("n/a", (x, 0.5), ha="center", fontsize=8)
    ax.set_xticks(range(len(results)), labels)
    ax.set_ylabel("seconds")
    ax.set_title("Native Spark recovery after a driver SIGKILL (n/a: not recovered in the run)")
    ax.legend()
    save_figure(fig, path, dpi=100)
