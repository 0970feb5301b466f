"""Recovery metrics from a run's latency samples (DESIGN 4).

recovery time: failure -> the first second from which the per-second p50 latency stays within
10 % of the pre-failure p50 for ``hold_s`` consecutive seconds with output. The pre-failure p50
is taken over the last ``baseline_s`` seconds before the failure: steady state, not the
warm-up of the first micro-batches (Python workers starting, JIT).
output gap: the longest time without any output after the failure.
disturbance (CheckMate's measure for pipelines, ``disturbance_s``): failure -> the end of the
last second whose p50 exceeds twice the pre-failure p50, or of the last unusual silence. Each
measure has its own name and JSON key; only the first is "recovery time".
p99 around a failure: of the outputs visible in the 30 s before it and in the 30 s after it.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from recovery_lib.metrics.stats import percentile


def per_second_p50(samples: list[tuple[int, int]]) -> dict[int, float]:
    by_second: dict[int, list[int]] = defaultdict(list)
    for visible, latency in samples:
        by_second[visible // 1000].append(latency)
    return {sec: statistics.median(v) for sec, v in sorted(by_second.items())}


def recovery_time_s(
    samples: list[tuple[int, int]],
    failure_ms: int,
    tolerance: float = 0.10,
    hold_s: int = 3,
    baseline_s: float = 10.0,
) -> float | None:
    since = failure_ms - baseline_s * 1000
    before = [lat for visible, lat in samples if since <= visible < failure_ms]
    if not before:
        return None
    baseline = statistics.median(before)
    limit = baseline * (1 + tolerance) + 50  # +50 ms: per-second medians jitter at low latency
    p50 = per_second_p50([s for s in samples if s[0] >= failure_ms])
    seconds = sorted(p50)
    for i, sec in enumerate(seconds):
        window = seconds[i : i + hold_s]
        if len(window) == hold_s and all(p50[s] <= limit for s in window):
            return max(0.0, (sec * 1000 - failure_ms) / 1000)
    return None


def output_gap_s(visible_ms: list[int], failure_ms: int) -> float:
    times = sorted(t for t in visible_ms if t >= failure_ms)
    if not times:
        return 0.0
    gaps = [times[0] - failure_ms] + [b - a for a, b in zip(times, times[1:], strict=False)]
    return max(gaps) / 1000


def each_failure(samples: list[tuple[int, int]], fired_ms: list[int]) -> list[dict[str, Any]]:
    """Output gap and recovery time of each of several failures of one run, each measured on
    the outputs before the next failure (a campaign's per-kind figures): a failure whose
    recovery the next one cut short has no recovery time; one with no output before the next
    has the whole interval as its gap."""
    out: list[dict[str, Any]] = []
    ordered = sorted(fired_ms)
    for i, at in enumerate(ordered):
        end = ordered[i + 1] if i + 1 < len(ordered) else None
        window = [s for s in samples if end is None or s[0] < end]
        after = [v for v, _ in window if v >= at]
        if after:
            gap: float | None = output_gap_s(after, at)
        else:
            gap = (end - at) / 1000 if end is not None else None
        out.append(
            {"fired_ms": at, "output_gap_s": gap, "recovery_time_s": recovery_time_s(window, at)}
        )
    return out


def p99_around(samples: list[tuple[int, int]], failure_ms: int) -> dict[str, float | None]:
    """p99 latency of the outputs visible in the 30 s before and after the failure, and their
    ratio (active replication's goal: a replica's death does not move it)."""
    span = 30_000
    before = [lat for vis, lat in samples if failure_ms - span <= vis < failure_ms]
    after = [lat for vis, lat in samples if failure_ms <= vis < failure_ms + span]
    p_before = percentile(before, 99) if before else None
    p_after = percentile(after, 99) if after else None
    return {
        "p99_30s_before_ms": p_before,
        "p99_30s_after_ms": p_after,
        "p99_after_over_before": round(p_after / p_before, 3) if p_before and p_after else None,
    }


DISTURBANCE_KEY = "disturbance_s"
# A silence in the output shorter than this (or than twice the longest one in the 30 s before
# the kill) is the stages' batching, not the failure.
NORMAL_SILENCE_MS = 3_000


def disturbance_s(samples: list[tuple[int, int]], killed_ms: int) -> float | None:
    """CheckMate's recovery measure of a pipeline, named apart from ``recovery_time_s``: from
    the kill to the end of the last bad stretch after it, a second whose p50 exceeds twice the
    p50 of the 30 s before the kill, or a silence longer than the output's normal pauses (a
    stage that dies after its downstream read its last batch shows as output going on for a
    few seconds, then none). None: nothing to compare with, or no output after the kill."""
    before = [(vis, lat) for vis, lat in samples if killed_ms - 30_000 <= vis < killed_ms]
    later = sorted(vis for vis, _ in samples if vis >= killed_ms)
    if not before or not later:
        return None
    bound = 2 * percentile([lat for _, lat in before], 50)
    shown = sorted(vis for vis, _ in before)
    pauses = [b - a for a, b in zip(shown, shown[1:], strict=False)]
    normal = max(NORMAL_SILENCE_MS, 2 * max(pauses, default=0))
    last_bad = 0
    for a, b in zip([shown[-1], *later], later, strict=False):
        if b - a > normal:
            last_bad = max(last_bad, b - killed_ms)
    seconds: dict[int, list[int]] = {}
    for vis, lat in samples:
        if vis >= killed_ms:
            seconds.setdefault((vis - killed_ms) // 1000, []).append(lat)
    for second, lats in seconds.items():
        if percentile(lats, 50) > bound:
            last_bad = max(last_bad, (second + 1) * 1000)
    return round(last_bad / 1000, 1)
