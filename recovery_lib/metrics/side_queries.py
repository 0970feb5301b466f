"""Queries a job runs beside its own, whose progress is not the job's: a standby's or a
spare's rehearsal (ha/standby/rehearsal.py, job/spare_warmth.py) and the probes of a poison
search (job/poison.py). Free of pyspark: the event log's reader uses it too."""

from __future__ import annotations

__all__ = ["SIDE_QUERY_PREFIXES", "is_side_query"]

SIDE_QUERY_PREFIXES = ("rehearsal_", "poison_probe_")


def is_side_query(name: str | None) -> bool:
    """Whether a query of this name is a side query (not the job's own)."""
    return (name or "").startswith(SIDE_QUERY_PREFIXES)
