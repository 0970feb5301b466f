"""What the lakehouse table sinks (Delta Lake, Iceberg) share: the mark every commit carries,
epoch fencing, and the reader's check of both.

Each micro-batch becomes one table commit (a Delta version, an Iceberg snapshot) carrying a
``CommitMark``: which application (``job:query``) wrote it, for which batch, in which fencing
epoch. A writer reads its application's newest mark in the table version it commits against and
skips a batch the table already holds; the table's own conflict check makes that read and the
commit one atomic step. docs/sinks.md, "Lakehouse tables", tells the whole story.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from recovery_lib.io.exceptions import InvalidSinkOption, IOLayerError, WriterFenced
from recovery_lib.io.sinks.table_sink import TableSink

APP_KEY, BATCH_KEY, EPOCH_KEY = "rl.app", "rl.batch", "rl.epoch"


log = logging.getLogger(__name__)


class TableKind(StrEnum):
    """The table formats the lakehouse sinks write."""

    DELTA = "delta"
    ICEBERG = "iceberg"


def table_kind(name: str) -> TableKind:
    """A table format by name (``delta``, ``iceberg``; any case)."""
    try:
        return TableKind(name.strip().lower())
    except ValueError:
        choices = ", ".join(k.value for k in TableKind)
        raise InvalidSinkOption(f"table kind {name!r} is unknown; choose {choices}") from None


@dataclass(frozen=True)
class CommitMark:
    """Who wrote a table commit: lives in a Delta commit's ``commitInfo`` (custom metadata) and
    in an Iceberg snapshot's summary, as the string keys ``rl.app``, ``rl.batch``, ``rl.epoch``."""

    app_id: str
    batch_id: int
    epoch: int

    def to_properties(self) -> dict[str, str]:
        return {APP_KEY: self.app_id, BATCH_KEY: str(self.batch_id), EPOCH_KEY: str(self.epoch)}

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> CommitMark | None:
        """None for a commit no sink of ours made (no ``rl.app``)."""
        app = props.get(APP_KEY)
        if app is None:
            return None
        return cls(str(app), int(str(props[BATCH_KEY])), int(str(props.get(EPOCH_KEY, 0))))


@dataclass(frozen=True)
class TableCommit:
    """One commit of a table as a reader sees it. ``version``: the Delta table version, or the
    Iceberg snapshot's sequence number; both increase by commit order. ``mark``: None for
    commits made by others (a compaction, a schema change). ``timestamp_ms``: when the commit
    landed, i.e. when its rows became visible (0: unknown)."""

    version: int
    mark: CommitMark | None
    timestamp_ms: int = 0


class TableWriterFenced(WriterFenced):
    """A table sink refused to commit: a writer of a newer epoch exists (this one is a zombie)."""


class TableCommitConflict(IOLayerError):
    """Commits of others kept landing between this writer's read of the table and its commit."""


@dataclass(frozen=True)
class EpochFence:
    """A writer's epoch and where the newest one is read (``newest_epoch``: e.g. the bound
    ``current`` of ha's ``EpochStore``; io cannot import ha, so it takes the callable)."""

    epoch: int
    newest_epoch: Callable[[], int] | None = None

    def check(self, app_id: str, batch_id: int, table_epoch: int) -> None:
        """Raise ``TableWriterFenced`` when the store or the table knows a newer epoch.
        ``table_epoch``: the newest epoch the table holds for ``app_id`` (0 if none)."""
        store_epoch = self.newest_epoch() if self.newest_epoch is not None else 0
        newest = max(store_epoch, table_epoch)
        if newest > self.epoch:
            where = "the table already holds a commit" if table_epoch == newest else "it was taken"
            raise TableWriterFenced(
                f"{app_id}: batch {batch_id} refused, this writer holds epoch {self.epoch} but "
                f"epoch {newest} is newer ({where}): a standby or a new run took over and this "
                "process is a zombie; stop it, its batches are written by the newer writer"
            )


def zombie_commits(commits: Iterable[TableCommit]) -> list[TableCommit]:
    """The reader's check of fencing: commits of an application whose epoch is below that of an
    earlier commit of the same application (none, when the sinks fenced as they must)."""
    newest: dict[str, int] = {}
    found = []
    for commit in sorted(commits, key=lambda c: c.version):
        if commit.mark is None:
            continue
        app, epoch = commit.mark.app_id, commit.mark.epoch
        if epoch < newest.get(app, 0):
            found.append(commit)
        newest[app] = max(newest.get(app, 0), epoch)
    return found


def vacuum_cut(commits: Iterable[TableCommit], app_id: str, keep_from_batch: int) -> int | None:
    """The oldest version a vacuum of ``app_id``'s table keeps (versions below it may go), or
    None to keep everything (no commit of ``app_id`` in the table: a wrong app id must not
    vacuum). It is the first commit of ``app_id`` holding a batch at or above
    ``keep_from_batch`` (the oldest batch its recovery may still need), and never later than
    the newest commit of any app: the Iceberg sink's skip check reads that mark."""
    ordered = sorted(commits, key=lambda c: c.version)
    mine = [c for c in ordered if c.mark is not None and c.mark.app_id == app_id]
    if not mine:
        return None
    needed = [c.version for c in mine if c.mark is not None and c.mark.batch_id >= keep_from_batch]
    cut = needed[0] if needed else ordered[-1].version
    newest_per_app = {c.mark.app_id: c.version for c in ordered if c.mark is not None}
    return min(cut, *newest_per_app.values())


@dataclass
class TableVacuum:
    """What one vacuum pass over a lakehouse table removed (``dry_run``: would remove); reported
    beside the checkpoint GC's ``GcResult`` (recovery_lib/runtime/checkpoint_gc.py).

    ``cut_version``: the oldest version kept (``vacuum_cut``; None: nothing cut).
    ``versions_removed``: versions below it no longer readable (Delta: commits that left the
    log; Iceberg: expired snapshots, by sequence number). ``versions_left``: versions below the
    cut still there (Delta: younger than the table's log retention). ``files_removed``: data
    files deleted (Delta ``vacuum``; pyiceberg deletes no file)."""

    kind: TableKind
    table: str
    app_id: str
    keep_from_batch: int
    dry_run: bool
    cut_version: int | None = None
    versions_removed: list[int] = field(default_factory=list)
    versions_left: list[int] = field(default_factory=list)
    files_removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind.value}


class MarkedTableSink(TableSink):
    """A table sink whose every commit carries its batch's mark: one commit per batch, checked
    against the table it read (``_commit_once``), again from a fresh read when another commit
    won the race, at most ``max_attempts`` times."""

    max_attempts = 5  # commits racing this one; each attempt re-reads the table
    app_id: str
    # False: a plain append, as a foreachBatch without our guard writes (every attempt of a
    # batch lands, no fencing); only for contrast in campaigns. Its commits keep their marks,
    # so a reader counts the batches that landed twice.
    guarded = True
    # The table format's "another commit landed first" errors, and what to say after too many.
    conflict_errors: tuple[type[BaseException], ...] = ()
    conflict_hint = "too many writers commit to this table at once"

    def write_batch(self, table: Any, batch_id: int) -> None:
        """Commit ``table`` as batch ``batch_id`` unless the table holds it already. Raises
        ``TableWriterFenced`` (nothing written) when a newer epoch exists."""
        for _ in range(self.max_attempts):
            try:
                self._commit_once(table, batch_id)
                return
            except self.conflict_errors as exc:
                log.info("%s: batch %d raced another commit, re-reading: %s", self, batch_id, exc)
        raise TableCommitConflict(
            f"{self.app_id}: batch {batch_id} lost {self.max_attempts} commit races on "
            f"{self.where}; {self.conflict_hint}"
        )

    def holds(self, done: int | None, batch_id: int) -> bool:
        """Whether the table, whose newest batch of this app is ``done``, holds ``batch_id``
        (a plain append never asks)."""
        return self.guarded and done is not None and done >= batch_id

    def check_fence(self, batch_id: int, table_epoch: int) -> None:
        if self.guarded:
            self.fence.check(self.app_id, batch_id, table_epoch)

    @property
    @abstractmethod
    def where(self) -> str:
        """The table, as an error names it."""

    @abstractmethod
    def _commit_once(self, table: Any, batch_id: int) -> None:
        """Read the table, fence, skip a batch it holds, else commit the batch once."""
