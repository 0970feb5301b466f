"""What one micro-batch costs the driver, under Spark's defaults and under the session's cuts,
in one run (``recovery bench batch-cost``).

A micro-batch of a small stateful query costs about the same CPU whatever it holds: planning,
the state store's commit, the checkpoint's files. Two replicas of a job share the host's
cores, so that fixed cost sets the shortest cadence they keep up with (docs/replication.md).
Each variant runs the same query in a Spark application of its own (the JIT is a JVM option):
Spark's rate source, a count per key over 4 shuffle partitions, RocksDB, a 1 s trigger, a
noop sink. After a warm-up the driver JVM's CPU seconds (its own and its reaped children's:
the processes Hadoop starts) over a window are divided by the batches run in it.

Variants: ``spark`` (Spark's FileContext and tiered JIT), ``filesystem`` (checkpoints
through Hadoop's FileSystem API), ``quick-jit`` (C1 only), ``both`` (the session's defaults).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from recovery_lib.bench.ratios import ratio
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import JobFailed
from recovery_lib.files import write_json_report

__all__ = ["VARIANTS", "BatchCost", "run_batch_cost_bench"]

log = logging.getLogger(__name__)

# variant -> (spark_checkpoint_file_api, spark_jit)
VARIANTS: dict[str, tuple[str, str]] = {
    "spark": ("filecontext", "tiered"),
    "filesystem": ("filesystem", "tiered"),
    "quick-jit": ("filecontext", "quick"),
    "both": ("filesystem", "quick"),
}
BASELINE = "spark"
ROWS_PER_S = 300  # about q3's input per second at 2,000 NexMark events/s
KEYS = 1_000
TRIGGER = "1 second"


@dataclass(frozen=True)
class BatchCost:
    """One variant's window: batches run, the driver's CPU per batch, the batch's duration."""

    variant: str
    batches: int
    driver_cpu_s_per_batch: float
    driver_cpu_share: float  # of one core, over the window
    median_batch_ms: float


def _jvm_cpu_s(pid: int) -> float:
    """utime + stime of the process and its reaped children, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def measure(variant: str, warmup_s: float, window_s: float) -> BatchCost:
    """Run the query in this process's Spark session (its settings chosen by the caller's
    environment) and measure the window."""
    from pyspark.sql import functions as F

    from recovery_lib.spark.session import build_session, stop_session

    spark = build_session(f"batch-cost-{variant}")
    workdir = tempfile.TemporaryDirectory(prefix="batch-cost-")
    checkpoint = workdir.name
    try:
        pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        rows = spark.readStream.format("rate").option("rowsPerSecond", ROWS_PER_S).load()
        counts = rows.groupBy((F.col("value") % KEYS).alias("k")).agg(F.count("*").alias("n"))
        query = (
            counts.writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=TRIGGER)
            .start()
        )
        time.sleep(warmup_s)
        first, cpu0, t0 = (query.lastProgress or {}).get("batchId", 0), _jvm_cpu_s(pid), time.time()
        time.sleep(window_s)
        last, cpu1, t1 = (query.lastProgress or {}).get("batchId", 0), _jvm_cpu_s(pid), time.time()
        durations = sorted(
            p["durationMs"].get("triggerExecution", 0)
            for p in query.recentProgress
            if p["batchId"] > first
        )
        query.stop()
    finally:
        stop_session(spark)
        workdir.cleanup()
    batches = max(1, last - first)
    return BatchCost(
        variant,
        batches,
        round((cpu1 - cpu0) / batches, 3),
        round((cpu1 - cpu0) / (t1 - t0), 3),
        float(durations[len(durations) // 2]) if durations else 0.0,
    )


def run_variant(variant: str, warmup_s: float, window_s: float) -> BatchCost:
    """One variant in a Python process (and so a JVM) of its own."""
    api, jit = VARIANTS[variant]
    env = {
        **os.environ,
        "RECOVERY_SPARK_CHECKPOINT_FILE_API": api,
        "RECOVERY_SPARK_JIT": jit,
    }
    with tempfile.TemporaryDirectory(prefix="batch-cost-result-") as where:
        result = Path(where) / "result.json"
        cmd = [sys.executable, "-m", __name__, variant, str(warmup_s), str(window_s), str(result)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not result.exists():
            raise JobFailed(
                f"batch-cost variant {variant} failed (exit {done.returncode}): "
                f"{done.stderr.strip()[-400:]}"
            )
        return BatchCost(**json.loads(result.read_text()))


def run_batch_cost_bench(
    out: str | Path,
    variants: Sequence[str] = tuple(VARIANTS),
    warmup_s: float = 40.0,
    window_s: float = 60.0,
    progress: Callable[[int, str], None] | None = None,
) -> dict[str, Any]:
    """Every variant one after another, then the report (``out``.json) and chart (.png).

    Args:
        out: Report prefix.
        variants: Names of ``VARIANTS``, in the order run.
        warmup_s: Seconds the query runs before the window (the JIT's first compilations).
        window_s: Seconds measured.
        progress: Called with (variants done, the next one's name) before each.

    Returns:
        The report: each variant's figures and its CPU per batch over Spark's defaults'.

    Raises:
        JobFailed: A variant's process failed.
    """
    results: list[BatchCost] = []
    for i, variant in enumerate(variants):
        if progress is not None:
            progress(i, variant)
        results.append(run_variant(variant, warmup_s, window_s))
        log.info("batch cost %s: %s", variant, results[-1])
    base = next((r for r in results if r.variant == BASELINE), None)
    rows = [
        {
            **asdict(r),
            "cpu_vs_spark": ratio(r.driver_cpu_s_per_batch, base and base.driver_cpu_s_per_batch),
        }
        for r in results
    ]
    report = {
        "query": f"rate {ROWS_PER_S} rows/s, count per key over {KEYS} keys, RocksDB, {TRIGGER}",
        "warmup_s": warmup_s,
        "window_s": window_s,
        "variants": {
            v: {"checkpoint_file_api": VARIANTS[v][0], "jit": VARIANTS[v][1]} for v in variants
        },
        "results": rows,
    }
    prefix = Path(out)
    write_json_report(prefix.with_suffix(".json"), report)
    fig, ax = new_figure(figsize=(7, 4))
    ax.bar([r["variant"] for r in rows], [r["driver_cpu_s_per_batch"] for r in rows])
    for i, r in enumerate(rows):
        ax.annotate(f"{r['cpu_vs_spark'] or 0:.2f}x", (i, r["driver_cpu_s_per_batch"]),
                    ha="center", va="bottom")  # fmt: skip
    ax.set_ylabel("driver CPU s per micro-batch")
    ax.set_title("One micro-batch of a small stateful query: the driver's CPU")
    save_figure(fig, prefix.with_suffix(".png"))
    return report


if __name__ == "__main__":  # one variant, in the process run_variant started
    measured = measure(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]))
    Path(sys.argv[4]).write_text(json.dumps(asdict(measured)))
