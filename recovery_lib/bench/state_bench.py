"""``recovery bench state``: recovery against state size.

A keyed job whose state holds one row per account (jobs/keyed_state.py) runs at 10^4 ... 10^7
accounts, every account stated in the warm-up, then the same timed input rate and one SIGKILL
of the job's process (for kazoo its leader, for liverobin a replica), under native, standby,
kazoo and liverobin, with RocksDB (changelog checkpointing on) and, where the state fits in
memory, the HDFS-backed default store. Each point is one experiment of the comparison
(compare_bench.CompareBench.experiment): a faulty and a reference run judged by the oracle.

Per point: restart, recovery (Clonos: latency back within 10 % of before), output gap, p99 of
the 30 s after the kill over the 30 s before, the state's size on disk, and where the restart's
time went, measured from the metrics store (the job's ``job_phases`` event, the supervisor's
events and the first micro-batch's progress):

  detect      the kill -> the supervisor (or the standby) saw it
  imports     the new process started -> the library and PySpark imported
  session     -> the JVM up and the SparkSession built (topics checked, heartbeat on)
  build       -> the job's query built (the source's schema, the plan)
  start       -> the streaming query started (the offset log read)
  first batch -> the first micro-batch after the restart done: its state store load (RocksDB's
                 own metric; the HDFS-backed store has none: its first batch's addBatch over
                 the median of the batches before the kill), planning, the backlog it carries
  rest        the output gap not covered by the above: the following backlog batches

For a standby, ``takeover`` (the lease expired -> the query starts from the shipped state)
replaces the process start phases; replicated modes do not restart.

``cuts`` ("off", "on"): the restarting variants run once with each setting of what this project
cuts from a restart (``RESTART_CUTS``), in the same invocation: the before and after of a cut
as a ratio of two runs on the same machine and input. ``--job q3`` measures another job the
same way on its own input (NexMark; one point per store instead of a size series).
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.compare_bench import (
    KAZOO_TRIGGER_S,
    LIVEROBIN_PERIOD_S,
    VARIANTS,
    CompareBench,
    CompareConfig,
)
from recovery_lib.bench.machine import broker_description
from recovery_lib.bench.ratios import ratio
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError
from recovery_lib.files import write_json_report
from recovery_lib.metrics.event_log import draw_waterfall, first_batch
from recovery_lib.metrics.resources import ResourceSampler
from recovery_lib.metrics.store import read_frame
from recovery_lib.modes import get_mode
from recovery_lib.settings import environment, get_settings

JOB = "keyed_state"
# What the project cuts from a restart, as the settings that turn each off ("off": as before
# the cuts; "on": as the product runs). spark/class_archive.py: the driver JVM's class data;
# the readers' switch to the broker's usual fetch wait after 2 s (before) or 0.5 s without a
# record; RocksDB snapshots uploaded every 10 s instead of Spark's 60 s (a restart replays the
# changelog after the newest snapshot); Python workers forked from a daemon that imported the
# library (spark/python_daemon.py); Spark's Python processes importing PySpark's bytecode, not
# its zip (spark/worker_bytecode.py). (Cuts without a setting, always on: the job imports
# no pandas to start, the source's planning processes skip its sink, topics and metrics store
# are made ready beside the JVM.)
RESTART_CUTS: dict[str, dict[str, str]] = {
    "off": {
        "RECOVERY_SPARK_CLASS_ARCHIVE": "false",
        "RECOVERY_KAFKA_SLOW_FETCH_AFTER_S": "2.0",
        "RECOVERY_SPARK_STATE_MAINTENANCE_INTERVAL_S": "60",
        "RECOVERY_STANDBY_REHEARSE_SINK": "false",
        "RECOVERY_SPARK_PYTHON_PREIMPORT": "false",
        "RECOVERY_SPARK_WORKER_BYTECODE": "false",
        "RECOVERY_SPARK_CHECKPOINT_FILE_API": "filecontext",
        "RECOVERY_SPARK_JIT": "tiered",
    },
    "on": {},
    # Not a default (a second idle driver per job): a spare process, started and built,
    # takes the job at its death (runtime/spare.py).
    "spare": {"RECOVERY_SUPERVISOR_SPARE": "true"},
}
STORES = ("rocksdb", "hdfs")
# The goal's ratios: each standby's output gap over native's.
NATIVE, STANDBY, HOT_STANDBY = "native", "standby", "standby-hot"
STATE_VARIANTS = (NATIVE, STANDBY, HOT_STANDBY, "kazoo", "liverobin")
# The names of RocksDB's custom metrics that time a state store's load on a restart.
LOAD_METRICS = ("rocksdbLoadLatencyMs", "rocksdbReplayChangeLogLatencyMs")


@dataclass(frozen=True)
class StateConfig:
    job: str = JOB  # another job: its own input, one point per store (keys 0)
    sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    stores: tuple[str, ...] = STORES
    variants: tuple[str, ...] = STATE_VARIANTS
    # The HDFS-backed store keeps every key in the driver's heap, twice (two versions).
    hdfs_max_keys: int = 1_000_000
    rate: float = 2_000.0
    duration_s: float = 90.0
    fail_at_s: float = 40.0
    seed: int = 42
    # Replicated modes at a batch every 8 s: two replicas on 2 cores keep up then, and a
    # replaced replica catches up (compare_bench.KAZOO_TRIGGER_S).
    liverobin_period_s: float = LIVEROBIN_PERIOD_S
    kazoo_trigger_s: float | None = KAZOO_TRIGGER_S
    # Driver heap from this many keys on (the state and the warm-up's batches).
    large_keys: int = 1_000_000
    large_driver_memory: str = "3g"
    keep_workdirs: bool = False  # a 10^7-key point leaves gigabytes of checkpoints
    cuts: tuple[str, ...] = ("on",)  # RESTART_CUTS to run the restarting variants with
    # Spark's event log of each point: the restart's first batch taken apart (the waterfall).
    event_log: bool = False

    @property
    def keyed(self) -> bool:
        return self.job == JOB

    def points(self) -> list[tuple[str, int, str, str]]:
        """(store, keys, variant, cut) in the order they run: small states first; a replicated
        variant once (it does not restart), with the product's cuts."""
        sizes = sorted(self.sizes) if self.keyed else [0]
        return [
            (store, keys, variant, cut)
            for keys in sizes
            for store in self.stores
            if not (store == "hdfs" and keys > self.hdfs_max_keys)
            for variant in self.variants
            for cut in (self.cuts if restarts(variant) else self.cuts[-1:])
        ]

    def catch_up_timeout_s(self, keys: int) -> float:
        """The warm-up states every key: allow ~2,000 keys/s on top of the usual 300 s."""
        return 300.0 + keys / 2_000


def restarts(variant: str) -> bool:
    """A replica's death is masked: only the other variants restart."""
    return not get_mode(VARIANTS[variant].mode).replicated


def point_settings(
    store: str, keys: int, cut: str, cfg: StateConfig, event_log: Path | None = None
) -> Any:
    """The settings a point's job processes start with (they inherit the environment)."""
    changed = {"RECOVERY_STATE_STORE": store, **RESTART_CUTS[cut]}
    if event_log is not None:
        changed["RECOVERY_SPARK_EVENT_LOG_DIR"] = str(event_log)
    if keys >= cfg.large_keys:
        changed["RECOVERY_SPARK_DRIVER_MEMORY"] = cfg.large_driver_memory
    return environment(changed)


def _first_batch(event_log: Path, failure_ms: int) -> dict[str, Any]:
    """The restarted application's first batch from the point's event log (its error, if
    the log cannot say)."""
    try:
        return first_batch(event_log, failure_ms).as_dict()
    except ConfigurationError as exc:
        return {"error": str(exc)}


def state_size_bytes(workdir: Path, job: str = JOB) -> int | None:
    """The largest state directory of the faulty run's checkpoints (the primary's; a standby's
    shipped copy is another)."""
    sizes = [
        sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        for d in (workdir / "faulty").rglob("state")
        if d.is_dir() and d.parent.name == job
    ]
    return max(sizes) if sizes else None


@dataclass
class Breakdown:
    """Where a restart's output gap went (seconds; None: not measured for this mode)."""

    detect_s: float | None = None
    imports_s: float | None = None
    session_s: float | None = None
    build_s: float | None = None
    takeover_s: float | None = None
    start_s: float | None = None
    first_batch_s: float | None = None
    state_load_s: float | None = None
    state_load_source: str | None = None
    first_batch_planning_s: float | None = None
    first_batch_rows: int | None = None
    rest_s: float | None = None
    notes: list[str] = field(default_factory=list)


def _s(later: float | None, earlier: float | None) -> float | None:
    if later is None or earlier is None:
        return None
    return round((later - earlier) / 1000, 3)


def restart_breakdown(
    metrics: Path, run_id: str, failure_ms: int, output_gap_s: float | None
) -> Breakdown:
    """The phases of the first recovery after ``failure_ms`` of run ``run_id``."""
    events = read_frame(
        metrics,
        "SELECT kind, ts_ms, detail FROM events WHERE run_id = ? AND ts_ms >= ? ORDER BY ts_ms",
        [run_id, failure_ms],
    )
    batches = read_frame(
        metrics,
        "SELECT batch_id, ts_ms, trigger_ms, add_batch_ms, planning_ms, input_rows, "
        "state_custom FROM micro_batches WHERE run_id = ? ORDER BY ts_ms",
        [run_id],
    )
    out = Breakdown()

    def first(kind: str) -> tuple[int, dict[str, Any]] | None:
        rows = events[events["kind"] == kind]
        if rows.empty:
            return None
        row = rows.iloc[0]
        return int(row["ts_ms"]), json.loads(row["detail"] or "{}")

    detected = first("failure_detected")
    restart = first("restart")
    phases = first("job_phases")
    if detected:
        out.detect_s = _s(detected[0], failure_ms)
    if phases is None:
        out.notes.append("no job_phases event after the kill: the job did not restart")
        return out
    p = phases[1]
    started = p.get("query_started_ms")
    if "takeover_ms" in p:  # a standby: built ahead of time, took over
        out.takeover_s = _s(started, p["takeover_ms"])
    else:
        out.imports_s = _s(p.get("imported_ms"), restart[0] if restart else None)
        out.session_s = _s(p.get("session_ready_ms"), p.get("imported_ms"))
        out.build_s = _s(p.get("query_built_ms"), p.get("session_ready_ms"))
        out.start_s = _s(started, p.get("query_built_ms"))
    before = batches[(batches["ts_ms"] < failure_ms) & (batches["ts_ms"] >= failure_ms - 30_000)]
    after = batches[batches["ts_ms"] >= (started or failure_ms)]
    if after.empty:
        out.notes.append("no micro-batch after the restart")
        return out
    b = after.iloc[0]
    out.first_batch_s = round(float(b["trigger_ms"] or 0) / 1000, 3)
    out.first_batch_planning_s = round(float(b["planning_ms"] or 0) / 1000, 3)
    out.first_batch_rows = int(b["input_rows"] or 0)
    custom = json.loads(b["state_custom"]) if b["state_custom"] else {}
    loads = [custom[m] for m in LOAD_METRICS if m in custom]
    if loads:
        out.state_load_s = round(sum(loads) / 1000, 3)
        out.state_load_source = "+".join(m for m in LOAD_METRICS if m in custom)
    elif not before.empty and b["add_batch_ms"] is not None:
        typical = statistics.median(float(x or 0) for x in before["add_batch_ms"])
        out.state_load_s = round(max(0.0, float(b["add_batch_ms"]) - typical) / 1000, 3)
        out.state_load_source = "first addBatch over the median before the kill (estimate)"
    first_done = int(b["ts_ms"]) + int(b["trigger_ms"] or 0)
    if output_gap_s is not None:  # outputs leave during the first batch, before its end
        out.rest_s = round(max(0.0, output_gap_s - (first_done - failure_ms) / 1000), 3)
    return out


class StateBench:
    def __init__(self, cfg: StateConfig, out_prefix: str, console: Console) -> None:
        self.cfg = cfg
        self.out = Path(out_prefix)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.console = console
        self.report: dict[str, Any] = {
            "job": JOB,
            "config": asdict(self.cfg),
            "machine": f"2 cores, one host, {broker_description()}",
            "points": [],
        }

    def load(self) -> None:
        """Continue an earlier report (``--append``): its points stay unless re-measured."""
        path = Path(f"{self.out}.json")
        if path.exists():
            self.report["points"] = json.loads(path.read_text()).get("points", [])

    def run(self, progress: Callable[[int, str], None] | None = None) -> dict[str, Any]:
        unknown = sorted(set(self.cfg.variants) - set(VARIANTS))
        if unknown:
            raise ConfigurationError(f"unknown variant(s) {unknown}; choose from {STATE_VARIANTS}")
        bad = sorted(set(self.cfg.stores) - set(STORES))
        if bad:
            raise ConfigurationError(f"unknown state store(s) {bad}; choose from {STORES}")
        odd = sorted(set(self.cfg.cuts) - set(RESTART_CUTS))
        if odd or not self.cfg.cuts:
            raise ConfigurationError(f"cuts {odd or '(none)'}; choose from {list(RESTART_CUTS)}")
        for i, (store, keys, variant, cut) in enumerate(self.cfg.points()):
            if progress:
                size = f"{keys:,} keys" if keys else self.cfg.job
                progress(i, f"{variant} {store} {size} cuts {cut}")
            started = time.monotonic()
            entry = self.point(store, keys, variant, cut)
            entry["elapsed_s"] = round(time.monotonic() - started, 1)
            here = (store, keys, variant, cut)
            kept = [e for e in self.report["points"] if _point(e) != here]
            self.report["points"] = [*kept, entry]
            self._relate()
            self.save()
        return self.report

    def point(self, store: str, keys: int, variant: str, cut: str = "on") -> dict[str, Any]:
        cfg = self.cfg
        compare = CompareConfig(
            job=cfg.job,
            rate=cfg.rate,
            duration_s=cfg.duration_s,
            fail_at_s=cfg.fail_at_s,
            seed=cfg.seed,
            liverobin_period_s=cfg.liverobin_period_s,
            kazoo_trigger_s=cfg.kazoo_trigger_s,
            keys=keys or None,
            catch_up_timeout_s=cfg.catch_up_timeout_s(keys),
            # A point's topics hold 10^7 outputs twice at the largest size: the broker keeps
            # them in memory, and the point's report has what it needs.
            keep_output=False,
        )
        details = self.out.parent / f"{self.out.name}_runs" / f"{store}_{keys}_{cut}"
        bench = CompareBench(compare, str(details), self.console)
        sampler = ResourceSampler()
        event_log = details / f"{variant}_eventlog" if cfg.event_log else None
        if event_log is not None:
            shutil.rmtree(event_log, ignore_errors=True)
        with point_settings(store, keys, cut, cfg, event_log):
            entry = bench.experiment(VARIANTS[variant], sampler)
        entry.update(sampler.figures)
        entry.update(store=store, keys=keys, variant=variant, cut=cut)
        workdir = Path(entry.get("workdir") or "")
        if entry.get("workdir"):
            entry["state_bytes"] = state_size_bytes(workdir, cfg.job)
        if restarts(variant) and entry.get("failure_ms") and entry.get("faulty_run_id"):
            entry["breakdown"] = asdict(
                restart_breakdown(
                    get_settings().home / "metrics.duckdb",
                    entry["faulty_run_id"],
                    entry["failure_ms"],
                    entry.get("output_gap_s"),
                )
            )
            if event_log is not None:
                entry["first_batch"] = _first_batch(event_log, entry["failure_ms"])
        if entry.get("workdir") and not cfg.keep_workdirs:
            shutil.rmtree(workdir, ignore_errors=True)
        if event_log is not None and not cfg.keep_workdirs:
            shutil.rmtree(event_log, ignore_errors=True)  # tens of MB per application
        return entry

    # -- the goals, as ratios of this run's points --------------------------------------------

    def _relate(self) -> None:
        """Per store and variant: output gap at the largest size over the smallest; per store:
        standby's output gap over native's at the largest size."""
        goals: dict[str, Any] = {}
        product = product_cut(self.cfg.cuts)  # the goals are the product's, with its cuts
        for store in self.cfg.stores:
            measured = [
                e
                for e in self.report["points"]
                if e["store"] == store
                and e.get("output_gap_s") is not None
                and e.get("cut", product) == product
            ]
            growth: dict[str, Any] = {}
            for variant in self.cfg.variants:
                by_size = sorted(
                    (e["keys"], e["output_gap_s"]) for e in measured if e["variant"] == variant
                )
                if len(by_size) >= 2 and by_size[0][1]:
                    growth[variant] = {
                        "smallest": by_size[0][0],
                        "largest": by_size[-1][0],
                        "largest_over_smallest": round(by_size[-1][1] / by_size[0][1], 3),
                    }
            sizes = sorted({e["keys"] for e in measured})
            vs_native: dict[str, float | None] = {}
            at = {e["variant"]: e for e in measured if sizes and e["keys"] == sizes[-1]}
            native = at.get(NATIVE)
            for name in (STANDBY, HOT_STANDBY):
                standby = at.get(name)
                vs_native[name] = (
                    round(standby["output_gap_s"] / native["output_gap_s"], 3)
                    if standby and native and native["output_gap_s"]
                    else None
                )
            best = min((r for r in vs_native.values() if r is not None), default=None)
            replicated = [
                growth.get(v, {}).get("largest_over_smallest")
                for v in self.cfg.variants
                if get_mode(VARIANTS[v].mode).replicated
            ]
            goals[store] = {
                "output_gap_growth": growth,
                "replicated_flat": all(r is not None and r <= 1.5 for r in replicated)
                if any(r is not None for r in replicated)
                else None,
                "standby_over_native_at_largest": vs_native,
                "standby_goal_met": best <= 0.25 if best is not None else None,
            }
        self.report["goals"] = goals
        self.report["cuts"] = cut_ratios(self.report["points"], self.cfg.cuts)

    def save(self) -> None:
        write_json_report(f"{self.out}.json", self.report)
        chart(self.report, Path(f"{self.out}.png"))
        first_batch_chart(self.report, Path(f"{self.out}_first_batch.png"))
        Path(f"{self.out}_tables.md").write_text(tables_md(self.report))


PHASES = (
    ("detect_s", "detect"),
    ("imports_s", "imports"),
    ("session_s", "JVM + session"),
    ("build_s", "build"),
    ("takeover_s", "takeover"),
    ("start_s", "query start"),
    ("first_batch_s", "first batch"),
    ("rest_s", "backlog after it"),
)


def _cut(e: dict[str, Any]) -> str:
    """A point's cut setting; points of reports from before the cuts ran as the product."""
    return e.get("cut", "on")


def _point(e: dict[str, Any]) -> tuple[str, int, str, str]:
    return (e["store"], e["keys"], e["variant"], _cut(e))


def product_cut(cuts: tuple[str, ...]) -> str:
    """The cut setting the product runs with among ``cuts`` ("on" if measured: a spare is an
    option, not the default), else the last."""
    return "on" if "on" in cuts else cuts[-1]


def cut_ratios(points: list[dict[str, Any]], cuts: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per store, size and restarting variant measured with the first cut setting and a
    later one: the restart and the output gap after over before, one row per later setting."""
    if len(cuts) < 2:
        return []
    before_cut = cuts[0]
    by = {_point(e): e for e in points}
    out = []
    for after_cut in cuts[1:]:
        for (store, keys, variant, cut), before in sorted(by.items()):
            after = by.get((store, keys, variant, after_cut))
            if cut != before_cut or after is None:
                continue
            row: dict[str, Any] = {"store": store, "keys": keys, "variant": variant,
                                   "before": before_cut, "after": after_cut}  # fmt: skip
            for key in ("restart_time_s", "output_gap_s"):
                b, a = before.get(key), after.get(key)
                row[key] = {"before": b, "after": a, "after_over_before": ratio(a, b)}
            out.append(row)
    return out


def rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per point (the docs' table)."""
    out = []
    for e in sorted(report.get("points", []), key=lambda e: (e["store"], e["keys"], e["variant"])):
        b = e.get("breakdown") or {}
        out.append(
            {
                "store": e["store"],
                "keys": e["keys"],
                "variant": e["variant"],
                "cuts": _cut(e),
                "state on disk (MB)": round(e["state_bytes"] / 1e6, 1)
                if e.get("state_bytes")
                else None,
                "restart (s)": e.get("restart_time_s"),
                "recovery (s)": e.get("recovery_time_s"),
                "output gap (s)": e.get("output_gap_s"),
                "state load (s)": b.get("state_load_s"),
                "p99 after/before": e.get("p99_after_over_before"),
                "oracle": f"{e.get('verdict')} {e.get('guarantee') or ''}".strip()
                if "verdict" in e
                else e.get("not_applicable") or e.get("error"),
            }
        )
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no points)\n"
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(r[k]) for k in head) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def breakdown_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Where each restart's output gap went (the variants that restart), one row per point."""
    out = []
    for e in sorted(report.get("points", []), key=lambda e: (e["store"], e["keys"], e["variant"])):
        b = e.get("breakdown")
        if not b:
            continue
        row: dict[str, Any] = {
            "store": e["store"],
            "keys": e["keys"],
            "variant": e["variant"],
            "cuts": _cut(e),
        }
        row.update({f"{name} (s)": b.get(key) for key, name in PHASES})
        row["of which state load (s)"] = b.get("state_load_s")
        row["output gap (s)"] = e.get("output_gap_s")
        out.append(row)
    return out


def tables_md(report: dict[str, Any]) -> str:
    """The points and where the restarts' time went, as Markdown (docs/standby.md and
    docs/replication.md embed them)."""
    return (
        _markdown(rows(report))
        + "\nWhere a restart's time went (seconds after the kill; first batch: the first "
        "micro-batch after the restart, from its start to its end):\n\n"
        + _markdown(breakdown_rows(report))
    )


def chart(report: dict[str, Any], path: Path) -> None:
    """Left: output gap against state size per store and variant (log x). Right: where the
    restart's time went at each size (native and standby), stacked."""
    points = [e for e in report.get("points", []) if e.get("output_gap_s") is not None]
    fig, axes = new_figure(1, 2, figsize=(15, 6))
    ax = axes[0]
    for store, style in (("rocksdb", "-"), ("hdfs", "--")):
        for variant in STATE_VARIANTS:
            line = sorted(
                (e["keys"], e["output_gap_s"])
                for e in points
                if e["store"] == store and e["variant"] == variant and _cut(e) == "on"
            )
            if line:
                ax.plot(*zip(*line, strict=True), style, marker="o",
                        label=f"{variant} ({store})")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("distinct keys in state")
    ax.set_ylabel("output gap after the kill (s)")
    ax.set_title("keyed_state: output gap against state size")
    ax.legend(fontsize=8)
    ax = axes[1]
    stacked = [
        e
        for e in sorted(points, key=lambda e: (e["store"], e["variant"], e["keys"], _cut(e)))
        if e.get("breakdown")  # the variants that restart
    ]
    labels = [
        f"{e['variant'][:3]} {e['store'][:3]}\n{e['keys']:.0e} {e.get('cut', 'on')}"
        for e in stacked
    ]
    bottom = [0.0] * len(stacked)
    for key, name in PHASES:
        values = [max(0.0, (e["breakdown"].get(key) or 0.0)) for e in stacked]
        ax.bar(range(len(stacked)), values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    loads = [(e["breakdown"].get("state_load_s") or 0.0) for e in stacked]
    ax.scatter(range(len(stacked)), loads, color="black", marker="_", s=200, zorder=3,
               label="of which state load")  # fmt: skip
    ax.set_xticks(range(len(stacked)), labels, fontsize=7)
    ax.set_ylabel("seconds after the kill")
    ax.set_title("where a restart's time goes")
    ax.legend(fontsize=7)
    save_figure(fig, path, dpi=90)


def first_batch_chart(report: dict[str, Any], path: Path) -> None:
    """One waterfall per point measured with ``--event-log``: the restart's first batch from
    the kill on (nothing is drawn without such a point)."""
    points = [
        e
        for e in sorted(report.get("points", []), key=lambda e: (e["store"], e["keys"], _cut(e)))
        if (e.get("first_batch") or {}).get("spans")
    ]
    if not points:
        return
    heights = [3 + 0.28 * (len(e["first_batch"]["spans"]) + len(e["first_batch"]["tasks"]))
               for e in points]  # fmt: skip
    fig, axes = new_figure(len(points), 1, figsize=(13, sum(heights)),
                           gridspec_kw={"height_ratios": heights}, squeeze=False)  # fmt: skip
    for ax, e in zip(axes[:, 0], points, strict=True):
        fb = e["first_batch"]
        took = (fb["batch_end_ms"] - fb["batch_start_ms"]) / 1000
        title = (
            f"{e['variant']} {e['store']} {e['keys']:,} keys, cuts {_cut(e)}: output gap "
            f"{e.get('output_gap_s')} s; first batch {fb['batch_id']} "
            f"({fb['input_rows']:,} rows) {took:.2f} s"
        )
        draw_waterfall(ax, fb, int(e["failure_ms"]), title)
    save_figure(fig, path, dpi=90)
