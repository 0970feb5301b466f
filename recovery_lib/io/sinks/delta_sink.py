"""Delta Lake table sink for ``foreachBatch``: one Delta commit per micro-batch, never two.

Each commit carries two Delta *application transactions* (the ``txn`` action of the Delta
protocol): ``(app_id, batch_id)`` and ``(app_id#epoch, epoch)``, plus a ``CommitMark`` in its
``commitInfo``. Before writing batch b the sink reads both in the table version it commits
against: a batch at or below the app's version is already in the table (a re-run after a
driver kill, a task retry, a standby or replica writing the same batch) and is skipped; an epoch
below the newest is a zombie's and is refused. delta-rs rejects a commit when another commit of
the same app id landed since that version, so the check and the commit are one atomic step.

``vacuum_delta`` removes versions below an app's recovery point (for checkpoint GC).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

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

EPOCH_TXN_SUFFIX = "#epoch"
LOG_RETENTION_KEY = "delta.logRetentionDuration"
# Tables the sink creates: only ``vacuum_delta`` cleans the log, deciding by batch; delta-rs
# would clean it after each checkpoint by age, dropping commits a recovery may still need.
GC_CONFIGURATION = {
    LOG_RETENTION_KEY: "interval 0 seconds",
    "delta.enableExpiredLogCleanup": "false",
}


class DeltaTableSink(MarkedTableSink):
    """Appends each micro-batch of query ``query`` of job ``job`` to the Delta table at ``path``.

    ``epoch``: this writer's fencing epoch; ``newest_epoch``: where the newest one is read (e.g.
    ``EpochStore(dir).current`` of recovery_lib/ha/fencing.py), or None to fence only by the
    epochs the table holds. Several apps (job:query) may write one table independently.
    """

    conflict_errors = (CommitFailedError,)
    conflict_hint = "two live writers of one app share this table (fence the older one)"

    def __init__(
        self,
        path: str | os.PathLike[str],
        job: str,
        query: str,
        epoch: int = 0,
        newest_epoch: Callable[[], int] | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self.path = str(path)
        self.app_id = f"{job}:{query}"  # TableTarget.app_id
        self.fence = EpochFence(epoch, newest_epoch)
        self.storage_options = storage_options
        self.written = 0
        self.skipped = 0

    @property
    def epoch_app_id(self) -> str:
        """The app transaction whose version is the newest epoch that committed for this app."""
        return self.app_id + EPOCH_TXN_SUFFIX

    @property
    def where(self) -> str:
        return str(self.path)

    def _commit_once(self, table: pa.Table, batch_id: int) -> None:
        # Step 1. The table version the commit is checked against (created empty if missing).
        delta = self._open(table.schema)
        # Step 2. This app's newest batch and epoch in that version.
        done = delta.transaction_version(self.app_id)
        table_epoch = delta.transaction_version(self.epoch_app_id) or 0
        # Step 3. A zombie writes nothing, not even a batch the table lacks.
        self.check_fence(batch_id, table_epoch)
        # Step 4. The batch is in the table already: the guarantee holds without writing.
        if self.holds(done, batch_id):
            self.skipped += 1
            log.info("%s: batch %d skipped, the table holds up to %d", self.app_id, batch_id, done)
            return
        # Step 5. Rows, both app transactions and the mark in one commit; delta-rs raises
        # CommitFailedError if a commit of this app landed after step 1 (the caller re-reads).
        mark = CommitMark(self.app_id, batch_id, self.fence.epoch)
        write_deltalake(
            delta,
            table,
            mode="append",
            commit_properties=CommitProperties(
                custom_metadata=mark.to_properties(),
                app_transactions=[
                    Transaction(self.app_id, batch_id),
                    Transaction(self.epoch_app_id, self.fence.epoch),
                ]
                if self.guarded
                else None,
            ),
        )
        self.written += 1

    def _open(self, schema: pa.Schema) -> DeltaTable:
        if not DeltaTable.is_deltatable(self.path, self.storage_options):
            try:
                DeltaTable.create(
                    self.path,
                    schema=schema,
                    mode="ignore",
                    configuration=GC_CONFIGURATION,
                    storage_options=self.storage_options,
                )
            except DeltaError:
                if not DeltaTable.is_deltatable(self.path, self.storage_options):
                    raise
                # a concurrent writer created it first: use theirs
        return DeltaTable(self.path, storage_options=self.storage_options)

    def versions(self) -> list[TableCommit]:
        """Every commit still in the Delta log, oldest first, with the mark it carried."""
        return delta_commits(DeltaTable(self.path, storage_options=self.storage_options))

    def batch_ids(self, app_id: str | None = None) -> list[int]:
        """The batch id of each commit of ``app_id`` (default: this sink's), in commit order."""
        app = app_id or self.app_id
        return [c.mark.batch_id for c in self.versions() if c.mark and c.mark.app_id == app]

    def read(self) -> pa.Table:
        """The table's rows (for tests and the oracle)."""
        return DeltaTable(self.path, storage_options=self.storage_options).to_pyarrow_table()

    def __repr__(self) -> str:
        return f"DeltaTableSink({self.path!r}, app={self.app_id!r}, epoch={self.fence.epoch})"


def delta_commits(delta: DeltaTable) -> list[TableCommit]:
    """The commits of ``delta`` up to its loaded version that are still in the log, oldest
    first (a vacuum's log cleanup removes older ones; the app transactions survive it)."""
    commits = [
        TableCommit(
            int(info["version"]), CommitMark.from_properties(info), int(info.get("timestamp", 0))
        )
        for info in delta.history()
        if int(info["version"]) <= delta.version()
    ]
    return sorted(commits, key=lambda c: c.version)


def vacuum_delta(
    path: str | os.PathLike[str],
    app_id: str,
    keep_from_batch: int,
    dry_run: bool = False,
    retention_hours: int = 1,
    storage_options: Mapping[str, str] | None = None,
) -> TableVacuum:
    """Remove the versions of the Delta table at ``path`` below ``vacuum_cut`` (the first commit
    of ``app_id`` at or above ``keep_from_batch``, never past any app's newest commit).

    What goes: data files that no kept version references (files a compaction, delete or
    overwrite replaced, and files no commit names) once older than ``retention_hours`` (a
    writer's files are on disk before its commit names them: 0 can delete a running write's);
    and the log's commits below the cut, after a checkpoint at the cut, as far as the table's
    ``delta.logRetentionDuration`` lets them (the sink's tables: all). Rows stay: an
    append-only table's current version holds every batch's rows, and the apps' transactions
    (the skip check) live on in the checkpoint; the commit marks below the cut go with their
    commits. ``dry_run``: the same plan, nothing written or deleted."""
    options = dict(storage_options) if storage_options is not None else None
    delta = DeltaTable(path, storage_options=options)
    latest = delta.version()
    commits = delta_commits(delta)
    result = TableVacuum(TableKind.DELTA, str(path), app_id, keep_from_batch, dry_run)
    cut = result.cut_version = vacuum_cut(commits, app_id, keep_from_batch)
    if cut is None:
        result.notes.append(f"no commit of {app_id} in the table: nothing removed")
        return result
    # Step 1. Data files no version from the cut on references (while the log still has them).
    keep = list(range(cut, latest + 1))
    doomed = _vacuum_files(delta, keep, retention_hours, dry_run=True)
    if doomed and not dry_run:  # a vacuum that deletes nothing would still commit twice
        doomed = _vacuum_files(delta, keep, retention_hours, dry_run=False)
    result.files_removed = sorted(doomed)
    # Step 2. The log below the cut. Loaded at the cut, the table checkpoints there and cleans
    # the commits before it (loaded at the latest version, it would clean up to the newest
    # checkpoint, past the cut), as far as the retention set at the cut allows.
    below = [c.version for c in commits if c.version < cut]
    if not below:
        return result
    at_cut = DeltaTable(path, version=cut, storage_options=options)
    retention = at_cut.metadata().configuration.get(LOG_RETENTION_KEY)
    kept_by = f"{LOG_RETENTION_KEY}={retention or '30 days, the default'}"
    if dry_run:
        result.versions_removed = below
        if retention != GC_CONFIGURATION[LOG_RETENTION_KEY]:
            result.notes.append(f"the log retention ({kept_by}) may keep some of these versions")
        return result
    at_cut.create_checkpoint()
    at_cut.cleanup_metadata()
    # Step 3. What really left the log (the retention decides, not this function).
    still = {c.version for c in delta_commits(DeltaTable(path, storage_options=options))}
    result.versions_removed = [v for v in below if v not in still]
    result.versions_left = [v for v in below if v in still]
    if result.versions_left:
        result.notes.append(
            f"{len(result.versions_left)} versions below {cut} kept by the log retention "
            f"({kept_by}); the sink creates tables with "
            f"{GC_CONFIGURATION[LOG_RETENTION_KEY]!r} to let them go"
        )
    return result


def _vacuum_files(
    delta: DeltaTable, keep: list[int], retention_hours: int, dry_run: bool
) -> list[str]:
    return delta.vacuum(
        retention_hours=retention_hours,
        dry_run=dry_run,
        enforce_retention_duration=False,
        full=True,
        keep_versions=keep,
    )
