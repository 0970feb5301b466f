"""``recovery bench cec``: CEC against Spark's own state checkpointing on one aggregate, the
paper's workload (average price per item over count windows; paper 003, section IV).

Every point runs the job ``avgprice`` as its own process over a backlog of generated items
(``available-now``, fixed batches), so points differ only in the mode and the knobs:

- overhead: throughput (input tuples per second of batch time, the first batch left out) with
  G_open only, with no checkpointing at all, and on Spark's HDFS-backed and RocksDB state
  stores; fast windows (size 1) and slow windows (size 1000) over two items (Fig. 5);
- recovery: a first process applies most of the backlog and ends, which loses the driver's
  windows exactly as a crash at a batch boundary does; a second one recovers and applies the
  rest. Its recovery line gives the extent, the EC-load time, the bytes scanned and the input
  replayed, for several Q, several U (Figs. 6-7) and several CP at a fixed CI (Figs. 8-9,
  with the mean batch time for the operator's response time). The same two steps on Spark's
  state stores give its restart and the state bytes it loads (the comparison of the issue).

Nothing else may run meanwhile. Writes JSON + a chart.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.cec.log import OutputLog
from recovery_lib.cec.records import LogRecord, RecordKind
from recovery_lib.cec.recovery import eventual_checkpoint
from recovery_lib.cec.spark import recoveries_logged
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import JobFailed
from recovery_lib.files import write_json_report
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged
from recovery_lib.kafka.tail_probe import TailProbe
from recovery_lib.metrics.store import MetricsStore, read_frame
from recovery_lib.modes import get_mode
from recovery_lib.settings import get_settings

PARTITIONS = 4
BATCH = 20_000  # input tuples per micro-batch


@dataclass(frozen=True)
class Workload:
    name: str
    items: int
    window: int
    tuples: int


@dataclass(frozen=True)
class Variant:
    """A mode and its settings (environment of the job process)."""

    name: str
    mode: str  # cec | native
    env: dict[str, str] = field(default_factory=dict)


OVERHEAD_WORKLOADS = (
    Workload("fast windows (size 1)", items=2, window=1, tuples=200_000),
    Workload("slow windows (size 1000)", items=2, window=1_000, tuples=200_000),
)
_NO_CHECKS = {"RECOVERY_CEC_EXTENT_TARGET": "inf", "RECOVERY_CEC_REPLAY_TARGET": "inf"}
OVERHEAD_VARIANTS = (
    Variant("CEC, no checkpointing", "cec", {**_NO_CHECKS, "RECOVERY_CEC_FOOTPRINTS": "false"}),
    Variant("CEC, G_open only", "cec", _NO_CHECKS),
    Variant("Spark, HDFS state", "native", {"RECOVERY_STATE_STORE": "hdfs"}),
    Variant("Spark, RocksDB state", "native", {"RECOVERY_STATE_STORE": "rocksdb"}),
)
# The paper's 100k items would need tens of millions of tuples here before windows cycle
# (extent above the open windows); 10k items over 600k tuples (60 per item) do.
RECOVERY_WORKLOAD = Workload("10k items, window 10", items=10_000, window=10, tuples=600_000)
# Spark's own recovery against CEC's: fewer keys, as applyInPandasWithState calls Python once
# per key and batch (measured: ~700 tuples/s with 100k keys on this machine).
COMPARE_WORKLOAD = Workload("10k items, window 10", items=10_000, window=10, tuples=200_000)


def _produce(topic: str, workload: Workload, seed: int) -> None:
    """The backlog: ``tuples`` items, uniform over ``items`` ids, partitioned by id (a key's
    tuples in one partition, which count windows need)."""
    from confluent_kafka import Producer

    producer = Producer({**client_config(), "linger.ms": "20", "enable.idempotence": "true"})
    rng = random.Random(seed)
    base = 1_700_000_000_000
    for i in range(workload.tuples):
        item = rng.randrange(workload.items)
        value = (
            f'{{"auction":{item},"bidder":0,"price":{rng.randrange(1, 1000)},'
            f'"channel":"c","url":"","dateTime":{base + i}}}'
        )
        while True:
            try:
                producer.produce(topic, value.encode(), str(item).encode(), item % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60):
        raise RecordsNotAcknowledged(
            f"the backlog for {topic} was not acknowledged; check the broker is up"
        )


@dataclass
class JobRun:
    """One job process: its batches (from the metrics store) and its CEC recovery line."""

    elapsed_s: float
    throughput: float
    mean_batch_ms: float
    first_batch_ms: float
    recovery: dict[str, Any] | None
    state_bytes: int


def _run_job(
    workdir: Path,
    name: str,
    topic: str,
    out: str,
    variant: Variant,
    window: int,
    store: Path,
    ending: dict[int, int] | None = None,
) -> JobRun:
    run_id = f"cec-bench-{name}-{uuid.uuid4().hex[:6]}"
    ck = workdir / f"ck-{out}"
    args = [
        sys.executable,
        "-m",
        "recovery_lib.job",
        "--job",
        "jobs.avgprice:JOB",
        "--input",
        f"bids={topic}",
        "--output-topic",
        out,
        "--partitions",
        str(PARTITIONS),
        "--checkpoints",
        str(ck),
        "--mode",
        variant.mode,
        "--param",
        f"window={window}",
        "--available-now",
        "--max-records",
        str(BATCH),
        "--metrics",
        str(store),
        "--run-id",
        run_id,
    ]
    if ending is not None:
        args += ["--ending-offsets", json.dumps({topic: {str(p): o for p, o in ending.items()}})]
    log = workdir / f"{run_id}.log"
    env = {**os.environ, **variant.env}
    t0 = time.monotonic()
    with log.open("w") as fh:
        code = subprocess.run(args, stdout=fh, stderr=subprocess.STDOUT, env=env).returncode
    elapsed = time.monotonic() - t0
    if code != 0:
        raise JobFailed(f"job run {name} failed (exit {code}); see {log}")
    batches = read_frame(
        store,
        "SELECT batch_id, input_rows, trigger_ms FROM micro_batches WHERE run_id = ? "
        "AND input_rows > 0 ORDER BY batch_id",
        [run_id],
    )
    rows = batches["input_rows"].tolist()
    ms = batches["trigger_ms"].tolist()
    steady_rows, steady_ms = sum(rows[1:]), sum(ms[1:])
    logged = recoveries_logged(log.read_text())
    recovery = logged[-1] if logged else None
    state = ck / "avgprice" / "state"
    state_bytes = (
        sum(f.stat().st_size for f in state.rglob("*") if f.is_file()) if state.exists() else 0
    )
    return JobRun(
        elapsed_s=round(elapsed, 2),
        throughput=round(steady_rows / (steady_ms / 1000), 1) if steady_ms else 0.0,
        mean_batch_ms=round(steady_ms / max(len(ms) - 1, 1), 1),
        first_batch_ms=float(ms[0]) if ms else 0.0,
        recovery=recovery,
        state_bytes=state_bytes,
    )


def _stop_and_recover(
    workdir: Path,
    tag: str,
    topic: str,
    out: str,
    variant: Variant,
    window: int,
    store: Path,
    first_part: dict[int, int],
) -> tuple[JobRun, JobRun]:
    """A first process applies the input up to ``first_part`` and ends, which loses what its
    driver held as a crash at a batch boundary does; a second one recovers and applies the
    rest."""
    first = _run_job(workdir, f"{tag}a", topic, out, variant, window, store, first_part)
    return first, _run_job(workdir, f"{tag}b", topic, out, variant, window, store)


def _topic(admin: TopicAdmin, prefix: str, name: str) -> str:
    topic = f"{prefix}.{name}"
    admin.create(topic, PARTITIONS)
    return topic


def run_cec_bench(
    out_prefix: str,
    console: Console,
    q_multiples: tuple[float, ...] = (1, 2, 4, 8),
    u_values: tuple[int, ...] = (25_000, 50_000, 100_000, 200_000),
    periods_ms: tuple[float, ...] = (25, 50, 100, 250),
    interval_ms: float = 10,
    seed: int = 7,
    scale: float = 1.0,
) -> dict[str, Any]:
    settings = get_settings()
    workdir = settings.home / "bench" / f"cec-{uuid.uuid4().hex[:6]}"
    workdir.mkdir(parents=True, exist_ok=True)
    store = settings.home / "metrics.duckdb"
    MetricsStore(store).close()  # the schema exists before the jobs write
    admin = TopicAdmin(client_config())
    prefix = f"bench.cec.{uuid.uuid4().hex[:6]}"
    report: dict[str, Any] = {
        "partitions": PARTITIONS,
        "batch_tuples": BATCH,
        "overhead": [],
        "recovery": [],
        "spark_recovery": [],
    }
    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)

    # Overhead (Fig. 5): the same backlog under each variant.
    def scaled(w: Workload) -> Workload:
        return Workload(w.name, w.items, w.window, max(int(w.tuples * scale), BATCH))

    report["scale"] = scale
    for w, workload in enumerate(map(scaled, OVERHEAD_WORKLOADS)):
        topic = _topic(admin, prefix, f"in{w}")
        _produce(topic, workload, seed)
        for v, variant in enumerate(OVERHEAD_VARIANTS):
            console.print(f"[bold]overhead[/] {workload.name}: {variant.name} ...")
            run = _run_job(
                workdir,
                f"o{w}{v}",
                topic,
                _topic(admin, prefix, f"o{w}{v}"),
                variant,
                workload.window,
                store,
            )
            report["overhead"].append(
                {"workload": workload.name, "variant": variant.name, **asdict(run)}
            )
            console.print_json(json.dumps(report["overhead"][-1]))

    # Recovery (Figs. 6-9, and Spark's own): two processes over one backlog.
    workload = scaled(RECOVERY_WORKLOAD)
    topic = _topic(admin, prefix, "rec")
    _produce(topic, workload, seed)
    first_part = _first_share(topic, 0.9)
    points: list[tuple[str, float, Variant]] = []
    base_env = {"RECOVERY_CEC_INTERVAL_MS": str(interval_ms), "RECOVERY_CEC_PERIOD_MS": "100"}
    open_windows_estimate = 9_000  # ~90 % of the items (window 10); measured below
    for m in q_multiples:
        env = {
            **base_env,
            "RECOVERY_CEC_EXTENT_TARGET": str(m * open_windows_estimate / PARTITIONS),
            "RECOVERY_CEC_REPLAY_TARGET": "inf",
        }
        points.append(("Q", m, Variant(f"Q = {m:g} x open windows", "cec", env)))
    for u in u_values:
        env = {
            **base_env,
            "RECOVERY_CEC_EXTENT_TARGET": "inf",
            "RECOVERY_CEC_REPLAY_TARGET": str(u),
        }
        points.append(("U", u, Variant(f"U = {u:,}", "cec", env)))
    for cp in periods_ms:
        env = {
            "RECOVERY_CEC_INTERVAL_MS": str(interval_ms),
            "RECOVERY_CEC_PERIOD_MS": str(cp),
            "RECOVERY_CEC_EXTENT_TARGET": str(open_windows_estimate / PARTITIONS),
            "RECOVERY_CEC_REPLAY_TARGET": "inf",
        }
        points.append(("CP", cp, Variant(f"CP = {cp:g} ms", "cec", env)))
    for i, (knob, value, variant) in enumerate(points):
        console.print(f"[bold]recovery[/] {variant.name} ...")
        out_topic = _topic(admin, prefix, f"r{i}")
        first, second = _stop_and_recover(
            workdir, f"r{i}", topic, out_topic, variant, workload.window, store, first_part
        )
        rec = second.recovery or {}
        entry = {
            "knob": knob,
            "value": value,
            "variant": variant.name,
            "throughput_before": first.throughput,
            "mean_batch_ms_before": first.mean_batch_ms,
            "restart_to_end_s": second.elapsed_s,
            **{k: v for k, v in rec.items() if k != "batch"},
        }
        report["recovery"].append(entry)
        console.print_json(json.dumps(entry))
    workload = scaled(COMPARE_WORKLOAD)
    topic = _topic(admin, prefix, "cmp")
    _produce(topic, workload, seed)
    first_part = _first_share(topic, 0.9)
    for k, variant in enumerate((Variant("CEC (default Q, U)", "cec"), *OVERHEAD_VARIANTS[2:])):
        console.print(f"[bold]restart[/] {workload.name}: {variant.name} ...")
        out_topic = _topic(admin, prefix, f"s{k}")
        first, second = _stop_and_recover(
            workdir, f"s{k}", topic, out_topic, variant, workload.window, store, first_part
        )
        rec = second.recovery or {}
        entry = {
            "workload": workload.name,
            "variant": variant.name,
            "throughput_before": first.throughput,
            "restart_to_end_s": second.elapsed_s,  # process start to the backlog's end
            "first_batch_after_restart_ms": second.first_batch_ms,
            # What the restart read: the state store's files, or CEC's extent and replay.
            "bytes_read_at_recovery": (
                first.state_bytes
                if not get_mode(variant.mode).keeps_own_log
                else (rec.get("scanned_bytes") or 0) + (rec.get("replayed_bytes") or 0)
            ),
            "ec_load_s": rec.get("ec_load_s"),
        }
        report["spark_recovery"].append(entry)
        console.print_json(json.dumps(entry))
    console.print("EC-load against the extent, the scan alone ...")
    report["ec_load_sweep"] = ec_load_sweep(console)
    report["summary"] = _summary(report)
    write_json_report(f"{out}.json", report)
    _chart(report, Path(f"{out}.png"))
    console.print_json(json.dumps(report["summary"]))
    console.print(f"report: {out}.json, chart: {out}.png")
    return report


def _first_share(topic: str, share: float) -> dict[int, int]:
    """Per partition, ``share`` of its records: where the first process stops."""

    settings = get_settings()
    probe = TailProbe(
        client_config(), settings.kafka_request_timeout_s, settings.source_end_probe_cap_s
    )
    try:
        ends = probe.ends((topic, p) for p in range(PARTITIONS))
    finally:
        probe.close()
    return {p: int(ends[(topic, p)] * share) for p in range(PARTITIONS)}


def linear_fit(xs: list[float], ys: list[float]) -> dict[str, Any] | None:
    """Least squares y = a + b x: slope in ms per 1,000 records, intercept in s, r^2."""
    if len(xs) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    ss_res = sum((y - (my + b * (x - mx))) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return {
        "ms_per_1000_records": round(b * 1e6, 3),
        "intercept_s": round(my - b * mx, 3),
        "r2": round(1 - ss_res / ss_tot, 3) if ss_tot else None,
    }


def ec_load_sweep(
    console: Console,
    extents: tuple[int, ...] = (20_000, 40_000, 80_000, 160_000, 320_000),
    open_windows: int = 2_000,
    repeats: int = 3,
) -> list[dict[str, Any]]:
    """EC-load against the extent, the scan alone (no Spark process beside it): one shard's
    log per extent, ``open_windows`` G_open records at its oldest end and results of other
    windows after them, so the backward scan must read ``extent`` records to find every
    footprint; the median of ``repeats`` scans per extent."""

    admin = TopicAdmin(client_config())
    out = []
    for extent in extents:
        topic = f"bench.cec.sweep.{uuid.uuid4().hex[:6]}"
        admin.create(topic, 1)
        log = OutputLog(topic, client_config())
        for i in range(extent):
            opening = i < open_windows
            kind = RecordKind.OPEN if opening else RecordKind.RESULT
            window = f"k{i}:w0" if opening else f"r{i}:w0"
            value = b"" if opening else json.dumps({"key": f"r{i}", "avg": 1.0}).encode()
            log.append(
                0,
                LogRecord(kind, window, window.split(":")[0], (0.0, 0.0, 0.0, 0.0), value,
                          open_windows, ((0, i),)).sealed(),
            )  # fmt: skip
        log.flush()
        times, found = [], None
        for _ in range(repeats):
            reader = OutputLog(topic, client_config())
            started = time.perf_counter()
            low, end = reader.bounds([0])[0]
            found = eventual_checkpoint(reader.newest_first(0, low, end), end)
            times.append(time.perf_counter() - started)
        entry = {
            "extent": extent,
            "ec_load_s": round(statistics.median(times), 4),
            "scanned_bytes": reader.cost.bytes,
            "records_read_back": found.extent if found is not None else None,
            "windows_found": len(found.footprints) if found is not None else None,
        }
        out.append(entry)
        console.print_json(json.dumps(entry))
        admin.delete(topic)
    return out


def _summary(report: dict[str, Any]) -> dict[str, Any]:
    by = {(r["workload"], r["variant"]): r["throughput"] for r in report["overhead"]}
    ratios = {}
    for workload in OVERHEAD_WORKLOADS:
        base = by.get((workload.name, OVERHEAD_VARIANTS[0].name)) or math.nan
        ratios[workload.name] = {
            v.name: round(by.get((workload.name, v.name), math.nan) / base, 3)
            for v in OVERHEAD_VARIANTS
        }
    rec = [r for r in report["recovery"] if r.get("extent")]
    slope = linear_fit([r["extent"] for r in rec], [r["ec_load_s"] for r in rec])
    sweep = report.get("ec_load_sweep") or []
    if sweep:
        slope = linear_fit([r["extent"] for r in sweep], [r["ec_load_s"] for r in sweep])
        slope["from"] = "ec_load_sweep (the scan alone, median of repeats)"
    return {"throughput_vs_no_checkpointing": ratios, "ec_load_vs_extent": slope}


def _chart(report: dict[str, Any], path: Path) -> None:
    fig, axes = new_figure(1, 3, figsize=(17, 4.5))
    ax = axes[0]
    names = [v.name for v in OVERHEAD_VARIANTS]
    for k, workload in enumerate(OVERHEAD_WORKLOADS):
        values = [
            next(
                (
                    r["throughput"]
                    for r in report["overhead"]
                    if r["workload"] == workload.name and r["variant"] == n
                ),
                0,
            )
            for n in names
        ]
        ax.bar([i + k * 0.4 for i in range(len(names))], values, width=0.4, label=workload.name)
    ax.set_xticks([i + 0.2 for i in range(len(names))], names, rotation=20, ha="right")
    ax.set_ylabel("input tuples / s")
    ax.set_title("overhead (paper Fig. 5)")
    ax.legend(fontsize=8)
    ax = axes[1]
    for knob, marker in (("Q", "o"), ("U", "s"), ("CP", "^")):
        pts = [r for r in report["recovery"] if r["knob"] == knob and r.get("extent")]
        ax.scatter(
            [r["extent"] for r in pts], [r["ec_load_s"] for r in pts], marker=marker, label=knob
        )
    sweep = report.get("ec_load_sweep") or []
    if sweep:
        ax.plot(
            [r["extent"] for r in sweep],
            [r["ec_load_s"] for r in sweep],
            "k.-",
            label="scan alone (sweep)",
        )
    ax.set_xlabel("extent (log records read back)")
    ax.set_ylabel("EC-load (s)")
    ax.set_title("EC-load against the extent (Figs. 6-7)")
    ax.legend()
    ax = axes[2]
    cp = [r for r in report["recovery"] if r["knob"] == "CP"]
    ax.plot(
        [r["value"] for r in cp],
        [r["mean_batch_ms_before"] for r in cp],
        "o-",
        label="mean batch time (ms)",
    )
    ax2 = ax.twinx()
    ax2.plot(
        [r["value"] for r in cp],
        [r.get("extent") or 0 for r in cp],
        "s--",
        color="C1",
        label="extent",
    )
    ax.set_xlabel("CP (ms), CI fixed")
    ax.set_title("checkpoint period (Figs. 8-9)")
    ax.legend(loc="upper left", fontsize=8)
    ax2.legend(loc="upper right", fontsize=8)
    save_figure(fig, path, dpi=100)


def add_ec_load_sweep(out_prefix: str, console: Console) -> dict[str, Any]:
    """Run only the EC-load sweep and add it to an existing report (``recovery bench cec
    --only ec-load``)."""
    path = Path(f"{out_prefix}.json")
    report = json.loads(path.read_text())
    report["ec_load_sweep"] = ec_load_sweep(console)
    report["summary"] = _summary(report)
    write_json_report(path, report)
    _chart(report, Path(f"{out_prefix}.png"))
    console.print_json(json.dumps(report["summary"]))
    return report
