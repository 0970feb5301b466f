"""Checkpoint GC of a query's lakehouse output table: remove the table versions no recovery can
need, below the oldest batch the query's checkpoint GC keeps (checkpoint_gc.py,
``GcPlan.oldest_kept_batch``). Apart from checkpoint_gc.py because it loads deltalake and
pyiceberg. docs/sinks.md, "Lakehouse tables", says what each format lets go.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recovery_lib.errors import ConfigurationError
from recovery_lib.io.sinks.delta_sink import vacuum_delta
from recovery_lib.io.sinks.iceberg_sink import (
    DEFAULT_CATALOG_NAME,
    DEFAULT_IDENTIFIER,
    expire_iceberg,
)
from recovery_lib.io.sinks.lakehouse import TableKind, table_kind


def vacuum_table(
    kind: TableKind | str,
    location: str | Path,
    app_id: str,
    keep_from_batch: int,
    dry_run: bool = False,
    *,
    identifier: str = DEFAULT_IDENTIFIER,
    catalog: dict[str, str] | None = None,
    catalog_name: str = DEFAULT_CATALOG_NAME,
    storage_options: dict[str, str] | None = None,
    retention_hours: int = 1,
) -> dict[str, Any]:
    """Remove the versions of the lakehouse table written by ``app_id`` (``job:query``) that no
    recovery can need: those below its first commit of a batch at or above ``keep_from_batch``
    (pass ``GcPlan.oldest_kept_batch``), never the newest commit of any app (the sink's skip
    check reads it). Rows are never removed: the table's current version holds them all.

    Delta (``location``: the table's path; ``storage_options``): data files no kept version
    references, once older than ``retention_hours``, and the log's commits below the cut,
    through a checkpoint at the cut (``vacuum_delta``). Iceberg (``location``: the sink's root;
    ``identifier``, ``catalog``, ``catalog_name`` as given to the sink): the snapshots below
    the cut leave the metadata, no file is deleted (``expire_iceberg``). ``dry_run``: the same
    plan, nothing removed. Returns ``TableVacuum.to_dict()``: what was (or would be) removed,
    what the table's settings kept and why."""
    if keep_from_batch < 0:
        raise ConfigurationError("keep_from_batch must be >= 0: it is a batch id")
    if table_kind(kind) is TableKind.DELTA:
        done = vacuum_delta(
            location, app_id, keep_from_batch, dry_run, retention_hours, storage_options
        )
    else:
        done = expire_iceberg(
            location, app_id, keep_from_batch, dry_run, identifier, catalog, catalog_name
        )
    return done.to_dict()
