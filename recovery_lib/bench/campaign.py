"""``recovery bench campaign``: many injected failures, judged by the oracle. Five suites:
``causal`` (causal mode against native on the nondeterministic jobs, reading deduplicated),
``release`` (the release and transactional sinks against at-least-once, read by a plain
consumer, no dedup),
``faults`` (the network, the broker, the disk and poison input across the recovery modes),
``brokers`` (partition leaders killed in a three-node Kafka cluster, per sink) and ``tables``
(the Delta and Iceberg table sinks against plain appends, every row read).

Each case is one experiment (``recovery experiment run``) whose faulty run takes ``repeat``
failures of the listed kinds in turn, at jittered times (driver SIGKILL, SIGKILL in the middle
of a sink write, a failed first task attempt, an executor SIGKILL on the standalone cluster),
followed by the failure-free reference run on the same input. Every case runs in ``causal``
and in ``native`` mode. Causal logging must make every causal run consistent; the native runs
show what it fixes. Writes JSON + a chart (failures and divergent outputs per case and mode).
Nothing else may run meanwhile.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.compare_bench import (
    KAZOO_TRIGGER_S,
    LIVEROBIN_PERIOD_S,
    replays_leader_cuts,
)
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError
from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report
from recovery_lib.files import write_json_report
from recovery_lib.job.spec import resolve_job
from recovery_lib.modes import get_mode
from recovery_lib.runtime import cluster as cluster_mod


@dataclass(frozen=True)
class Case:
    pipeline: str
    kinds: str  # comma-separated, taking turns
    cluster: bool = False
    rate: float = 1_000.0
    tag: str = ""  # tells apart cases of one pipeline and placement
    midwrite_rows: int = 20  # mid-write and write-retry fire after this many rows of a task
    # Added to the campaign's seed: repeated cases of one pipeline get their own input and
    # failure times instead of repeating the first one's.
    seed_offset: int = 0
    # The recovery modes whose variants run this case (None: every variant of the suite).
    modes: tuple[str, ...] | None = None
    # The sinks whose variants run this case (None: every variant of the suite).
    sinks: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return f"{self.pipeline}-{'cluster' if self.cluster else 'local'}{self.tag}"


@dataclass(frozen=True)
class Variant:
    """What a case runs in: the recovery mode and the sink mode (io/sinks/modes.py)."""

    mode: str
    sink: str = "dedup"

    @property
    def name(self) -> str:
        return self.mode if self.sink == "dedup" else f"{self.sink} ({self.mode})"


# 4 failures per case, 20 per mode; every kind the injector has, every nondeterministic
# pipeline: random + HTTP service (prices), processing time (q12), arrival order (lastbids).
CASES = (
    Case("prices", "driver-kill,mid-write,task-retry,driver-kill"),
    Case("q12", "mid-write,driver-kill,task-retry,mid-write", rate=2_000),
    Case("lastbids", "driver-kill,task-retry,mid-write,driver-kill", rate=2_000),
    Case("prices", "executor-kill,mid-write,task-retry,driver-kill", cluster=True),
    Case("lastbids", "executor-kill,mid-write,executor-kill,driver-kill", cluster=True, rate=2_000),
)

# The release barrier: 20 failures of every kind, each run against at-least-once on the same
# failures. Deterministic jobs run native (q1 stateless, q3 a stateful join); a nondeterministic
# one (prices) runs causal, which the release sink requires.
_LOCAL_KINDS = ",".join(["driver-kill", "mid-write", "task-retry", "write-retry"] * 2)
RELEASE_CASES = (
    *(Case("q1", _LOCAL_KINDS, rate=1_000, tag=f"-{i}", seed_offset=i - 1) for i in range(1, 6)),
    # A join's batches are small: its writes fail after 2 rows.
    *(
        Case("q3", _LOCAL_KINDS, rate=4_000, tag=f"-{i}", midwrite_rows=2, seed_offset=i - 1)
        for i in range(1, 4)
    ),
    *(Case("prices", _LOCAL_KINDS, tag=f"-{i}", seed_offset=i - 1) for i in (1, 2)),
    *(
        Case("q1", "executor-kill," * 4 + "executor-kill", True, tag=f"-{i}", seed_offset=i - 1)
        for i in (1, 2)
    ),
    *(
        Case("q3", "executor-kill," * 4 + "executor-kill", True, 4_000, f"-{i}", seed_offset=i - 1)
        for i in (1, 2)
    ),
)
# Faults beyond a killed process (experiment/network_faults.py, chaos/): every network kind,
# the broker pause and restart and the unwritable checkpoint twice per run, on q3 in every
# variant and on prices (nondeterministic) in the modes that replay it causally; a poison record
# per run on q3 where the supervisor parks it (native). At least 20 of each kind over the suite.
FAULT_KINDS = (
    "net-reset", "net-blackhole", "net-latency", "broker-pause", "broker-restart",
    "checkpoint-unwritable", "poison",
)  # fmt: skip
_ENVIRONMENT_KINDS = ",".join(FAULT_KINDS[:-1] * 2)
FAULT_CASES = (
    Case("q3", _ENVIRONMENT_KINDS, rate=2_000, tag="-faults"),
    Case(
        "prices",
        _ENVIRONMENT_KINDS,
        tag="-faults",
        modes=("causal", "standby", "kazoo", "liverobin"),
    ),
    *(
        Case("q3", "poison", rate=2_000, tag=f"-poison-{i}", seed_offset=i, modes=("native",))
        for i in range(1, 8)
    ),
)
FAULT_VARIANTS = (
    Variant("native"),
    Variant("native", "release"),
    Variant("native", "at-least-once"),  # names the duplicates a reset leaves
    Variant("causal"),
    Variant("standby", "release"),
    Variant("kazoo", "release"),
    Variant("liverobin", "release"),
)
# Lakehouse tables (io/sinks/table_target.py): every kind a driver-side sink meets, 4 of each
# per run; 5 runs per table sink (20 of each kind), q1 (stateless) and q3 (a stateful join),
# and one run per plain append (the foreachBatch a user writes without the guard) for contrast.
_TABLE_KINDS = ",".join(["driver-kill", "mid-write", "task-retry", "write-retry"] * 4)
_GUARDED_TABLES = ("delta", "iceberg")
TABLE_CASES = (
    *(
        Case("q1", _TABLE_KINDS, tag=f"-tables-{i}", seed_offset=i - 1, sinks=_GUARDED_TABLES)
        for i in range(1, 4)
    ),
    *(
        Case(
            "q3",
            _TABLE_KINDS,
            rate=4_000,
            tag=f"-tables-{i}",
            midwrite_rows=2,
            seed_offset=i - 1,
            sinks=_GUARDED_TABLES,
        )
        for i in (1, 2)
    ),  # fmt: skip
    Case("q1", _TABLE_KINDS, tag="-tables-append", sinks=("delta-append", "iceberg-append")),
)
TABLE_VARIANTS = tuple(
    Variant("native", sink) for sink in (*_GUARDED_TABLES, "delta-append", "iceberg-append")
)
# A partition leader SIGKILLed in a private three-node Kafka cluster (chaos/cluster.py), 5 per
# run, 4 runs per sink: 20 kills for each sink a plain or deduplicating consumer reads once.
# The job rides out the election (no restart is expected); q3 (a stateful join) and q1.
_LEADER_KILLS = ",".join(["broker-kill"] * 5)
BROKER_CASES = (
    *(Case("q3", _LEADER_KILLS, rate=2_000, tag=f"-leader-{i}", seed_offset=i) for i in (1, 2)),
    *(Case("q1", _LEADER_KILLS, rate=2_000, tag=f"-leader-{i}", seed_offset=i) for i in (1, 2)),
)
BROKER_VARIANTS = (
    Variant("native", "release"),
    Variant("native"),  # dedup
    Variant("native", "transactional"),
)
SUITES = {
    "causal": (CASES, (Variant("causal"), Variant("native"))),
    "release": (
        RELEASE_CASES,
        (
            Variant("native", "release"),
            Variant("native", "at-least-once"),
            # One Kafka transaction per task (Apache Kafka only): the same failures.
            Variant("native", "transactional"),
        ),
    ),
    "faults": (FAULT_CASES, FAULT_VARIANTS),
    "tables": (TABLE_CASES, TABLE_VARIANTS),
    "brokers": (BROKER_CASES, BROKER_VARIANTS),
}
# When failures come (first, between, jitter); a suite not named takes run_campaign's. A table
# sink's job restarts in ~9 s: its failures come closer than a Kafka sink's. A leader kill
# costs no restart: the next one comes as soon as the killed node is back (--pause 5 s).
SUITE_TIMING = {
    "tables": {"fail_at_s": 8.0, "every_s": 16.0, "jitter_s": 3.0},
    "brokers": {"fail_at_s": 10.0, "every_s": 16.0, "jitter_s": 3.0},
}


# Up to this much more input for failures still due when a run's input ends (ExperimentConfig).
INJECT_GRACE_S = 180.0


def planned(cases: tuple[Case, ...], variants: tuple[Variant, ...]) -> list[tuple[Case, Variant]]:
    """The (case, variant) runs of a campaign: each case in the variants its modes allow."""
    return [
        (c, v)
        for c in cases
        for v in variants
        if (c.modes is None or v.mode in c.modes) and (c.sinks is None or v.sink in c.sinks)
    ]


def run_campaign(
    out_prefix: str,
    console: Console,
    cases: tuple[Case, ...] = CASES,
    variants: tuple[Variant, ...] = SUITES["causal"][1],
    fail_at_s: float = 15.0,
    every_s: float = 30.0,
    jitter_s: float = 8.0,
    seed: int = 7,
    merge: bool = False,
) -> dict[str, Any]:
    """Run ``cases`` x ``modes``; with ``merge`` the results of cases not run now are kept
    from an existing report of the same prefix (a long campaign in several invocations)."""
    out = Path(out_prefix)
    if not cases:
        raise ConfigurationError(f"no cases given; cases are {', '.join(c.name for c in CASES)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "fail_at_s": fail_at_s,
        "every_s": every_s,
        "jitter_s": jitter_s,
        "seed": seed,
        "results": [],
    }
    started_cluster = False
    try:
        for case in cases:
            if case.cluster and cluster_mod.cluster_state() is None:
                console.print("starting a Spark standalone cluster (master + worker) ...")
                cluster_mod.start_cluster()
                started_cluster = True
            repeat = len(case.kinds.split(","))
            case_seed = seed + case.seed_offset
            for variant in (v for c, v in planned((case,), variants)):
                mode = variant.mode
                if (
                    variant.sink != "dedup"
                    and resolve_job(case.pipeline).contract.replay_needs_causal
                ):
                    # What the release sink needs (native becomes causal); both sinks run alike.
                    mode = get_mode(mode).with_causal_logging(True)
                console.print(f"[bold]{case.name} {variant.name}[/]: {case.kinds} ...")
                cfg = ExperimentConfig(
                    query=case.pipeline,
                    mode=mode,
                    sink=variant.sink,
                    midwrite_rows=case.midwrite_rows,
                    fail=case.kinds,
                    fail_at_s=fail_at_s,
                    repeat=repeat,
                    every_s=every_s,
                    jitter_s=jitter_s,
                    rate=case.rate,
                    duration_s=fail_at_s + repeat * every_s,
                    # A standby or replica rebuilt after a failure holds the next ones back.
                    inject_grace_s=INJECT_GRACE_S,
                    heartbeat_period_s=LIVEROBIN_PERIOD_S if get_mode(mode).leaderless else None,
                    trigger_s=KAZOO_TRIGGER_S if replays_leader_cuts(mode) else None,
                    seed=case_seed,
                    cluster=case.cluster,
                    # On the cluster: two one-core executors, so shuffled rows really arrive
                    # from two processes in varying order.
                    executor_cores=1 if case.cluster else None,
                )
                t0 = time.monotonic()
                result = Experiment(cfg, console, progress=lambda _m: None).run()
                tag = variant.name.replace(" ", "_").replace("(", "").replace(")", "")
                path = write_report(result, out.parent / f"{out.name}_{case.name}_{tag}.json")
                entry = campaign_entry(case, variant, mode, case_seed, result, path)
                entry["elapsed_s"] = round(time.monotonic() - t0, 1)
                report["results"].append(entry)
                console.print_json(json.dumps({k: entry[k] for k in entry if k != "failures"}))
                # After every run: a campaign stopped halfway keeps what it measured, and
                # --merge goes on from there.
                _save(out, report, merge, chart=False)
    finally:
        if started_cluster:
            cluster_mod.stop_cluster()
    _save(out, report, merge, chart=True)
    console.print_json(json.dumps(report["summary"]))
    console.print(f"report: {out}.json, chart: {out}.png")
    return report


def select(
    suite: str, names: list[str], only: list[str]
) -> tuple[tuple[Case, ...], tuple[Variant, ...]]:
    """A suite's cases named (``prices-local``, ``lastbids-cluster`` ...; all when none) and
    its variants whose mode or sink is in ``only`` (all when empty)."""
    if suite not in SUITES:
        raise ConfigurationError(f"unknown suite {suite!r}; suites are {', '.join(SUITES)}")
    cases, variants = SUITES[suite]
    unknown = set(names) - {c.name for c in cases}
    if unknown:
        raise ConfigurationError(
            f"unknown case(s) {', '.join(sorted(unknown))}; cases of {suite} are "
            f"{', '.join(c.name for c in cases)}"
        )
    chosen = tuple(v for v in variants if not only or {v.mode, v.sink} & set(only))
    if not chosen:
        raise ConfigurationError(
            f"no variant of {suite} matches {only}; they are {[v.name for v in variants]}"
        )
    return tuple(c for c in cases if not names or c.name in names), chosen


def campaign_entry(
    case: Case, variant: Variant, mode: str, seed: int, result: dict[str, Any], path: Path
) -> dict[str, Any]:
    """What the campaign's report keeps of one run (``result``: the experiment's report,
    written to ``path``)."""
    consistency = result["consistency"]
    return {
        "case": case.name,
        "pipeline": case.pipeline,
        "cluster": case.cluster,
        "mode": variant.name,
        "recovery_mode": mode,
        "sink": variant.sink,
        "rate": case.rate,
        "seed": seed,
        "failures": [{k: f.get(k) for k in FAILURE_FIELDS} for f in result["failures"]],
        # Requested failures still due when the input ended: the run is inconclusive.
        "not_injected": [
            {"kind": f.get("kind"), "at_s": f.get("at_s")} for f in result.get("not_injected", [])
        ],
        "restarts": len(result["restarts"]),
        "restart_time_s": result.get("restart_time_s"),
        "recovery_time_s": result.get("recovery_time_s"),
        "output_gap_s": result.get("output_gap_s"),
        "parked": len(result.get("parked") or []),
        # Input records a run had not processed when its drain gave up.
        "input_unprocessed": result.get("input_unprocessed"),
        "verdict": consistency["verdict"],
        "guarantee": consistency.get("guarantee"),
        "inconclusive_because": consistency.get("inconclusive_because"),
        "outputs": consistency.get("outputs"),
        "reference_outputs": consistency.get("reference_outputs"),
        "lost": consistency.get("lost"),
        "extra": consistency.get("extra"),
        "duplicated": consistency.get("duplicated"),
        "divergent": consistency.get("divergent"),
        "malformed": consistency.get("malformed"),
        "invariants_violated": [
            i["name"] for i in consistency.get("invariants", []) if not i["ok"]
        ],
        "experiment_report": str(path),
        "elapsed_s": result.get("elapsed_s"),
    }


def _save(out: Path, report: dict[str, Any], merge: bool, chart: bool) -> None:
    """The campaign's report as it stands (with ``merge``, the other cases of an existing
    report of the same prefix kept), its table by kind and (``chart``) its chart."""
    saved = dict(report)
    if merge and Path(f"{out}.json").exists():
        # Cases run earlier (another invocation) stay in the report unless run again now.
        ran = {(r["case"], r["mode"]) for r in report["results"]}
        earlier = json.loads(Path(f"{out}.json").read_text()).get("results", [])
        saved["results"] = [r for r in earlier if (r["case"], r["mode"]) not in ran] + report[
            "results"
        ]
        saved["note"] = "cases merged from several invocations (--case)"
    saved["summary"] = summarize(saved["results"])
    saved["by_kind"] = by_kind(saved["results"])
    write_json_report(f"{out}.json", saved)
    Path(f"{out}_by_kind.md").write_text(by_kind_table(saved["by_kind"]))
    if chart:
        _chart(saved, Path(f"{out}.png"))
    report["summary"] = saved["summary"]


# What a campaign keeps of each failure of a run (the experiment measures its own gap and
# recovery until the next failure, metrics/recovery.py each_failure).
FAILURE_FIELDS = ("kind", "at_s", "fired", "output_gap_s", "recovery_time_s")


def by_kind(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per failure kind and mode: faults fired of those requested (a failure never injected
    counts as requested and not fired), runs that had the kind and were judged exactly-once
    (an inconclusive run is not, whatever its guarantee says), duplicates a plain consumer
    saw in at-least-once runs, median recovery time and output gap of the kind's faults (the
    faults campaign's table)."""

    def requested(r: dict[str, Any]) -> list[dict[str, Any]]:
        return [*r["failures"], *({**f, "fired": False} for f in r.get("not_injected") or [])]

    rows = []
    kinds = sorted({f["kind"] for r in results for f in requested(r)})
    for kind in kinds:
        for mode in sorted({r["mode"] for r in results}):
            runs = [
                r
                for r in results
                if r["mode"] == mode and any(f["kind"] == kind for f in requested(r))
            ]
            if not runs:
                continue
            faults = [f for r in runs for f in requested(r) if f["kind"] == kind]
            fired = [f for f in faults if f.get("fired") is not False]
            recoveries = _present(fired, "recovery_time_s")
            gaps = _present(fired, "output_gap_s")
            rows.append(
                {
                    "kind": kind,
                    "mode": mode,
                    "runs": len(runs),
                    "faults": len(faults),
                    "fired": len(fired),
                    "exactly_once_runs": sum(
                        r["verdict"] == "consistent" and r.get("guarantee") == "exactly-once"
                        for r in runs
                    ),
                    "inconsistent_runs": sum(r["verdict"] == "inconsistent" for r in runs),
                    "inconclusive_runs": sum(r["verdict"] == "inconclusive" for r in runs),
                    "duplicated_at_least_once": sum(
                        r.get("duplicated") or 0
                        for r in runs
                        if r.get("guarantee") == "at-least-once"
                    ),
                    "recovery_time_s_median": _median(recoveries),
                    "recovered": len(recoveries),
                    "output_gap_s_median": _median(gaps),
                }
            )
    return rows


def by_kind_table(rows: list[dict[str, Any]]) -> str:
    """``by_kind`` as a Markdown table (docs/recovery-harness.md)."""
    lines = [
        "| kind | mode | runs | faults fired | runs exactly-once | duplicates (at-least-once) "
        "| recovery (median s) | output gap (median s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        recovery = r["recovery_time_s_median"]
        gap = r["output_gap_s_median"]
        lines.append(
            f"| {r['kind']} | {r['mode']} | {r['runs']} | {r['fired']} / {r['faults']} "
            f"| {r['exactly_once_runs']} / {r['runs']}"
            f"{_inconclusive(r.get('inconclusive_runs', 0))} | {r['duplicated_at_least_once']} "
            f"| {'-' if recovery is None else f'{recovery:.1f}'} ({r['recovered']} measured) "
            f"| {'-' if gap is None else f'{gap:.1f}'} |"
        )
    return "\n".join(lines) + "\n"


def _inconclusive(count: int) -> str:
    return f" ({count} inconclusive)" if count else ""


def _present(faults: list[dict[str, Any]], key: str) -> list[float]:
    return [f[key] for f in faults if f.get(key) is not None]


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for mode in sorted({r["mode"] for r in results}):
        runs = [r for r in results if r["mode"] == mode]
        fired = [f for r in runs for f in r["failures"] if f.get("fired") is not False]
        kinds: dict[str, int] = {}
        for f in fired:
            kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
        summary[mode] = {
            "runs": len(runs),
            "failures": len(fired),
            "failures_by_kind": kinds,
            "consistent_runs": sum(r["verdict"] == "consistent" for r in runs),
            "inconsistent_runs": sum(r["verdict"] == "inconsistent" for r in runs),
            "inconclusive_runs": sum(r["verdict"] == "inconclusive" for r in runs),
            "guarantees": {
                g: sum(r.get("guarantee") == g for r in runs)
                for g in sorted({str(r.get("guarantee")) for r in runs})
            },
        }
    return summary


def _chart(report: dict[str, Any], path: Path) -> None:
    results = report["results"]
    cases = list(dict.fromkeys(r["case"] for r in results))
    modes = list(dict.fromkeys(r["mode"] for r in results))
    fig, ax = new_figure(figsize=(max(10.0, 0.9 * len(cases)), 5))
    width = 0.8 / max(len(modes), 1)
    for i, mode in enumerate(modes):
        xs, bad = [], []
        for j, case in enumerate(cases):
            entry = next((r for r in results if r["case"] == case and r["mode"] == mode), None)
            if entry is None:
                continue
            x = j + (i - (len(modes) - 1) / 2) * width
            xs.append(x)
            # A plain consumer sees duplicates too (the release suite); dedup readers none.
            bad.append(sum(entry.get(k) or 0 for k in ("divergent", "lost", "extra", "duplicated")))
            label = f"{entry.get('guarantee') or entry['verdict']}, {len(entry['failures'])} f."
            ax.annotate(label, (x, bad[-1] + 1), ha="center", va="bottom", rotation=90, fontsize=7)
        ax.bar(
            xs,
            [b + 1 for b in bad],
            width,
            label=f"{mode}: divergent + lost + extra + duplicated (+1)",
        )
    ax.set_xticks(range(len(cases)), cases, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("wrong outputs + 1 (log scale)")
    ax.set_ylim(top=ax.get_ylim()[1] * 30)  # room for the labels above the bars
    ax.set_title(f"Injected failures, {' vs '.join(modes)}, judged by the oracle")
    ax.legend(fontsize=8)
    save_figure(fig, path, dpi=100)
