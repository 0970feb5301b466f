"""The one percentile used by every report (nearest rank, as DESIGN 4's p50/p99)."""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: Iterable[float], pct: float) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))
    return float(ordered[index])
