"""From facts to a recommendation: a recovery mode, a sink, and the reasons, each backed by a
number our benchmarks measured on this machine where one exists.

Single jobs (the cheapest mode that meets the outage bound; compute: native and causal 1x,
standby 1x plus an idle warm process, kazoo and liverobin 2x):

1. Nondeterministic or order-sensitive: replay must repeat the first run, so causal logging
   (every mode below runs it causal where needed).
2. Plain consumers: the release sink (exactly-once for readers that do not de-duplicate, at
   at-least-once latency), else dedup.
3. Outage: the output gap each mode showed when its process was SIGKILLed
   (bench_replication's masking runs and every bench_compare report's variants, the largest
   over every job measured); the first mode whose gap is within ``max_outage_s``.
   Two replicas share the host's cores: above ``REPLICATION_MAX_LOAD`` of the measured MST
   they are skipped (they could not keep up here).
4. State: its size beside the largest state a standby takeover restored in bench_standby.

Pipelines (CheckMate's protocols):

5. A cycle: UNC (aligned COOR deadlocks on a cycle; UNC recovers the failed stage alone).
6. Skewed input: UNC (the paper: COOR worst under skew; ours: see the evidence).
7. Three or more stages: UNC (local recovery: only the failed stage rolls back).
8. Otherwise COOR (no invalid checkpoints, no protocol bytes, every stage's line at once).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from recovery_lib.advisor.facts import SKEW_HOT_SHARE, Facts, Load
from recovery_lib.bench.compare_bench import comparison_reports
from recovery_lib.modes import REFERENCE_MODE, get_mode, mode_names, outage_ladder
from recovery_lib.reproduce.measured import Measured, load_report
from recovery_lib.reproduce.report import extractor

# Single-job modes from cheapest to dearest (the registry's outage ladder), and the masking
# run that measures each one's gap.
OUTAGE_LADDER = tuple((m.name, m.kill_run, m.compute) for m in outage_ladder())
REPLICATED = mode_names(replicated=True)
# Two replicas on one host each get half its cores: replicated q3 at 5,000 ev/s and q8 at
# 2,000 (0.04 and 0.11 of their MST) kept up, q8 at 5,000 (0.28) gave no output in its first
# 50 s (bench_replication).
REPLICATION_MAX_LOAD = 0.2


@dataclass
class Advice:
    mode: str
    sink: str
    causal: bool
    reasons: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # where the cited numbers come from

    def to_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "sink": self.sink, "causal": self.causal,
                "reasons": self.reasons, "evidence": self.evidence}  # fmt: skip


# ``recovery bench compare`` names its variants by mode; a leader-based run kills the leader.
COMPARE_RUN = {name: run for name, run, _ in OUTAGE_LADDER}


def measured_gaps(reports_dir: Path) -> dict[str, tuple[float, str]]:
    """Per kill run (``OUTAGE_LADDER``'s names), the largest output gap over every job it ran
    on, and those jobs: bench_replication's masking runs and bench_compare's variants whose
    failure fired."""
    gaps: dict[str, tuple[float, str]] = {}

    def add(run: str, gap: float, job: str) -> None:
        worst, jobs = gaps.get(run, (0.0, ""))
        gaps[run] = (max(worst, gap), ", ".join(filter(None, [jobs, job])))

    report = load_report(reports_dir, "bench_replication.json") or {}
    for row in report.get("masking", []):
        for name, run in row.get("runs", {}).items():
            if run.get("output_gap_s") is not None and "error" not in run:
                add(name, run["output_gap_s"], row["name"])
    for path in comparison_reports(reports_dir).values():
        compare = json.loads(path.read_text())
        for entry in compare.get("variants", []):
            run = COMPARE_RUN.get(entry.get("name", ""))
            if run and entry.get("fired") and entry.get("output_gap_s") is not None:
                add(run, entry["output_gap_s"], f"{compare.get('job')} (compare)")
    return gaps


def gap_reports(reports_dir: Path) -> list[str]:
    """The reports ``measured_gaps`` reads, as the advice cites them."""
    paths = [reports_dir / "bench_replication.json", *comparison_reports(reports_dir).values()]
    return [f"docs/benchmarks/{p.name}" for p in paths if p.exists()]


def advise(facts: Facts, reports_dir: Path) -> Advice:
    replay_needs_causal = facts.nondeterministic or facts.order_sensitive
    sink = "release" if facts.plain_consumers else "dedup"
    if facts.kind == "pipeline":
        advice = _pipeline(facts, reports_dir, sink, replay_needs_causal)
    else:
        advice = _job(facts, reports_dir, sink, replay_needs_causal)
    if facts.load is not None:
        advice.reasons.extend(load_reasons(facts.load, reports_dir))
    if replay_needs_causal:
        advice.reasons.insert(
            0,
            "declares nondeterminism or an order-sensitive operator: a replayed batch must "
            "repeat the first run, so it runs causal (its clock, random values and calls are "
            "replayed from the determinant log; docs/causal.md: native prices re-runs gave "
            "divergent outputs where causal gave none)",
        )
    advice.reasons.append(
        "plain consumers: the release sink gives them exactly-once at at-least-once latency "
        "(docs/benchmarks/bench_sinks.json: release p50 within 1.1x of at-least-once at every "
        "trigger interval)"
        if facts.plain_consumers
        else "consumers de-duplicate by id: the dedup sink is enough"
    )
    return advice


def load_reasons(load: Load, reports_dir: Path) -> list[str]:
    """What the measured rate and state say, with the numbers behind them."""
    reasons = []
    if load.rate_eps is not None:
        where = "given" if load.rate_source == "given" else f"measured, {load.rate_source}"
        fraction = load.fraction_of_mst
        if fraction is not None:
            drains = (
                f"a restart's backlog drains at the {1 - fraction:.0%} left over"
                if fraction < 1
                else "above it the job cannot keep up at all, in any mode: give it more cores"
            )
            reasons.append(
                f"input {load.rate_eps:,.0f} ev/s ({where}): {fraction:.0%} of the MST "
                f"{load.mst_eps:,.0f} ev/s measured for this query "
                f"(docs/benchmarks/{load.mst_source}); {drains}"
            )
        else:
            reasons.append(
                f"input {load.rate_eps:,.0f} ev/s ({where}); no MST measured for this query "
                "(recovery bench nexmark --query ...): the load cannot be judged"
            )
    if load.state_bytes is not None:
        reasons.append(state_reason(load, reports_dir))
    return reasons


def state_reason(load: Load, reports_dir: Path) -> str:
    """The job's state beside the largest state a standby takeover restored in bench_standby."""
    size = f"state {load.state_bytes / 1e6:,.1f} MB ({load.state_rows or 0:,} rows)"
    report = load_report(reports_dir, "bench_standby.json") or {}
    sizes = [r for r in report.get("sizes", []) if r.get("restored_state_bytes")]
    if not sizes:
        return f"{size}; no takeover measured against state size yet (recovery bench standby)"
    largest = max(sizes, key=lambda r: r["restored_state_bytes"])
    measured = (
        f"a standby takeover restored {largest['restored_state_bytes'] / 1e6:,.2f} MB in "
        f"{largest['restart_time_s']:.1f} s (docs/benchmarks/bench_standby.json)"
    )
    if load.state_bytes > 10 * largest["restored_state_bytes"]:
        return (
            f"{size}: more than 10x the largest state we measured, where {measured}; measure "
            "the takeover at this size before relying on it (recovery bench standby --part "
            "sizes)"
        )
    return f"{size}: within the sizes measured, where {measured}"


def _job(facts: Facts, reports_dir: Path, sink: str, causal: bool) -> Advice:
    gaps = measured_gaps(reports_dir)
    evidence = gap_reports(reports_dir) if gaps else []
    if facts.max_outage_s is None:
        return Advice(
            REFERENCE_MODE.with_causal_logging(causal),
            sink,
            causal,
            [
                "no bound on the outage was given (--max-outage): the cheapest mode, a native "
                "restart from the checkpoint"
            ],  # fmt: skip
            evidence,
        )
    fraction = facts.load.fraction_of_mst if facts.load else None
    skipped: list[str] = []
    for mode, run, what in OUTAGE_LADDER:
        if run not in gaps:
            continue
        gap, jobs = gaps[run]
        if gap > facts.max_outage_s:
            continue
        if mode in REPLICATED and fraction is not None and fraction > REPLICATION_MAX_LOAD:
            skipped.append(mode)
            continue
        chosen = get_mode(mode).with_causal_logging(causal)
        reason = (
            f"outage at most {facts.max_outage_s:g} s: {mode} ({what}) showed output gaps up "
            f"to {gap:.1f} s when killed ({jobs}); every cheaper mode showed more"
        )
        return Advice(chosen, sink, causal, [reason], evidence)
    if skipped:
        reason = (
            f"{' and '.join(skipped)} would meet the outage bound, but the input runs at "
            f"{fraction:.0%} of the measured MST: two replicas sharing the cores kept up only "
            f"below {REPLICATION_MAX_LOAD:.0%} here. Give each replica its own host, or accept "
            "a standby takeover's gap"
        )
        standby = get_mode("standby")
        fallback = (
            standby.name if standby.kill_run in gaps else REFERENCE_MODE.with_causal_logging(causal)
        )
        return Advice(fallback, sink, causal, [reason], evidence)
    best = min(gaps.items(), key=lambda kv: kv[1][0]) if gaps else None
    reason = (
        f"no measured mode kept the output gap within {facts.max_outage_s:g} s (the smallest: "
        f"{best[0]}, {best[1][0]:.1f} s); two live replicas come closest"
        if best
        else "no masking measurements yet (recovery bench replication): two live replicas"
    )
    if fraction is not None and fraction > REPLICATION_MAX_LOAD:
        reason += (
            f", but at {fraction:.0%} of the MST two replicas sharing the cores would not keep "
            f"up (below {REPLICATION_MAX_LOAD:.0%} here): a standby, or a host per replica"
        )
        return Advice("standby", sink, causal, [reason], evidence)
    return Advice("kazoo", sink, causal, [reason], evidence)


def _checkmate(reports_dir: Path) -> dict[str, list[Measured]]:
    rows: dict[str, list[Measured]] = {}
    for m in extractor("checkmate")(reports_dir):
        rows.setdefault(m.row_id, []).append(m)
    return rows


def _pipeline(facts: Facts, reports_dir: Path, sink: str, causal: bool) -> Advice:
    ours = _checkmate(reports_dir)
    evidence = ["docs/benchmarks/bench_protocols.json"] if ours else []

    def cite(row_id: str, what: str) -> str:
        found = ours.get(row_id)
        if not found:
            return ""
        values = ", ".join(f"{m.value:g}" for m in found if m.value is not None)
        return f" (ours: {what} {values} {found[0].unit})"

    if facts.cycle:
        reason = (
            "a cycle through its topics: aligned COOR would wait for a marker that only comes "
            "after itself; UNC recovers the failed stage alone"
            + cite("checkmate.cyclic.restart_time.unc.w5", "restart on the cyclic query")
        )
        return Advice("unc", sink, causal, [reason], evidence)
    if facts.skew is not None and facts.skew.skewed:
        reason = (f"skewed input (the hottest 1 % of keys hold {facts.skew.hot_share:.0%} of "
                  f"records, >= {SKEW_HOT_SHARE:.0%}): COOR's markers wait for the slowest "
                  "stage; the paper saw its latency grow >= 10x per skew step"
                  + cite("checkmate.skew.coor.p50_growth_per_step.load50",
                         "COOR p50 growth per step here"))  # fmt: skip
        return Advice("unc", sink, causal, [reason], evidence)
    if facts.stages >= 3:
        reason = (f"{facts.stages} stages: UNC rolls back only what the recovery line reaches, "
                  "COOR every stage" + cite("checkmate.recovery_time.q1.w10",
                                            "recovery UNC / COOR on a 3-stage q1"))  # fmt: skip
        return Advice("unc", sink, causal, [reason], evidence)
    reason = ("uniform input, no cycle, few stages: COOR takes consistent global checkpoints "
              "with no invalid checkpoint and no protocol bytes"
              + cite("checkmate.invalid_ckpt.all.coor.w10", "invalid checkpoints %"))  # fmt: skip
    return Advice("coor", sink, causal, [reason], evidence)
