"""``recovery bench replication``: active replication against native restart and standby
takeover, in one invocation (paper 002). Every run is an experiment (a faulty run and a
failure-free reference, judged by the oracle); the report is rewritten after each one.

Parts:

masking     per job, one replica SIGKILLed mid-run (KaZoo: the leader, then the follower;
            LiveRobin: a replica) against a native restart and a standby takeover of the same
            job at the same rate: p99 of the 30 s after the kill over the 30 s before, output
            gap, recovery time and its ratio to native (the goal: <= 0.10).
cost        no failure: each mode's p50/p99 and throughput against one replica.
heartbeat   LiveRobin's latency by heartbeat period (the batch interval).
slow        LiveRobin with one input partition's heartbeats late (paper Fig. 13).
kills       repeated replica kills per mode and job, each dead replica replaced before the
            next: every run judged exactly-once or not.
zombie      KaZoo's leader paused past its lease, then resumed: the writes it tried after the
            new leader took over were refused by the sink guard or dropped by the gate.

Everything runs on one host: two replicas share its 2 cores (each gets half of what a single
replica gets), so the replicated runs carry twice the compute of the native one.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.ratios import ratio
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report
from recovery_lib.files import write_json_report
from recovery_lib.ha.replication.gate import late_copies, raw_topic
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.metrics.resources import ResourceSampler, during_run
from recovery_lib.modes import get_mode

PARTS = ("masking", "cost", "heartbeat", "slow", "kills", "zombie")
# The masking runs of one job: (name, mode, victim).
MASKING_RUNS = (
    ("native", "native", None),
    ("standby", "standby", None),
    ("kazoo-leader", "kazoo", "leader"),
    ("kazoo-follower", "kazoo", "follower"),
    ("liverobin", "liverobin", "a"),
)
GUARD_REFUSAL = re.compile(r"kazoo guard: .* refused: not the published batch")


def sink_for(mode: str) -> str:
    """Replicas write through the release sink and the gate; the single-process modes dedup."""
    return "release" if get_mode(mode).replicated else "dedup"


class ReplicationBench:
    def __init__(
        self,
        out_prefix: str,
        console: Console,
        append: bool = False,
        liverobin_period_s: float | None = None,
        reuse: bool = False,
    ) -> None:
        # Take a run's result from its experiment report at ``out`` when one exists (an
        # interrupted invocation resumed with the same settings).
        self.reuse = reuse
        # LiveRobin's heartbeat period in masking, cost and kills (None: the setting). A batch
        # ends at every heartbeat, so a period shorter than a batch takes never catches up.
        self.liverobin_period_s = liverobin_period_s
        self.out = Path(out_prefix)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.console = console
        self.report: dict[str, Any] = {
            "machine": "2 cores shared by the broker, the generator and both replicas",
            **{part: [] for part in PARTS},
        }
        if append and Path(f"{self.out}.json").exists():
            self.report.update(json.loads(Path(f"{self.out}.json").read_text()))

    def _put(self, part: str, entry: dict[str, Any]) -> None:
        """Add ``entry`` to ``part``; an appended report's entry of the same name is replaced."""
        kept = [e for e in self.report[part] if e.get("name") != entry["name"]]
        self.report[part] = [*kept, entry]
        self._save()

    def rederive(self) -> None:
        """Recompute every masking row's comparison from its runs, and redraw the chart."""
        self.report["masking"] = [
            masking_row(row["name"], row["rate"], row["runs"]) for row in self.report["masking"]
        ]
        self._save()

    def _save(self) -> None:
        write_json_report(f"{self.out}.json", self.report)
        chart(self.report, Path(f"{self.out}.png"))

    def _experiment(self, name: str, cfg: ExperimentConfig) -> dict[str, Any]:
        self.console.print(
            f"[bold]{name}[/]: {cfg.query} {cfg.mode} ({cfg.victim or '-'}) {cfg.fail} at "
            f"{cfg.rate:,.0f} ev/s ..."
        )
        t0 = time.monotonic()
        path = self.out.parent / f"{self.out.name}_{name}.json"
        if self.reuse and path.exists():  # an earlier invocation's run of the same config
            result = json.loads(path.read_text())
            self.console.print(f"  reused {path}")
            return self._entry(name, cfg, result, path, "", result.get("elapsed_s", 0.0))
        sampler = ResourceSampler()
        exp = Experiment(cfg, self.console, progress=lambda _m: None, on_run=during_run(sampler))
        try:
            result = exp.run()
        except RuntimeError as exc:  # e.g. a mode that cannot keep up: a result, not a crash
            self.console.print(f"  [red]failed[/]: {exc}")
            return {"name": name, "query": cfg.query, "mode": cfg.mode, "victim": cfg.victim,
                    "rate": cfg.rate, "heartbeat_period_s": cfg.heartbeat_period_s,
                    "error": str(exc), "workdir": str(exp.workdir),
                    "elapsed_s": round(time.monotonic() - t0, 1)}  # fmt: skip
        result["resources"] = sampler.figures  # the faulty run's processes, memory, CPU
        path = write_report(result, path)
        return self._entry(
            name, cfg, result, path, str(exp.workdir), round(time.monotonic() - t0, 1)
        )

    def _entry(
        self,
        name: str,
        cfg: ExperimentConfig,
        result: dict[str, Any],
        path: Path,
        workdir: str,
        elapsed_s: float,
    ) -> dict[str, Any]:
        c = result["consistency"]
        entry = {
            "name": name,
            "query": cfg.query,
            "mode": cfg.mode,
            "victim": cfg.victim,
            "fail": cfg.fail,
            "rate": cfg.rate,
            "duration_s": cfg.duration_s,
            "heartbeat_period_s": cfg.heartbeat_period_s,
            "throughput_eps": result["throughput_eps"],
            "latency_ms": result["latency_ms"],
            "p99_30s_before_ms": result.get("p99_30s_before_ms"),
            "p99_30s_after_ms": result.get("p99_30s_after_ms"),
            "p99_after_over_before": result.get("p99_after_over_before"),
            "restart_time_s": result["restart_time_s"],
            "recovery_time_s": result["recovery_time_s"],
            "output_gap_s": result["output_gap_s"],
            "failures": result["failures"],
            "takeovers": result.get("takeovers", []),
            "verdict": c["verdict"],
            "guarantee": c.get("guarantee"),
            "consistency": {
                k: c.get(k)
                for k in ("outputs", "reference_outputs", "lost", "duplicated", "divergent")
            }
            | {"inconclusive_because": c.get("inconclusive_because")},
            "experiment_report": str(path),
            "workdir": workdir,
            "elapsed_s": elapsed_s,
            "resources": result.get("resources"),
        }
        self.console.print(
            f"  {c['verdict']} {c.get('guarantee')}, p99 after/before "
            f"{entry['p99_after_over_before']}, gap {entry['output_gap_s']} s, recovery "
            f"{entry['recovery_time_s']} s"
        )
        return entry

    def _config(self, query: str, mode: str, rate: float, **kw: Any) -> ExperimentConfig:
        leaderless = get_mode(mode).leaderless
        if leaderless and self.liverobin_period_s and "heartbeat_period_s" not in kw:
            kw["heartbeat_period_s"] = self.liverobin_period_s
        return ExperimentConfig(query=query, mode=mode, sink=sink_for(mode), rate=rate, **kw)

    # -- parts -------------------------------------------------------------------------------

    def masking(
        self, queries: list[str], rates: dict[str, float], duration_s: float, fail_at_s: float
    ) -> None:
        for query in queries:
            runs: dict[str, dict[str, Any]] = {}
            for name, mode, victim in MASKING_RUNS:
                cfg = self._config(
                    query,
                    mode,
                    rates[query],
                    fail="driver-kill",
                    fail_at_s=fail_at_s,
                    duration_s=duration_s,
                    victim=victim,
                )
                runs[name] = self._experiment(f"masking_{query}_{name}", cfg)
            self._put("masking", masking_row(query, rates[query], runs))

    def cost(self, queries: list[str], rates: dict[str, float], duration_s: float) -> None:
        for query in queries:
            runs = {
                mode: self._experiment(
                    f"cost_{query}_{mode}",
                    self._config(query, mode, rates[query], fail=None, duration_s=duration_s),
                )
                for mode in ("native", "kazoo", "liverobin")
            }
            base = runs["native"].get("latency_ms") or {}
            self._put(
                "cost",
                {
                    "name": query,
                    "rate": rates[query],
                    "runs": runs,
                    "p50_vs_single": {
                        m: ratio(_latency(r, "p50"), base.get("p50")) for m, r in runs.items()
                    },
                    "p99_vs_single": {
                        m: ratio(_latency(r, "p99"), base.get("p99")) for m, r in runs.items()
                    },
                    # The paper's "2x compute": CPU seconds of the faulty run's processes.
                    "cpu_vs_single": {
                        m: ratio(_cpu(r), _cpu(runs["native"])) for m, r in runs.items()
                    },
                },
            )

    def heartbeat(self, query: str, rate: float, periods: list[float], duration_s: float) -> None:
        for period in periods:
            cfg = self._config(
                query, "liverobin", rate, fail=None, duration_s=duration_s,
                heartbeat_period_s=period,
            )  # fmt: skip
            self._put("heartbeat", self._experiment(f"heartbeat_{query}_{period:g}s", cfg))

    def slow(self, query: str, rate: float, delays: list[float], duration_s: float) -> None:
        for delay in delays:
            cfg = self._config(
                query, "liverobin", rate, fail=None, duration_s=duration_s, slow_delay_s=delay
            )
            self._put("slow", self._experiment(f"slow_{query}_{delay:g}s", cfg))

    def kills(self, jobs: list[str], rates: dict[str, float], repeat: int, every_s: float) -> None:
        for job in jobs:
            for mode, victims in (("kazoo", ("leader", "follower")), ("liverobin", ("a", "b"))):
                for victim in victims:
                    cfg = self._config(
                        job,
                        mode,
                        rates[job],
                        fail="driver-kill",
                        repeat=repeat,
                        every_s=every_s,
                        fail_at_s=15.0,
                        duration_s=15.0 + repeat * every_s + 5.0,
                        victim=victim,
                        replace_after_s=2.0,  # the next kill needs a full set again
                    )
                    self._put("kills", self._experiment(f"kills_{job}_{mode}_{victim}", cfg))

    def zombie(self, query: str, rate: float, pause_s: float) -> None:
        cfg = self._config(
            query, "kazoo", rate, fail="pause", fail_at_s=15.0, duration_s=45.0,
            victim="leader", pause_s=pause_s,
        )  # fmt: skip
        entry = self._experiment(f"zombie_{query}", cfg)
        if "error" in entry:
            self._put("zombie", entry)
            return
        out = json.loads(Path(entry["experiment_report"]).read_text())["out_topics"]["faulty"]
        entry["zombie"] = zombie_attempts(Path(entry["workdir"]), read_topic(raw_topic(out)))
        self._put("zombie", entry)


def zombie_attempts(workdir: Path, raw: Iterable[Any]) -> dict[str, Any]:
    """What the paused leader tried after it resumed: sink writes its guard refused (its log),
    copies of ids the other replica had written first (the gate dropped them), per replica,
    and who led at the end."""
    refused: dict[str, int] = {}
    for log in sorted((workdir / "faulty" / "replicas").glob("*/job.log")):
        text = log.read_text(errors="replace")
        refused[log.parent.name] = len(GUARD_REFUSAL.findall(text))
    states = sorted((workdir / "faulty" / "replicas").glob("*/role.json"))
    roles = {p.parent.name: json.loads(p.read_text()) for p in states}
    return {"guard_refusals": refused, "late_copies": dict(late_copies(raw)), "roles": roles}


def masking_row(query: str, rate: float, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One job's masking runs against its native restart. A native run whose latency never
    came back within 10 % before its input ended has no recovery time; it took at least the
    input time left after the kill, so each mode's ratio to it is an upper bound (``<=``)."""
    native = runs["native"]
    recovery = native.get("recovery_time_s")
    bounded = recovery is None and "error" not in native
    if bounded:
        recovery = round(native["duration_s"] - native["failures"][0]["at_s"], 1)
    return {
        "name": query,
        "rate": rate,
        "runs": runs,
        "native_recovery_s": recovery,
        "native_recovery_is_lower_bound": bounded,
        "recovery_vs_native": {
            n: ratio(r.get("recovery_time_s"), recovery) for n, r in runs.items()
        },
        "recovery_vs_native_is_upper_bound": bounded,
        "gap_vs_native": {
            n: ratio(r.get("output_gap_s"), native.get("output_gap_s")) for n, r in runs.items()
        },
        "failed_runs": {n: r["error"] for n, r in runs.items() if "error" in r},
    }


def _cpu(entry: dict[str, Any]) -> float | None:
    """CPU seconds of a run's processes (None: not measured, or the run failed)."""
    return (entry.get("resources") or {}).get("cpu_s")


def _latency(entry: dict[str, Any], q: str) -> float | None:
    """A run's p50 or p99 latency (ms); None for a run that failed."""
    return (entry.get("latency_ms") or {}).get(q)


def chart(report: dict[str, Any], path: Path) -> None:
    """Six panels: p99 after/before the kill per run (masking), recovery time per mode against
    native, p50/p99 by heartbeat period, p99 per mode without failures (cost), p50/p99 with
    one late partition (slow), and the repeated kills per run with the oracle's verdict."""
    fig, axes = new_figure(2, 3, figsize=(21, 9))
    ax = axes[0][0]
    names = [n for n, _, _ in MASKING_RUNS]
    width = 0.8 / max(1, len(report.get("masking", [])))
    for i, row in enumerate(report.get("masking", [])):
        xs = [x + i * width for x in range(len(names))]
        values = [row["runs"].get(n, {}).get("p99_after_over_before") for n in names]
        ax.bar(xs, [v or 0 for v in values], width, label=row["name"])
        for x, v in zip(xs, values, strict=True):
            if v is None:  # no output at all in the 30 s after the kill
                ax.text(x, 0.05, "no output", rotation=90, ha="center", va="bottom", fontsize=8)
    ax.axhline(1.5, color="r", linestyle="--", label="goal 1.5")
    ax.set_xticks(range(len(names)), names, rotation=15)
    ax.set_ylabel("p99 30 s after / 30 s before the kill")
    ax.set_title("a replica's death (masking)")
    ax.legend()
    ax = axes[0][1]
    for i, row in enumerate(report.get("masking", [])):
        xs = [x + i * width for x in range(len(names))]
        values = [row["runs"].get(n, {}).get("recovery_time_s") for n in names]
        if row.get("native_recovery_is_lower_bound"):  # not recovered before the input ended
            values[0] = row["native_recovery_s"]
            ax.text(xs[0], values[0], ">=", ha="center", va="bottom", fontsize=8)
        ax.bar(xs, [v or 0 for v in values], width, label=row["name"])
    ax.set_xticks(range(len(names)), names, rotation=15)
    ax.set_ylabel("recovery time (s)")
    ax.set_title("recovery time: latency back within 10 % of before (>=: not within the run)")
    ax.legend()
    _chart_latency_by(
        axes[1][0],
        report.get("heartbeat", []),
        lambda e: e["heartbeat_period_s"] or 0,
        "heartbeat period (s)",
        "LiveRobin: latency by heartbeat period",
    )
    ax = axes[1][1]
    for i, row in enumerate(report.get("cost", [])):
        modes = list(row["runs"])
        ax.bar(
            [x + i * 0.35 for x in range(len(modes))],
            [_latency(row["runs"][m], "p99") or 0 for m in modes],
            0.35,
            label=f"{row['name']} p99",
        )
        ax.set_xticks(range(len(modes)), modes)
    ax.set_ylabel("ms")
    ax.set_title("cost without failures: p99 per mode")
    if report.get("cost"):
        ax.legend()
    _chart_latency_by(
        axes[0][2],
        report.get("slow", []),
        _slow_delay,
        "one partition's heartbeats late by (s)",
        "LiveRobin: one slow input partition (paper Fig. 13)",
    )
    _chart_kills(axes[1][2], report.get("kills", []))
    save_figure(fig, path, dpi=100)


def _chart_latency_by(
    ax: Any,
    entries: list[dict[str, Any]],
    x_of: Callable[[dict[str, Any]], float],
    xlabel: str,
    title: str,
) -> None:
    """p50/p99 of the runs that ran, against ``x_of`` each run (a heartbeat period, a delay)."""
    runs = sorted((e for e in entries if "latency_ms" in e), key=x_of)
    if runs:
        xs = [x_of(e) for e in runs]
        ax.plot(xs, [e["latency_ms"]["p50"] for e in runs], "o-", label="p50")
        ax.plot(xs, [e["latency_ms"]["p99"] for e in runs], "s-", label="p99")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("latency (ms)")
        ax.legend()
    ax.set_title(title)


def _slow_delay(entry: dict[str, Any]) -> float:
    """The delay of a slow-part entry, from its name (slow_<job>_<delay>s)."""
    return float(entry["name"].rsplit("_", 1)[-1].rstrip("s"))


def _chart_kills(ax: Any, entries: list[dict[str, Any]]) -> None:
    """Kills that fired per run, green when the oracle judged the run exactly-once."""
    names = [e["name"].removeprefix("kills_") for e in entries]
    fired = [sum(1 for f in e.get("failures", []) if f.get("fired") is not False) for e in entries]
    colors = ["tab:green" if e.get("guarantee") == "exactly-once" else "tab:red" for e in entries]
    ax.bar(range(len(entries)), fired, color=colors)
    ax.set_xticks(range(len(entries)), names, rotation=20, fontsize=8)
    ax.set_ylabel("replica kills (green: exactly-once by the oracle)")
    ax.set_title("repeated kills, each dead replica replaced")
