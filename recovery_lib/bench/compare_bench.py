"""``recovery bench compare``: one job, one input, one failure, under every recovery mode.

Each variant runs the same job on the same generated input (same seed and rate) and kills the
job's process the same number of seconds into the timed input:

* single-process modes (native, causal, standby, cec) and the sink modes (release, two-phase,
  a native job behind them) and active replication (kazoo: the leader dies; liverobin: a
  replica dies) run as experiments (recovery_lib/experiment): a faulty run and a failure-free
  reference run judged by the job's consistency contract;
* the checkpoint protocols (coor, unc, cic) coordinate the stages of a pipeline, so they run
  a pipeline of the pipelines file whose last stage is the job (q3 -> q3p: two routing stages
  in front), on the same generated input, with that stage killed ``fail_at_s`` after the
  pipeline's first output (its stages start one after another, so "into the input" would
  kill a pipeline still warming up); the oracle compares its output with the NexMark
  reference, or says inconclusive for a pipeline it has no reference for.

Per variant: restart time, recovery time (Clonos: latency back within 10 % of before), output
gap, p99 of the 30 s after the failure over the 30 s before, p50 / p99 of the 30 s before the
failure against native's (latency overhead without a failure, at the same rate), throughput,
the peak number of processes and their memory (the process tree under this command, the broker
left out), and the oracle's verdict and guarantee class. A variant that does not apply to the
job (cec on a job that is not a CEC aggregate, a protocol without a pipeline) is reported with
the reason instead of numbers.
"""

from __future__ import annotations

import json
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.machine import broker_description
from recovery_lib.bench.protocol_bench import Trial, run_trial
from recovery_lib.bench.ratios import ratio
from recovery_lib.cec.spark import CECPlan
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError
from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report
from recovery_lib.files import write_json_report
from recovery_lib.job.spec import resolve_job
from recovery_lib.metrics.recovery import output_gap_s, p99_around, recovery_time_s
from recovery_lib.metrics.resources import ResourceSampler, during_run
from recovery_lib.metrics.stats import percentile
from recovery_lib.modes import get_mode
from recovery_lib.pipeline.spec import get_pipeline, load_pipelines
from recovery_lib.protocols.base import CHECKMATE_PROTOCOLS
from recovery_lib.settings import environment, get_settings

PROTOCOLS = CHECKMATE_PROTOCOLS


# LiveRobin's heartbeat period (its batch interval) in the benchmarks: it must exceed a batch's
# cost with two replicas on this machine, or the replicas never catch up (docs/replication.md).
LIVEROBIN_PERIOD_S = 8.0
# KaZoo's leader cuts a batch at most this often where a run must let a replaced replica catch
# up (the faults campaign, the state benchmark): a replacement replays the leader's cuts one by
# one and catches up only if it runs them faster than they come. q3 at 2,000 ev/s on 2 cores,
# two replicas: at a 0 s trigger it never did, at 4 s a batch cost ~5 s and it gained nothing
# in 6 min; LiveRobin's replacements joined within 35 s at its 8 s period, the same here.
KAZOO_TRIGGER_S = LIVEROBIN_PERIOD_S


@dataclass(frozen=True)
class Variant:
    """One column of the comparison: a recovery mode, the sink a consumer reads through, the
    replica the failure hits, or a checkpoint protocol over the job's pipeline."""

    name: str
    mode: str = "native"
    sink: str = "dedup"
    victim: str | None = None
    protocol: str | None = None
    env: tuple[tuple[str, str], ...] = ()  # settings the variant's processes start with


SHARED_PLACEMENT = (("RECOVERY_PIPELINE_PLACEMENT", "shared"),)

VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("native"),
        Variant("causal", mode="causal"),
        Variant("standby", mode="standby"),
        # Its query runs all along on the primary's committed batches (state loaded).
        Variant("standby-hot", mode="standby", env=(("RECOVERY_STANDBY_HOT", "true"),)),
        Variant("cec", mode="cec"),
        Variant("kazoo", mode="kazoo", sink="release", victim="leader"),
        Variant("liverobin", mode="liverobin", sink="release", victim="a"),
        Variant("release", sink="release"),
        Variant("two-phase", sink="two-phase"),
        *(Variant(p, protocol=p) for p in PROTOCOLS),
        # The pipeline's stages as queries of one Spark application (pipeline/host.py).
        *(Variant(f"{p}-shared", protocol=p, env=SHARED_PLACEMENT) for p in PROTOCOLS),
    )
}


@dataclass(frozen=True)
class CompareConfig:
    job: str = "q3"
    rate: float = 2_000.0
    duration_s: float = 90.0
    fail_at_s: float = 40.0
    seed: int = 42
    liverobin_period_s: float = LIVEROBIN_PERIOD_S
    pipeline: str | None = None  # protocols: default, the pipeline whose last stage is the job
    keys: int | None = None  # keyed input over this many accounts (keyed_state), else NexMark
    catch_up_timeout_s: float = 300.0  # the warm-up's processing and the drain
    keep_output: bool = True  # False: each experiment's topics go once it is judged
    kazoo_trigger_s: float | None = None  # KaZoo's leader's trigger (None: back to back)


def failure_figures(samples: list[tuple[int, int]], failure_ms: int | None) -> dict[str, Any]:
    """The failure's figures on (visible ms, latency ms) samples, the same definitions for every
    variant (recovery_lib/metrics/recovery.py), and the p50 / p99 of the 30 s before
    it: the variant's latency without a failure."""
    if failure_ms is None or not samples:
        return {"recovery_time_s": None, "output_gap_s": None, "p50_before_ms": None}
    before = [lat for vis, lat in samples if failure_ms - 30_000 <= vis < failure_ms]
    return {
        "recovery_time_s": recovery_time_s(samples, failure_ms),
        "output_gap_s": output_gap_s([v for v, _ in samples], failure_ms),
        **p99_around(samples, failure_ms),
        "p50_before_ms": percentile(before, 50) if before else None,
    }


def replays_leader_cuts(mode: str) -> bool:
    """A replicated mode with a leader (KaZoo): its replicas follow the leader's cuts."""
    chosen = get_mode(mode)
    return chosen.replicated and not chosen.leaderless


def builds_cec_aggregate(job: str) -> bool | None:
    """Whether the job's build is annotated to return a CEC aggregate (None: not annotated, so
    only running it tells)."""

    try:
        returns = typing.get_type_hints(resolve_job(job).build).get("return")
    except Exception:  # noqa: BLE001 - unresolvable annotations: let the run decide
        return None
    if returns is None:
        return None
    return isinstance(returns, type) and issubclass(returns, CECPlan)


def pipeline_of(job: str) -> str | None:
    """The first pipeline of the pipelines file whose last stage runs ``job``."""

    for name, spec in load_pipelines().items():
        if spec.stages[-1].job == job:
            return name
    return None


class CompareBench:
    def __init__(self, cfg: CompareConfig, out_prefix: str, console: Console) -> None:
        self.cfg = cfg
        self.out = Path(out_prefix)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.console = console
        self.report: dict[str, Any] = {
            "job": cfg.job,
            "config": cfg.__dict__,
            "machine": f"2 cores, one host, {broker_description()}",
            "variants": [],
        }

    def run(self, names: list[str], progress: Callable[[int, str], None] | None = None) -> dict:
        """Run the variants one after another (``progress(done, next)`` before each); the
        report is rewritten after each, so an interrupted invocation keeps what it measured."""
        unknown = sorted(set(names) - set(VARIANTS))
        if unknown:
            raise ConfigurationError(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
        for i, name in enumerate(names, 1):
            if progress:
                progress(i - 1, name)
            variant = VARIANTS[name]
            started = time.monotonic()
            sampler = ResourceSampler()
            if variant.protocol:  # the trial is the faulty run
                with sampler, environment(dict(variant.env)):
                    entry = self._protocol(variant)
            else:
                entry = self.experiment(variant, sampler)
            entry.update(name=name, elapsed_s=round(time.monotonic() - started, 1))
            if "not_applicable" not in entry:
                entry.update(sampler.figures)
            kept = [e for e in self.report["variants"] if e["name"] != name]
            self.report["variants"] = [*kept, entry]
            self._relate()
            self.save()
        return self.report

    # -- one variant -------------------------------------------------------------------------

    def experiment(self, variant: Variant, sampler: ResourceSampler) -> dict[str, Any]:
        """The variant as an experiment; ``sampler`` measures its faulty run only (the
        reference run is native for every variant)."""

        cfg = self.cfg
        mode = get_mode(variant.mode)
        if mode.keeps_own_log and builds_cec_aggregate(cfg.job) is False:
            return {
                "not_applicable": f"job {cfg.job}'s build returns a DataFrame: mode cec needs a "
                "build that returns recovery_lib.cec.cec_aggregate(...)"
            }
        exp_cfg = ExperimentConfig(
            query=cfg.job,
            mode=variant.mode,
            sink=variant.sink,
            victim=variant.victim,
            rate=cfg.rate,
            duration_s=cfg.duration_s,
            fail="driver-kill",
            fail_at_s=cfg.fail_at_s,
            seed=cfg.seed,
            heartbeat_period_s=cfg.liverobin_period_s if mode.leaderless else None,
            trigger_s=cfg.kazoo_trigger_s if replays_leader_cuts(variant.mode) else None,
            keys=cfg.keys,
            catch_up_timeout_s=cfg.catch_up_timeout_s,
            keep_output=cfg.keep_output,
        )
        with environment(dict(variant.env)):
            try:
                exp = Experiment(
                    exp_cfg, self.console, progress=lambda _m: None, on_run=during_run(sampler)
                )
            except ValueError as exc:  # the job cannot run this way (e.g. a sink it refuses)
                return {"not_applicable": str(exc)}
            try:
                result = exp.run()
            except RuntimeError as exc:  # e.g. a mode that cannot keep up: a result
                return {"error": str(exc), "workdir": str(exp.workdir)}
        samples = [tuple(s) for s in result["_timeline"]["samples"]]  # write_report drops it
        path = write_report(result, self.out.parent / f"{self.out.name}_{variant.name}.json")
        first = result["failures"][0] if result["failures"] else {}
        # A kill that did not fire (the job was not up) has no failure time to measure from.
        failure_ms = first.get("fired_ms") if first.get("fired") is not False else None
        c = result["consistency"]
        return {
            "kind": "experiment",
            "mode": variant.mode,
            "sink": variant.sink,
            "victim": variant.victim,
            "restart_time_s": result["restart_time_s"],
            "takeovers": len(result.get("takeovers") or []),
            "fired": failure_ms is not None,
            **failure_figures(samples, failure_ms),
            "latency_ms": result["latency_ms"],
            "throughput_eps": result["throughput_eps"],
            "outputs": c.get("outputs"),
            "verdict": c["verdict"],
            "guarantee": c.get("guarantee"),
            "inconclusive_because": c.get("inconclusive_because"),
            "experiment_report": str(path),
            "faulty_run_id": result["faulty_run_id"],
            "failure_ms": failure_ms,
            "workdir": str(exp.workdir),
        }

    def _protocol(self, variant: Variant) -> dict[str, Any]:
        cfg = self.cfg
        pipeline = cfg.pipeline or pipeline_of(cfg.job)
        if pipeline is None:
            return {
                "not_applicable": f"no pipeline of the pipelines file ends in job {cfg.job}: a "
                "checkpoint protocol coordinates several stages (alone, a job recovers as native)"
            }

        spec = get_pipeline(pipeline)
        last = spec.stages[-1].name
        trial = Trial(
            pipeline=pipeline,
            protocol=variant.protocol or "unc",
            events=int(cfg.rate * cfg.duration_s),
            rate=cfg.rate,
            kill=last,
            kill_at_s=cfg.fail_at_s,
            seed=cfg.seed,  # the experiments' input: same seed, same event-time rate
            event_time_rate=cfg.rate,
        )
        workdir = get_settings().home / "bench" / f"compare-{pipeline}"
        try:
            result = run_trial(trial, workdir, self.console, keep_samples=True)
        except RuntimeError as exc:  # e.g. a stage never ready: a result, the next variant runs
            return {"error": str(exc), "pipeline": pipeline}
        samples = [tuple(s) for s in result.pop("_samples")]
        verdict = result["verdict"]
        ok = verdict.get("ok")
        recoveries = result.get("recoveries") or []
        return {
            "kind": "pipeline",
            "pipeline": pipeline,
            "placement": get_settings().pipeline_placement,
            "stages": [s.name for s in spec.stages],
            "killed_stage": last,
            "restart_time_s": recoveries[0]["restart_time_s"] if recoveries else None,
            "restarted": recoveries[0]["restarted"] if recoveries else [],
            "fired": result.get("killed_ms") is not None,
            **failure_figures(samples, result.get("killed_ms")),
            "latency_ms": {"p50": result["latency_p50_ms"], "p99": result["latency_p99_ms"]},
            "throughput_eps": result["throughput_eps"],
            "outputs": result["outputs"],
            "verdict": {True: "consistent", False: "inconsistent"}.get(ok, "inconclusive"),
            "guarantee": ("exactly-once" if ok and not result.get("written_twice") else None),
            "inconclusive_because": verdict.get("inconclusive"),
            "written_twice": result.get("written_twice"),
        }

    # -- the comparison ----------------------------------------------------------------------

    def _relate(self) -> None:
        """Each variant's p50 / p99 before the failure and recovery time over native's."""
        by_name = {e["name"]: e for e in self.report["variants"]}
        native = by_name.get("native") or {}
        for entry in self.report["variants"]:
            entry["vs_native"] = {
                key: ratio(entry.get(key), native.get(key))
                for key in ("p50_before_ms", "p99_30s_before_ms", "recovery_time_s", "output_gap_s")
            }

    def save(self) -> None:
        write_json_report(f"{self.out}.json", self.report)
        chart(self.report, Path(f"{self.out}.png"))


def comparison_reports(reports_dir: Path) -> dict[str, Path]:
    """Every comparison report in ``reports_dir`` (one job each), labelled "<job> (<file>)":
    ``bench_compare.json`` and any ``bench_compare_<job>.json``. The per-variant experiment
    reports beside them have no ``variants`` and are not comparisons."""
    found: dict[str, Path] = {}
    for path in sorted(reports_dir.glob("bench_compare*.json")):
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(report, dict) and "variants" in report:
            found[f"{report.get('job', '?')} ({path.name})"] = path
    return found


def _note(entry: dict[str, Any]) -> str:
    """What a reader of the table must know about a measured variant's empty cells."""
    if entry.get("inconclusive_because"):
        return entry["inconclusive_because"]
    if not entry.get("fired"):
        return "no failure"
    notes = []
    if entry.get("recovery_time_s") is None:
        notes.append("latency not back within 10 % of before by the run's end")
    if entry.get("p99_after_over_before") is None:
        notes.append("no output in the 30 s after the kill")
    return "; ".join(notes)


def rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The report as one flat row per variant (the dashboard's table, the docs' table)."""
    out = []
    for e in report.get("variants", []):
        if "not_applicable" in e or "error" in e:
            out.append({"variant": e["name"], "note": e.get("not_applicable") or e.get("error")})
            continue
        out.append(
            {
                "variant": e["name"],
                "restart (s)": e.get("restart_time_s"),
                "recovery (s)": e.get("recovery_time_s"),
                "output gap (s)": e.get("output_gap_s"),
                "p99 after/before": e.get("p99_after_over_before"),
                "p50 before vs native": e["vs_native"].get("p50_before_ms"),
                "p99 before vs native": e["vs_native"].get("p99_30s_before_ms"),
                "throughput (ev/s)": e.get("throughput_eps"),
                "processes": e.get("peak_processes"),
                "memory (MB)": e.get("peak_rss_mb"),
                "oracle": f"{e.get('verdict')} {e.get('guarantee') or ''}".strip(),
                "note": _note(e),
            }
        )
    return out


def chart(report: dict[str, Any], path: Path) -> None:
    """Four panels per variant: recovery time and output gap, p99 after/before the failure,
    latency before the failure against native, peak memory and processes."""
    measured = [e for e in report.get("variants", []) if "verdict" in e]
    names = [e["name"] for e in measured]
    xs = range(len(names))
    fig, axes = new_figure(2, 2, figsize=(15, 9))
    ax = axes[0][0]
    ax.bar([x - 0.2 for x in xs], [e.get("recovery_time_s") or 0 for e in measured], 0.4,
           label="recovery time")  # fmt: skip
    ax.bar([x + 0.2 for x in xs], [e.get("output_gap_s") or 0 for e in measured], 0.4,
           label="output gap")  # fmt: skip
    for x, e in zip(xs, measured, strict=True):
        if e.get("recovery_time_s") is None:
            ax.text(x - 0.2, 0.1, "not back", rotation=90, ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("seconds")
    ax.set_title(f"{report.get('job')}: after the kill")
    ax.legend()
    ax = axes[0][1]
    ax.bar(xs, [e.get("p99_after_over_before") or 0 for e in measured])
    for x, e in zip(xs, measured, strict=True):
        if e.get("p99_after_over_before") is None:
            ax.text(x, 0.05, "no output in the 30 s", rotation=90, ha="center", va="bottom",
                    fontsize=8)  # fmt: skip
    ax.axhline(1.0, color="grey", linestyle=":")
    ax.set_ylabel("p99 30 s after / 30 s before")
    ax.set_title("latency disturbance")
    ax = axes[1][0]
    ax.bar([x - 0.2 for x in xs], [e["vs_native"].get("p50_before_ms") or 0 for e in measured],
           0.4, label="p50")  # fmt: skip
    ax.bar([x + 0.2 for x in xs],
           [e["vs_native"].get("p99_30s_before_ms") or 0 for e in measured], 0.4,
           label="p99")  # fmt: skip
    ax.axhline(1.0, color="grey", linestyle=":")
    ax.set_ylabel("latency before the failure / native's")
    ax.set_title("overhead without a failure (same rate)")
    ax.legend()
    ax = axes[1][1]
    ax.bar(xs, [e.get("peak_rss_mb") or 0 for e in measured])
    for x, e in zip(xs, measured, strict=True):
        ax.text(x, (e.get("peak_rss_mb") or 0), f"{e.get('peak_processes')} proc", ha="center",
                va="bottom", fontsize=8)  # fmt: skip
    ax.set_ylabel("peak resident memory (MB)")
    ax.set_title("resources (process tree, broker left out)")
    for ax in axes.flat:
        ax.set_xticks(list(xs), names, rotation=30)
    save_figure(fig, path, dpi=90)
