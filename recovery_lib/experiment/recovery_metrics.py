"""Recovery metrics from a run's latency samples (DESIGN 4).

recovery time: failure -> the first second from which the per-second p50 latency stays within
10 % of the pre-failure p50 for ``hold_s`` consecutive seconds with output. The pre-failure p50
is taken over the last ``baseline_s`` seconds before the failure: steady state, not the
warm-up of the first micro-batches (Python workers starting, JIT).
output gap: the longest time without any output after the failure.
p99 around a failure: of the outputs visible in the 30 s before it and in the 30 s after it.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

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
