"""The one number every benchmark reports: a measurement over its baseline, in the same run."""

from __future__ import annotations


def ratio(value: float | None, base: float | None) -> float | None:
    """``value / base`` to 3 decimals; None when either is missing or the base is 0."""
    if value is None or not base:
        return None
    return round(value / base, 3)
