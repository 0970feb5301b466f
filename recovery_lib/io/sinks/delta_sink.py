"""Delta Lake table sink for ``foreachBatch``: one Delta commit per micro-batch, never two.

Each commit carries two Delta *application transactions* (the ``txn`` action of the Delta
protocol): ``(app_id, batch_id)`` and ``(app_id#epoch, epoch)``, plus a ``CommitMark`` in its
``commitInfo``. Before writing batch b the sink reads both in the table version it commits
against: a batch at or below the app's version is already in the table (a re-run after a
driver kill, a task retry, a standby or replica writing the same batch) and is skipped; an epoch
below the newest is a zombie's and is refused. delta-rs rejects a commit when another commit of
the same app id landed since that version, so the check and the commit are one atomic step.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from recovery_lib.io.sinks.lakehouse import (
    CommitMark,
    EpochFence,
    TableCommit,
    TableCommitConflict,
)
from recovery_lib.io.sinks.table_sink import TableSink

log = logging.getLogger(__name__)

EPOCH_TXN_SUFFIX = "#epoch"


class DeltaTableSink(TableSink):
    """Appends each micro-batch of query ``query`` of job ``job`` to the Delta table at ``path``.

    ``epoch``: this writer's fencing epoch; ``newest_epoch``: where the newest one is read (e.g.
    ``EpochStore(dir).current`` of recovery_lib/ha/fencing.py), or None to fence only by the
    epochs the table holds. Several apps (job:query) may write one table independently.
    """

    max_attempts = 5  # commits of the same app racing this one; each attempt re-reads the table

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
        self.app_id = f"{job}:{query}"
        self.fence = EpochFence(epoch, newest_epoch)
        self.storage_options = storage_options
        self.written = 0
        self.skipped = 0

    @property
    def epoch_app_id(self) -> str:
        """The app transaction whose version is the newest epoch that committed for this app."""
        return self.app_id + EPOCH_TXN_SUFFIX

    def write_batch(self, table: pa.Table, batch_id: int) -> None:
        """Commit ``table`` as batch ``batch_id`` unless the table holds it already. Raises
        ``TableWriterFenced`` (nothing written) when a newer epoch exists."""
        for _ in range(self.max_attempts):
            try:
                self._commit_once(table, batch_id)
                return
            except CommitFailedError as exc:
                log.info("%s: batch %d raced another commit, re-reading: %s", self, batch_id, exc)
        raise TableCommitConflict(
            f"{self.app_id}: batch {batch_id} lost {self.max_attempts} commit races on "
            f"{self.path}; two live writers of one app share this table (fence the older one)"
        )

    def _commit_once(self, table: pa.Table, batch_id: int) -> None:
        # Step 1. The table version the commit is checked against (created empty if missing).
        delta = self._open(table.schema)
        # Step 2. This app's newest batch and epoch in that version.
        done = delta.transaction_version(self.app_id)
        table_epoch = delta.transaction_version(self.epoch_app_id) or 0
        # Step 3. A zombie writes nothing, not even a batch the table lacks.
        self.fence.check(self.app_id, batch_id, table_epoch)
        # Step 4. The batch is in the table already: the guarantee holds without writing.
        if done is not None and done >= batch_id:
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
                ],
            ),
        )
        self.written += 1

    def _open(self, schema: pa.Schema) -> DeltaTable:
        if not DeltaTable.is_deltatable(self.path, self.storage_options):
            try:
                DeltaTable.create(
                    self.path, schema=schema, mode="ignore", storage_options=self.storage_options
                )
            except DeltaError:
                if not DeltaTable.is_deltatable(self.path, self.storage_options):
                    raise
                # a concurrent writer created it first: use theirs
        return DeltaTable(self.path, storage_options=self.storage_options)

    def versions(self) -> list[TableCommit]:
        """Every commit still in the Delta log, oldest first, with the mark it carried."""
        history = DeltaTable(self.path, storage_options=self.storage_options).history()
        commits = [
            TableCommit(int(info["version"]), CommitMark.from_properties(info)) for info in history
        ]
        return sorted(commits, key=lambda c: c.version)

    def batch_ids(self, app_id: str | None = None) -> list[int]:
        """The batch id of each commit of ``app_id`` (default: this sink's), in commit order."""
        app = app_id or self.app_id
        return [c.mark.batch_id for c in self.versions() if c.mark and c.mark.app_id == app]

    def read(self) -> pa.Table:
        """The table's rows (for tests and the oracle)."""
        return DeltaTable(self.path, storage_options=self.storage_options).to_pyarrow_table()

    def __repr__(self) -> str:
        return f"DeltaTableSink({self.path!r}, app={self.app_id!r}, epoch={self.fence.epoch})"
