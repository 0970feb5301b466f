"""``recovery bench standby``: standby takeover against native restart, in one invocation.

Parts (each writes into the same report, rewritten after every experiment):

compare     for each query, a native and a standby experiment on the same settings (driver
            SIGKILL, same rate, same input length): restart time, recovery time, output gap and
            the ratios standby / native (the Clonos goal: recovery <= 0.10 x native).
sizes       standby takeovers of one query after different amounts of input processed before
            the timed phase (unpaced warm-up input builds the join state): recovery time
            against the state size the standby restored (bytes of state files in its copy).
takeovers   repeated takeovers (driver kill, pause -> fenced primary, mid-write kill taking
            turns) on deterministic queries and on the nondeterministic prices pipeline with
            causal logging: every faulty run judged by the oracle.

Every standby experiment also reports its shipping rounds (``shipments.jsonl`` of each standby):
bytes shipped per round against the state bytes that changed and the whole state.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.ratios import ratio
from recovery_lib.bench.recovery_bench import MST_SHARE, search_mst
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError
from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report
from recovery_lib.files import write_json_report
from recovery_lib.settings import get_settings, reload_settings

PARTS = ("compare", "sizes", "takeovers")


def shipments(workdir: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(workdir.glob("faulty/node-*/ship/shipments.jsonl")):
        for line in path.read_text().splitlines():
            try:
                rows.append({"node": path.parent.parent.name, **json.loads(line)})
            except ValueError:
                continue
    return rows


def shipping_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per round: bytes shipped vs state bytes changed and the whole state (after the first
    round of each standby, which ships everything)."""
    later = [r for r in rows if r.get("seq_in_node", 0) > 1]
    if not later:
        return {"rounds": len(rows)}
    shipped = sum(r["bytes_copied"] for r in later)
    changed = sum(r["state_bytes_new"] for r in later)
    whole = sum(r["state_bytes_total"] for r in later)
    return {
        "rounds": len(rows),
        "mean_interval_s": round(sum(r.get("interval_s", 0) for r in later) / len(later), 2),
        "mean_shipped_bytes": round(shipped / len(later)),
        "mean_state_changed_bytes": round(changed / len(later)),
        "mean_state_total_bytes": round(whole / len(later)),
        "shipped_vs_full_state": round(shipped / whole, 4) if whole else None,
    }


class StandbyBench:
    def __init__(self, out_prefix: str, console: Console, append: bool = False) -> None:
        self.out = Path(out_prefix)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.console = console
        self.report: dict[str, Any] = {
            "machine": "2 cores shared by broker, generator, primary, standby, executors",
            "compare": [],
            "sizes": [],
            "takeovers": [],
        }
        if append and Path(f"{self.out}.json").exists():
            self.report.update(json.loads(Path(f"{self.out}.json").read_text()))

    def _put(self, part: str, entry: dict[str, Any]) -> None:
        """Add ``entry`` to ``part``; an appended report's entry of the same name is replaced."""
        kept = [e for e in self.report[part] if e.get("name") != entry["name"]]
        self.report[part] = [*kept, entry]

    def _save(self) -> None:
        write_json_report(f"{self.out}.json", self.report)
        _chart(self.report, Path(f"{self.out}.png"))

    def _experiment(self, name: str, cfg: ExperimentConfig) -> dict[str, Any]:
        self.console.print(
            f"[bold]{name}[/]: {cfg.query} {cfg.mode} {cfg.fail} at {cfg.rate:,.0f} ev/s ..."
        )
        t0 = time.monotonic()
        exp = Experiment(cfg, self.console, progress=lambda _m: None)
        result = exp.run()
        path = write_report(result, self.out.parent / f"{self.out.name}_{name}.json")
        rows = shipments(exp.workdir)
        takeovers = result.get("takeovers", [])
        entry = {
            "name": name,
            "query": cfg.query,
            "mode": cfg.mode,
            "fail": cfg.fail,
            "rate": cfg.rate,
            "duration_s": cfg.duration_s,
            "warmup_s": cfg.warmup_s,
            "restart_time_s": result["restart_time_s"],
            "recovery_time_s": result["recovery_time_s"],
            "output_gap_s": result["output_gap_s"],
            "latency_ms": result["latency_ms"],
            "failures": len(result["failures"]),
            "takeovers": len(takeovers),
            "takeover_detail": [
                {
                    k: t.get(k)
                    for k in ("cause", "epoch", "copy_batch", "restart_time_s", "rejected_copies")
                }
                for t in takeovers
            ],
            "restored_state_bytes": _restored_state_bytes(exp.workdir, takeovers),
            "shipping": shipping_summary(rows),
            "verdict": result["consistency"]["verdict"],
            "guarantee": result["consistency"].get("guarantee"),
            "failures_not_fired": result["consistency"].get("failures_not_fired"),
            "consistency": {
                k: result["consistency"].get(k)
                for k in (
                    "outputs",
                    "reference_outputs",
                    "lost",
                    "duplicated",
                    "divergent",
                    "extra",
                    "guarantee",
                    "inconclusive_because",
                )
            },
            "experiment_report": str(path),
            "elapsed_s": round(time.monotonic() - t0, 1),
        }
        self.console.print_json(json.dumps({k: v for k, v in entry.items()}, default=str))
        return entry

    # -- parts -------------------------------------------------------------------------------

    def search_rates(self, queries: list[str], start: float = 8_000) -> dict[str, float]:
        """80 % of each query's MST, searched now (the state store of this run's settings)."""

        settings = get_settings()
        found = search_mst(queries, settings.spark_master, self.console, start, 1.5, 20.0, 200_000)
        missing = [q for q in queries if not found.get(q, {}).get("mst_eps")]
        if missing:
            raise ConfigurationError(
                f"no sustainable rate >= {start:,.0f} ev/s for {missing}; lower --mst-start"
            )
        self.report["mst"] = {
            q: {"mst_eps": m.get("mst_eps"), "state_store": settings.state_store}
            for q, m in found.items()
        }
        self._save()
        return {q: round(MST_SHARE * m["mst_eps"]) for q, m in found.items() if m.get("mst_eps")}

    def compare(
        self, queries: list[str], rates: dict[str, float], duration_s: float, fail_at_s: float
    ) -> None:
        for query in queries:
            pair = {}
            for mode in ("native", "standby"):
                cfg = ExperimentConfig(
                    query=query,
                    mode=mode,
                    fail="driver-kill",
                    fail_at_s=fail_at_s,
                    rate=rates[query],
                    duration_s=duration_s,
                )
                pair[mode] = self._experiment(f"compare_{query}_{mode}", cfg)
            n, s = pair["native"], pair["standby"]
            self.report["compare"].append(
                {
                    "query": query,
                    "rate": rates[query],
                    "native": n,
                    "standby": s,
                    "ratio_restart": ratio(s["restart_time_s"], n["restart_time_s"]),
                    "ratio_recovery": ratio(s["recovery_time_s"], n["recovery_time_s"]),
                    "ratio_output_gap": ratio(s["output_gap_s"], n["output_gap_s"]),
                }
            )
            self._save()

    def sizes(
        self, query: str, rate: float, warmups: list[float], duration_s: float, fail_at_s: float
    ) -> None:
        for warmup in warmups:
            cfg = ExperimentConfig(
                query=query,
                mode="standby",
                fail="driver-kill",
                fail_at_s=fail_at_s,
                rate=rate,
                duration_s=duration_s,
                warmup_s=warmup,
            )
            self.report["sizes"].append(self._experiment(f"size_{query}_{warmup:g}s", cfg))
            self._save()

    def takeovers(
        self, queries: list[str], rate: dict[str, float], repeat: int, every_s: float
    ) -> None:
        # Consistency, not recovery time, is measured here: replace each standby soon after a
        # takeover so that the next failure finds one.
        os.environ["RECOVERY_STANDBY_REPLACE_AFTER_S"] = "10"
        reload_settings()
        kinds = "driver-kill,pause,mid-write"
        for query in queries:
            cfg = ExperimentConfig(
                query=query,
                mode="standby",
                fail=kinds,
                repeat=repeat,
                every_s=every_s,
                fail_at_s=15.0,
                pause_s=12.0,
                rate=rate[query],
                duration_s=15.0 + repeat * every_s,
            )
            self._put("takeovers", self._experiment(f"takeovers_{query}", cfg))
            self._save()


def _restored_state_bytes(workdir: Path, takeovers: list[dict[str, Any]]) -> int | None:
    """Bytes of state files in the copy the first takeover restored."""
    if not takeovers or takeovers[0].get("copy_seq") is None:
        return None
    seq = int(takeovers[0]["copy_seq"])
    manifest = workdir / "faulty" / "node-1" / "ship" / "copies" / f"{seq:08d}" / "MANIFEST.json"
    try:
        files = json.loads(manifest.read_text())["files"]
    except (OSError, ValueError, KeyError):
        return None
    return sum(v[0] for k, v in files.items() if "/state/" in k)


def _chart(report: dict[str, Any], path: Path) -> None:
    fig, axes = new_figure(1, 3, figsize=(16, 5))
    ax = axes[0]
    rows = report.get("compare", [])
    metrics = (
        ("restart_time_s", "restart"),
        ("recovery_time_s", "recovery"),
        ("output_gap_s", "output gap"),
    )
    labels = []
    for j, row in enumerate(rows):
        for k, mode in enumerate(("native", "standby")):
            x = j * 3 + k
            labels.append((x, f"{row['query']}\n{mode}"))
            for i, (key, name) in enumerate(metrics):
                value = row[mode][key] or 0
                ax.bar(
                    x + (i - 1) * 0.27, value, 0.27, color=f"C{i}", label=name if x == 0 else None
                )
    if labels:
        ax.set_xticks([x for x, _ in labels], [lab for _, lab in labels])
        ax.legend()
    ax.set_ylabel("seconds")
    ax.set_title("driver SIGKILL: native restart vs standby takeover")
    ax = axes[1]
    sizes = [r for r in report.get("sizes", []) if r.get("restored_state_bytes")]
    if sizes:
        ax.plot(
            [r["restored_state_bytes"] / 1e6 for r in sizes],
            [r["output_gap_s"] or 0 for r in sizes],
            "o-",
            label="output gap",
        )
        recovered = [r for r in sizes if r["recovery_time_s"] is not None]
        if recovered:
            ax.plot(
                [r["restored_state_bytes"] / 1e6 for r in recovered],
                [r["recovery_time_s"] for r in recovered],
                "^:",
                label="recovery",
            )
        ax.plot(
            [r["restored_state_bytes"] / 1e6 for r in sizes],
            [r["restart_time_s"] or 0 for r in sizes],
            "s--",
            label="restart",
        )
        ax.legend()
    ax.set_xlabel("state restored (MB)")
    ax.set_ylabel("seconds")
    ax.set_title("takeover time vs state size")
    ax = axes[2]
    ship = [
        (r["name"], r["shipping"])
        for part in ("compare", "sizes", "takeovers")
        for r in (
            [x["standby"] for x in report.get(part, [])]
            if part == "compare"
            else report.get(part, [])
        )
        if r.get("shipping", {}).get("mean_state_total_bytes")
    ]
    if ship:
        xs = range(len(ship))
        ax.bar(
            [x - 0.2 for x in xs],
            [s["mean_shipped_bytes"] / 1e3 for _, s in ship],
            0.4,
            label="shipped / round",
        )
        ax.bar(
            [x + 0.2 for x in xs],
            [s["mean_state_total_bytes"] / 1e3 for _, s in ship],
            0.4,
            label="whole state",
        )
        ax.set_xticks(list(xs), [n.replace("_", "\n", 1) for n, _ in ship], fontsize=7)
        ax.set_yscale("log")
        ax.legend()
    ax.set_ylabel("kB")
    ax.set_title("incremental shipping (RocksDB changelog)")
    save_figure(fig, path, dpi=100)
