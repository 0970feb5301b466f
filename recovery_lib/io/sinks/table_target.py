"""Where a job's output lands when it is a lakehouse table instead of a topic: one value that
travels from the user's choice (``--sink delta --table PATH``, the jobs file's ``sink: delta``
and ``table:``) through the job's launch (``--table-sink delta:PATH``) to the sink the job
writes with, the reader the oracle judges and the vacuum checkpoint GC runs.

Spelled ``delta:<path or URI>`` or ``iceberg:<root>[#namespace.table]`` (an Iceberg root holds
the SQLite catalog and the warehouse, io/sinks/iceberg_sink.py). ``delta-append:`` and
``iceberg-append:`` are the plain appends a ``foreachBatch`` without the guard makes, every
attempt of a batch landing: campaigns run them for contrast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from recovery_lib.io.exceptions import InvalidSinkOption
from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.io.sinks.iceberg_sink import DEFAULT_IDENTIFIER
from recovery_lib.io.sinks.lakehouse import MarkedTableSink, TableCommit, TableKind, table_kind
from recovery_lib.io.sinks.table_sink import BATCH_COL

__all__ = [
    "TableTarget",
]

PLAIN_APPEND = "-append"  # delta-append:<path>: the unguarded contrast


@dataclass(frozen=True)
class TableTarget:
    """A lakehouse table a job writes: its format, location and (Iceberg) identifier.

    ``JobOptions.table_sink`` holds it spelled (``spell``); ``parse`` reads it back.

    Attributes:
        kind: Delta or Iceberg.
        location: The Delta table's path or URI; the Iceberg root (its SQLite catalog and
            warehouse).
        identifier: Iceberg: ``namespace.table``.
        guarded: False: a plain append (``delta-append:...``), every attempt of a batch
            lands; for contrast in campaigns, never for a job's output.
    """

    kind: TableKind
    location: str
    identifier: str = DEFAULT_IDENTIFIER
    guarded: bool = True

    @classmethod
    def parse(cls, spelled: str) -> TableTarget:
        """The table a spelling names.

        Args:
            spelled: ``delta:<path or URI>`` or ``iceberg:<root>[#namespace.table]``
                (``delta-append:``, ``iceberg-append:``: unguarded).

        Returns:
            The target.

        Raises:
            InvalidSinkOption: Another form (the message names the right one), an unknown
                format, a Delta table with an identifier, or an Iceberg identifier without a
                namespace.
        """
        kind, sep, rest = spelled.partition(":")
        if not sep or not rest:
            raise InvalidSinkOption(
                f"table sink {spelled!r}: spell it delta:<path> or iceberg:<root>[#ns.table]"
            )
        location, _, identifier = rest.partition("#")
        kind, plain, _ = kind.partition(PLAIN_APPEND)
        target = cls(table_kind(kind), location, identifier or DEFAULT_IDENTIFIER, not plain)
        if target.kind is TableKind.DELTA and identifier:
            raise InvalidSinkOption(f"table sink {spelled!r}: a Delta table is named by its path")
        if "." not in target.identifier:
            raise InvalidSinkOption(
                f"table sink {spelled!r}: an Iceberg identifier is namespace.table"
            )
        return target

    def spell(self) -> str:
        """The table as a launch spells it.

        Returns:
            Text that ``parse`` reads back.
        """
        kind = self.kind.value + ("" if self.guarded else PLAIN_APPEND)
        if self.kind is TableKind.ICEBERG and self.identifier != DEFAULT_IDENTIFIER:
            return f"{kind}:{self.location}#{self.identifier}"
        return f"{kind}:{self.location}"

    @property
    def where(self) -> str:
        """The table as reports name it."""
        if self.kind is TableKind.ICEBERG:
            return f"iceberg {self.identifier} under {self.location}"
        return f"delta {self.location}"

    @staticmethod
    def app_id(job: str, query: str) -> str:
        """Whose commits a table sink makes (its marks' app).

        Args:
            job: The job's prefix (shared by a restart, a standby and a replica).
            query: The query's name.

        Returns:
            ``<job>:<query>``.
        """
        return f"{job}:{query}"

    def sink(
        self, job: str, query: str, epoch: int = 0, newest_epoch: Callable[[], int] | None = None
    ) -> MarkedTableSink:
        """The ``foreachBatch`` sink writing the table: one commit per micro-batch; a batch
        the table holds is skipped, a fenced epoch's batch refused.

        Args:
            job: The job's prefix (see ``app_id``).
            query: The query's name.
            epoch: The fencing epoch it writes in.
            newest_epoch: Reads the newest epoch (fencing); None: not fenced.

        Returns:
            The sink, a ``foreachBatch`` callable.
        """
        if self.kind is TableKind.DELTA:
            from recovery_lib.io.sinks.delta_sink import DeltaTableSink

            sink: MarkedTableSink = DeltaTableSink(self.location, job, query, epoch, newest_epoch)
        else:
            from recovery_lib.io.sinks.iceberg_sink import IcebergTableSink

            sink = IcebergTableSink(
                self.location, job, query, epoch, newest_epoch, identifier=self.identifier
            )
        sink.guarded = self.guarded
        return sink

    def exists(self) -> bool:
        """Whether the table has been created (a job's first batch creates it).

        Returns:
            True when its history can be read.
        """
        try:
            self.commits()
        except Exception:  # noqa: BLE001 - each format says "not there" its own way
            return False
        return True

    def commits(self) -> list[TableCommit]:
        """Every commit still in the table's history.

        Returns:
            The commits, oldest first, with the batch marks the sinks wrote.
        """
        if self.kind is TableKind.DELTA:
            from deltalake import DeltaTable

            from recovery_lib.io.sinks.delta_sink import delta_commits

            return delta_commits(DeltaTable(self.location))
        from recovery_lib.io.sinks.iceberg_sink import iceberg_commits, load_iceberg_table

        return iceberg_commits(load_iceberg_table(self.location, self.identifier))

    def batch_rows(self, batch_id: int, columns: list[str]) -> pa.Table:
        """The rows the table holds for one micro-batch (by its lineage column).

        Args:
            batch_id: The micro-batch.
            columns: The columns to read.

        Returns:
            The rows as an Arrow table.
        """
        if self.kind is TableKind.DELTA:
            import pyarrow.dataset as ds
            from deltalake import DeltaTable

            dataset = DeltaTable(self.location).to_pyarrow_dataset()
            return dataset.to_table(columns=columns, filter=ds.field(BATCH_COL) == batch_id)
        from pyiceberg.expressions import EqualTo

        from recovery_lib.io.sinks.iceberg_sink import load_iceberg_table

        table = load_iceberg_table(self.location, self.identifier)
        scan = table.scan(row_filter=EqualTo(BATCH_COL, batch_id), selected_fields=tuple(columns))
        return scan.to_arrow()

    def read_outputs(self) -> list[SinkRecord]:
        """Every row as a sink record, for the oracle.

        Returns:
            The records, copies kept (judge them with ``dedup=False``).
        """
        from recovery_lib.io.sinks.table_reader import read_table_outputs

        return read_table_outputs(self.kind, self.location, identifier=self.identifier)
