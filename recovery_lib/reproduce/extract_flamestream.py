"""Paper 004 (FlameStream: exactly-once by a release barrier) against ``bench_sinks.json``
(``recovery bench sinks``) and ``release_campaign.json`` (``recovery bench campaign --suite
release``); docs/sinks.md explains both.

Which report field answers which paper row:

* ``flamestream.eo_latency_overhead``: ``jobs.<job>[]`` per ``interval_s``:
  ``release.p50_ms`` minus ``at_least_once.p50_ms`` (and their ratio), judged by
  ``release_goal``;
* ``flamestream.eo_overhead_vs_interval``: the same differences and ratios across the
  intervals of one job;
* ``flamestream.flink_eo_latency_vs_interval``: ``two_phase.p50_ms`` by ``interval_s``, and
  ``two_phase.p50_over_at_least_once`` at the longest interval;
* ``flamestream.recovery.ckpt_1000ms``: ``release_campaign.json`` ``results[]`` with sink
  ``release``: the run's experiment report (``latency_ms.p99``, ``output_gap_s``,
  ``restarts[].restart_time_s``) and the oracle's ``duplicated`` beside the ``at-least-once``
  result of the same ``case``;
* ``flamestream.default.input_rate`` / ``flamestream.default.nodes``: ``rate_eps`` and
  ``machine`` of bench_sinks.json.

Rows no report answers are in ``UNANSWERED``, each with its reason.

A point, sink or result with an ``error`` gives no row; a missing report gives none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from recovery_lib.reproduce.measured import Measured, report_path

SINKS_REPORT = "bench_sinks.json"
CAMPAIGN_REPORT = "release_campaign.json"
# docs/sinks.md: release within 1.1x of at-least-once at every interval (the report's
# ``release_goal``; this default only for a report that predates the field).
RELEASE_GOAL = 1.1

ROW_OVERHEAD = "flamestream.eo_latency_overhead"
ROW_FLAT = "flamestream.eo_overhead_vs_interval"
ROW_FLINK = "flamestream.flink_eo_latency_vs_interval"
ROW_RECOVERY = "flamestream.recovery.ckpt_1000ms"
ROW_RATE = "flamestream.default.input_rate"
ROW_NODES = "flamestream.default.nodes"

BECAUSE_RELEASE = (
    "Spark micro-batches: a release output leaves when its task has computed and sorted all "
    "its rows, after one read of its partition's tail (docs/sinks.md), and the sinks ran one "
    "after another on the same input, not on the same records"
)
BECAUSE_TWO_PHASE = (
    "in Spark the checkpoint is every micro-batch and every sink already waits for the next "
    "one, so two-phase adds only the wait for its batch's commit, a fraction of a second at "
    "this benchmark's rate, whatever the trigger interval (docs/sinks.md)"
)


@dataclass(frozen=True)
class Point:
    """One trigger interval of one job: each sink's p50 latency to visibility (ms), None for a
    sink that did not run or failed."""

    job: str
    interval_s: float
    at_least_once: float | None
    release: float | None
    two_phase: float | None

    @property
    def where(self) -> str:
        return f"{self.job} at trigger {self.interval_s:g} s"


@dataclass(frozen=True)
class Overhead:
    """Release against at-least-once at one point: difference (ms) and ratio of the p50s."""

    point: Point
    release: float
    at_least_once: float

    @property
    def diff_ms(self) -> float:
        return self.release - self.at_least_once

    @property
    def ratio(self) -> float:
        return round(self.release / self.at_least_once, 3)


# Paper rows no report of ours answers, and why (the reports show the reason beside the row).
UNANSWERED = {
    "flamestream.no_guarantee_latency_flamestream_vs_flink": (
        "we run neither FlameStream nor Flink: our modes are sinks of one Spark query"
    ),
    "flamestream.default.flink_buffer_timeout": (
        "a Flink setting; Spark has no network buffer timeout"
    ),
}


def _overheads(points: Iterable[Point]) -> list[Overhead]:
    return [
        Overhead(p, p.release, p.at_least_once)
        for p in points
        if p.release is not None and p.at_least_once  # a 0 ms baseline has no ratio
    ]


def extract(reports_dir: Path) -> list[Measured]:
    return [
        *_sinks(reports_dir / SINKS_REPORT),
        *_campaign(reports_dir / CAMPAIGN_REPORT, reports_dir),
    ]


# -- bench_sinks: latency to visibility by trigger interval (Figs. 10-12) --------------------


def _sinks(path: Path) -> list[Measured]:
    if not path.exists():
        return []
    report = json.loads(path.read_text())
    src = report_path(path)
    goal = report.get("release_goal", RELEASE_GOAL)
    rows: list[Measured] = []
    rate = report.get("rate_eps")  # reports of several rates: the first one's points
    for job, entries in (report.get("jobs") or {}).items():
        at_rate = [e for e in entries if rate is None or e.get("rate_eps", rate) == rate]
        points = sorted(_points(job, at_rate), key=lambda p: p.interval_s)
        rows += [_overhead(o, goal, src) for o in _overheads(points)]
        rows += _overhead_flat(job, points, goal, src)
        rows += _two_phase_trend(job, points, goal, src)
    rows += _sink_settings(report, src)
    return rows


def _points(job: str, entries: Iterable[dict[str, Any]]) -> list[Point]:
    def p50(entry: dict[str, Any], sink: str) -> float | None:
        run = entry.get(sink)
        return run.get("p50_ms") if _ok(run) else None

    return [
        Point(job, e["interval_s"], p50(e, "at_least_once"), p50(e, "release"), p50(e, "two_phase"))
        for e in entries
        if _ok(e)
    ]


def _overhead(o: Overhead, goal: float, src: str) -> Measured:
    agrees = o.ratio <= goal
    how = (
        f"{o.point.where} (the sinks one after another on the same input, at-least-once "
        f"first): release p50 {_n(o.release)} ms minus at-least-once p50 "
        f"{_n(o.at_least_once)} ms (ratio {o.ratio:.3f}); agrees when the ratio is <= "
        f"{goal:g}, the release goal of docs/sinks.md (an absolute 10 ms bound does not carry "
        "over to Spark's second-scale latencies)"
    )
    return Measured(
        ROW_OVERHEAD, o.diff_ms, "ms", src, how, agrees, _unless(agrees, BECAUSE_RELEASE)
    )


def _overhead_flat(job: str, points: list[Point], goal: float, src: str) -> list[Measured]:
    both = _overheads(points)
    if len(both) < 2:
        return []
    diffs = [o.diff_ms for o in both]
    agrees = all(o.ratio <= goal for o in both)
    how = (
        f"{job} at trigger intervals {_list(o.point.interval_s for o in both)} s: release minus "
        f"at-least-once p50 {_list(diffs)} ms (ratios {_ratios(o.ratio for o in both)}), "
        "value: at the longest interval minus at the shortest; agrees when the ratio stays "
        f"<= {goal:g} at every interval (the overhead does not grow faster than at-least-once's "
        "own latency, which in Spark grows with the trigger interval)"
    )
    value = diffs[-1] - diffs[0]
    return [Measured(ROW_FLAT, value, "ms", src, how, agrees, _unless(agrees, BECAUSE_RELEASE))]


def _two_phase_trend(job: str, points: list[Point], goal: float, src: str) -> list[Measured]:
    """Two-phase p50 by interval (Flink's exactly-once grows with it), and whether it is far
    above at-least-once at the longest interval (Flink's is 'dramatically higher')."""
    gated = [(p, p.two_phase) for p in points if p.two_phase is not None]
    if len(gated) < 2:
        return []
    p50 = [v for _, v in gated]
    grows = all(b > a for a, b in pairwise(p50))
    how = (
        f"{job}, two-phase sink (commit-gated) at trigger intervals "
        f"{_list(p.interval_s for p, _ in gated)} s: p50 {_list(p50)} ms, value: at the longest "
        "interval minus at the shortest; agrees when p50 grows with every longer interval"
    )
    rows = [
        Measured(
            ROW_FLINK, p50[-1] - p50[0], "ms", src, how, grows, _unless(grows, BECAUSE_TWO_PHASE)
        )
    ]
    last, last_p50 = gated[-1]
    if last.at_least_once:
        ratio = round(last_p50 / last.at_least_once, 3)
        above = ratio > goal
        alo = [p.at_least_once for p, _ in gated if p.at_least_once is not None]
        how = (
            f"{last.where}: two-phase p50 over at-least-once p50, {ratio:.3f}x (at-least-once "
            f"p50 {_list(alo)} ms over the same intervals: every Spark sink waits for the next "
            f"micro-batch); agrees when above the {goal:g} release goal, as Flink's exactly-once "
            "latency is 'dramatically higher' than without guarantees"
        )
        rows.append(
            Measured(ROW_FLINK, ratio, "x", src, how, above, _unless(above, BECAUSE_TWO_PHASE))
        )
    return rows


def _sink_settings(report: dict[str, Any], src: str) -> list[Measured]:
    out: list[Measured] = []
    machine = report.get("machine", "")
    if report.get("rate_eps") is not None:
        how = (
            f"bench_sinks' input rate, {report['rate_eps']:,.0f} NexMark events/s (the paper: 50 "
            "Wikipedia documents/s); a setting"
        )
        out.append(Measured(ROW_RATE, report["rate_eps"], "events/s", src, how, None))
    if "local[" in machine:
        how = f"bench_sinks ran Spark in local mode on one host (machine '{machine}'); a setting"
        out.append(Measured(ROW_NODES, 1.0, "nodes", src, how, None))
    return out


# -- release_campaign: failures with the release sink (Fig. 9) -------------------------------


def _campaign(path: Path, reports_dir: Path) -> list[Measured]:
    if not path.exists():
        return []
    results = [r for r in json.loads(path.read_text()).get("results") or [] if _ok(r)]
    at_least_once = {r["case"]: r for r in results if r.get("sink") == "at-least-once"}
    rows: list[Measured] = []
    for result in results:
        if result.get("sink") != "release":
            continue
        run_path = reports_dir / Path(result.get("experiment_report", "")).name
        if not result.get("experiment_report") or not run_path.exists():
            continue
        rows.append(_recovery(result, json.loads(run_path.read_text()), at_least_once, run_path))
    return rows


def _recovery(
    result: dict[str, Any],
    run: dict[str, Any],
    at_least_once: dict[str, dict[str, Any]],
    run_path: Path,
) -> Measured:
    kinds = sorted({f["kind"] for f in result.get("failures") or []})
    restarts = [r["restart_time_s"] for r in run.get("restarts") or []]
    other = at_least_once.get(result["case"])
    versus = (
        f" where at-least-once under the same failures had {other.get('duplicated')}"
        if other
        else ""
    )
    how = (
        f"{result['case']} ({result['pipeline']} at {result['rate']:,.0f} ev/s, "
        f"{result.get('recovery_mode')} recovery), {len(result.get('failures') or [])} "
        f"failures ({', '.join(kinds)}), release sink read by a plain consumer: value the run's "
        f"p99 latency; longest output gap after the first failure {run.get('output_gap_s')} s"
        + (f", restarts {min(restarts):g}-{max(restarts):g} s" if restarts else "")
        + f"; the oracle found {result.get('duplicated')} duplicates ({result.get('guarantee')})"
        + versus
        + " (release_campaign.json); not comparable: a qualitative claim on other hardware, and "
        "our checkpoint is every micro-batch, not every 1,000 ms"
    )
    p99 = (run.get("latency_ms") or {}).get("p99")
    return Measured(ROW_RECOVERY, p99, "ms", report_path(run_path), how, None)


# -- helpers ---------------------------------------------------------------------------------


def _ok(entry: Any) -> bool:
    """An entry that ran: a result, not an ``error``."""
    return isinstance(entry, dict) and bool(entry) and "error" not in entry


def _unless(agrees: bool, because: str) -> str:
    return "" if agrees else because


def _ratios(values: Iterable[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _list(values: Iterable[float]) -> str:
    return ", ".join(f"{v:,.0f}" if abs(v) >= 10 else f"{v:g}" for v in values)
