"""Iceberg table sink for ``foreachBatch`` (pyiceberg): one snapshot per micro-batch, never two.

Each append's snapshot summary carries a ``CommitMark`` (``rl.app``, ``rl.batch``,
``rl.epoch``). Before writing batch b the sink walks the main branch back from its current
snapshot to the app's newest mark: a batch at or below it is already in the table (a re-run
after a driver kill, a task retry, a standby or replica writing the same batch) and is skipped;
an epoch below the newest is a zombie's and is refused. The table is set to
``commit.retry.num-retries=0``: the catalog then refuses a commit when any other commit landed
since the snapshot the sink read, instead of re-applying the append on top of it unchecked, so
the check and the commit are one atomic step.

``expire_iceberg`` expires snapshots below an app's recovery point (for checkpoint GC).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot, ancestors_of

from recovery_lib.io.exceptions import InvalidSinkOption
from recovery_lib.io.sinks.lakehouse import (
    CommitMark,
    EpochFence,
    MarkedTableSink,
    TableCommit,
    TableKind,
    TableVacuum,
    vacuum_cut,
)

log = logging.getLogger(__name__)

NO_COMMIT_RETRY = {"commit.retry.num-retries": "0"}
DEFAULT_IDENTIFIER = "rl.output"
DEFAULT_CATALOG_NAME = "recovery"


def sqlite_catalog(root: str | os.PathLike[str]) -> dict[str, str]:
    """Properties of the default catalog: a SQLite file and a local warehouse under ``root``."""
    base = Path(root).resolve()
    base.mkdir(parents=True, exist_ok=True)
    return {
        "type": "sql",
        "uri": f"sqlite:///{base / 'catalog.db'}",
        "warehouse": (base / "warehouse").as_uri(),
    }


class IcebergTableSink(MarkedTableSink):
    """Appends each micro-batch of query ``query`` of job ``job`` to the Iceberg table
    ``identifier`` (``namespace.name``), created on the first write from the batch's schema
    (lineage columns included).

    ``catalog``: pyiceberg catalog properties (``load_catalog``), by default
    ``sqlite_catalog(root)``. ``epoch``, ``newest_epoch``: as for ``DeltaTableSink``.
    """

    conflict_errors = (CommitFailedException,)

    def __init__(
        self,
        root: str | os.PathLike[str],
        job: str,
        query: str,
        epoch: int = 0,
        newest_epoch: Callable[[], int] | None = None,
        identifier: str = DEFAULT_IDENTIFIER,
        catalog: Mapping[str, str] | None = None,
        catalog_name: str = DEFAULT_CATALOG_NAME,
    ) -> None:
        if "." not in identifier:
            raise InvalidSinkOption(
                f"identifier {identifier!r} must be namespace.table; name it like default.bids"
            )
        self.app_id = f"{job}:{query}"  # TableTarget.app_id
        self.identifier = identifier
        self.catalog_name = catalog_name
        self.catalog_properties = dict(catalog) if catalog is not None else sqlite_catalog(root)
        self.fence = EpochFence(epoch, newest_epoch)
        self.written = 0
        self.skipped = 0
        self._catalog: Catalog | None = None

    def __getstate__(self) -> dict[str, Any]:
        # foreachBatch may pickle the sink; a catalog holds a database engine.
        return {**self.__dict__, "_catalog": None}

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog(self.catalog_name, **self.catalog_properties)
        return self._catalog

    @property
    def where(self) -> str:
        return str(self.identifier)

    def _commit_once(self, table: pa.Table, batch_id: int) -> None:
        # Step 1. The snapshot the commit is checked against (the table is created if missing).
        iceberg = self._open(table.schema)
        # Step 2. This app's newest batch and epoch in that snapshot's history.
        last = self.last_mark(iceberg)
        # Step 3. A zombie writes nothing, not even a batch the table lacks.
        self.check_fence(batch_id, last.epoch if last else 0)
        # Step 4. The batch is in the table already: the guarantee holds without writing.
        if self.holds(last.batch_id if last else None, batch_id):
            self.skipped += 1
            log.info(
                "%s: batch %d skipped, the table holds up to %d",
                self.app_id,
                batch_id,
                last.batch_id,
            )
            return
        # Step 5. One snapshot with the rows and the mark; CommitFailedException if any commit
        # landed after step 1 (no catalog retry: the caller re-reads and checks again).
        mark = CommitMark(self.app_id, batch_id, self.fence.epoch)
        iceberg.append(table, snapshot_properties=mark.to_properties())
        self.written += 1

    def _open(self, schema: pa.Schema) -> Table:
        try:
            iceberg = self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            # Not create_table_if_not_exists every time: each try leaves a metadata file behind.
            self.catalog.create_namespace_if_not_exists(self.identifier.rsplit(".", 1)[0])
            iceberg = self.catalog.create_table_if_not_exists(
                self.identifier, schema=schema, properties=NO_COMMIT_RETRY
            )
        if any(iceberg.properties.get(k) != v for k, v in NO_COMMIT_RETRY.items()):
            # A table created elsewhere: a retried append would skip steps 2-4.
            iceberg = iceberg.transaction().set_properties(NO_COMMIT_RETRY).commit_transaction()
        return iceberg

    def last_mark(self, iceberg: Table) -> CommitMark | None:
        """The newest mark of this app on the main branch. Batch ids and epochs of an app only
        grow along it (steps 3-4 and the atomic commit), so the first one found is the highest."""
        for snapshot in ancestors_of(iceberg.current_snapshot(), iceberg.metadata):
            summary = snapshot.summary
            mark = CommitMark.from_properties(summary.additional_properties) if summary else None
            if mark is not None and mark.app_id == self.app_id:
                return mark
        return None

    def versions(self) -> list[TableCommit]:
        """Every snapshot on the main branch, oldest first, with the mark it carried."""
        return iceberg_commits(self.catalog.load_table(self.identifier))

    def batch_ids(self, app_id: str | None = None) -> list[int]:
        """The batch id of each snapshot of ``app_id`` (default: this sink's), in commit order."""
        app = app_id or self.app_id
        return [c.mark.batch_id for c in self.versions() if c.mark and c.mark.app_id == app]

    def read(self) -> pa.Table:
        """The table's rows (for tests and the oracle)."""
        return self.catalog.load_table(self.identifier).scan().to_arrow()

    def __repr__(self) -> str:
        return (
            f"IcebergTableSink({self.identifier!r}, app={self.app_id!r}, epoch={self.fence.epoch})"
        )


def load_iceberg_table(
    root: str | os.PathLike[str],
    identifier: str = DEFAULT_IDENTIFIER,
    catalog: Mapping[str, str] | None = None,
    catalog_name: str = DEFAULT_CATALOG_NAME,
) -> Table:
    """The table an ``IcebergTableSink`` built with the same arguments writes."""
    properties = dict(catalog) if catalog is not None else sqlite_catalog(root)
    return load_catalog(catalog_name, **properties).load_table(identifier)


def main_branch(
    iceberg: Table, snapshot: Snapshot | None = None
) -> list[tuple[Snapshot, TableCommit]]:
    """The snapshots from ``snapshot`` (default: the current one) back along the main branch
    to the oldest one not expired, oldest first, each with its commit as a reader sees it."""
    chain = list(ancestors_of(snapshot or iceberg.current_snapshot(), iceberg.metadata))
    return [
        (
            s,
            TableCommit(
                s.sequence_number or 0,
                CommitMark.from_properties(s.summary.additional_properties) if s.summary else None,
                s.timestamp_ms,
            ),
        )
        for s in reversed(chain)
    ]


def iceberg_commits(iceberg: Table, snapshot: Snapshot | None = None) -> list[TableCommit]:
    """The commits of the main branch up to ``snapshot`` (default: current), oldest first."""
    return [commit for _, commit in main_branch(iceberg, snapshot)]


def expire_iceberg(
    root: str | os.PathLike[str],
    app_id: str,
    keep_from_batch: int,
    dry_run: bool = False,
    identifier: str = DEFAULT_IDENTIFIER,
    catalog: Mapping[str, str] | None = None,
    catalog_name: str = DEFAULT_CATALOG_NAME,
    max_attempts: int = 5,
) -> TableVacuum:
    """Expire the main branch's snapshots below ``vacuum_cut`` (the first snapshot of ``app_id``
    at or above ``keep_from_batch``, never past any app's newest snapshot: the sink's skip
    check walks back to it, and the walk stops at the oldest snapshot kept).

    What goes: the snapshots, from the table's metadata (time travel to them ends, their marks
    go). Rows stay: the current snapshot holds every batch's rows. No file goes: pyiceberg
    0.12's ``expire_snapshots`` deletes none (the expired snapshots' manifest lists and the
    data files only they referenced stay until an engine's orphan-file removal).
    ``dry_run``: the same plan, nothing committed."""
    table = f"{catalog_name}:{identifier}"
    result = TableVacuum(TableKind.ICEBERG, table, app_id, keep_from_batch, dry_run)
    for _ in range(max_attempts):
        iceberg = load_iceberg_table(root, identifier, catalog, catalog_name)
        # Step 1. The cut, in the snapshot history the expiry commits against.
        branch = main_branch(iceberg)
        cut = result.cut_version = vacuum_cut((c for _, c in branch), app_id, keep_from_batch)
        if cut is None:
            result.notes.append(f"no snapshot of {app_id} on the main branch: nothing expired")
            return result
        doomed = [(s, c) for s, c in branch if c.version < cut]
        result.versions_removed = [c.version for _, c in doomed]
        if dry_run or not doomed:
            return result
        # Step 2. Expire them; the catalog refuses the commit if the table moved since step 1.
        try:
            iceberg.maintenance.expire_snapshots().by_ids(
                [s.snapshot_id for s, _ in doomed]
            ).commit()
        except CommitFailedException as exc:
            log.info("%s: expiry raced a commit, re-reading: %s", table, exc)
            continue
        result.notes.append("pyiceberg expires snapshots from the metadata only: no file deleted")
        return result
    result.versions_removed = []
    result.errors.append(
        f"{table}: the expiry lost {max_attempts} commit races; nothing expired this pass"
    )
    return result
