"""A lakehouse table's rows as the sink records the oracle judges: a table run is judged like a
topic (``verify.oracle.judge(..., read_table_outputs(...), ..., dedup=False)``).

Each row of the table's current version becomes one ``SinkRecord``, every copy kept (a batch
written twice shows up twice, so the oracle counts the duplicates):

===========  ===============================================================================
field        from
===========  ===============================================================================
id           the lineage, as the Kafka sink forms it: ``output_id(_batch_id, _partition,
             _seq, id_prefix)`` (io/sinks/ids.py), so a re-written row keeps its id
key, value   the ``key`` and ``value`` columns of a job's output (job/frames.py); a table
             without ``value``: its other columns as a JSON object (sorted keys)
topic        the table (Delta: its location; Iceberg: ``catalog:namespace.table``)
partition    ``_partition``; ``offset``: the row's index within it, in lineage order
epoch        ``rl.epoch`` of the commit that wrote the row's batch (its ``CommitMark``);
             None when no or several marks name the batch, or a vacuum removed it
timestamp_ms that commit's time: when the row became visible
headers      ``rl.id``, ``rl.epoch`` and ``rl.ingest_ms`` (the ``ingest_ms`` column), as on a
             Kafka output
===========  ===============================================================================

A consumer of a table sees every row: judge with ``dedup=False``.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping

import pyarrow as pa
from deltalake import DeltaTable

from recovery_lib.io.exceptions import IOLayerError
from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.io.sinks.delta_sink import delta_commits
from recovery_lib.io.sinks.iceberg_sink import (
    DEFAULT_CATALOG_NAME,
    DEFAULT_IDENTIFIER,
    iceberg_commits,
    load_iceberg_table,
)
from recovery_lib.io.sinks.ids import EPOCH_HEADER, ID_HEADER, output_id
from recovery_lib.io.sinks.lakehouse import TableCommit, TableKind, table_kind
from recovery_lib.io.sinks.table_sink import BATCH_COL, PARTITION_COL, SEQ_COL
from recovery_lib.kafka.headers import INGEST_HEADER

KEY_COL, VALUE_COL, INGEST_COL = "key", "value", "ingest_ms"
LINEAGE = (BATCH_COL, PARTITION_COL, SEQ_COL)


class TableNotLineaged(IOLayerError, ValueError):
    """The table lacks a lineage column: its rows have no ids (not written by a table sink)."""


def read_table_outputs(
    kind: TableKind | str,
    location: str | os.PathLike[str],
    *,
    identifier: str = DEFAULT_IDENTIFIER,
    catalog: Mapping[str, str] | None = None,
    catalog_name: str = DEFAULT_CATALOG_NAME,
    storage_options: Mapping[str, str] | None = None,
    id_prefix: str = "",
) -> list[SinkRecord]:
    """Every row of a table's current version as a ``SinkRecord`` (module docstring), in
    lineage order (batch, partition, seq; copies side by side).

    ``location``: Delta, the table's path or URI (``storage_options`` for object stores);
    Iceberg, the root an ``IcebergTableSink`` was given (with ``identifier``, ``catalog`` and
    ``catalog_name`` as given to it). ``id_prefix``: as the Kafka sink's ``sinkId``."""
    rows, commits, topic = _read(
        table_kind(kind),
        location,
        identifier,
        catalog,
        catalog_name,
        storage_options,
    )
    return table_records(rows, commits, topic, id_prefix)


def _read(
    kind: TableKind,
    location: str | os.PathLike[str],
    identifier: str,
    catalog: Mapping[str, str] | None,
    catalog_name: str,
    storage_options: Mapping[str, str] | None,
) -> tuple[pa.Table, list[TableCommit], str]:
    """The rows and the commits of one version of the table, and its name as a topic."""
    if kind is TableKind.DELTA:
        options = dict(storage_options) if storage_options is not None else None
        delta = DeltaTable(str(location), storage_options=options)
        return delta.to_pyarrow_table(), delta_commits(delta), str(location)
    iceberg = load_iceberg_table(location, identifier, catalog, catalog_name)
    snapshot = iceberg.current_snapshot()  # None: created, never appended to
    rows = iceberg.scan(snapshot_id=snapshot.snapshot_id if snapshot else None).to_arrow()
    return rows, iceberg_commits(iceberg, snapshot), f"{catalog_name}:{identifier}"


def table_records(
    rows: pa.Table, commits: Iterable[TableCommit], topic: str, id_prefix: str = ""
) -> list[SinkRecord]:
    """``rows`` (with lineage columns) as sink records; ``commits``: the table's commits, whose
    marks give each batch's epoch and visibility time."""
    missing = [c for c in LINEAGE if c not in rows.column_names]
    if missing:
        raise TableNotLineaged(
            f"{topic}: no column {', '.join(missing)}; only tables written by a table sink "
            "(with_lineage) can be judged"
        )
    marks = _batch_marks(commits)
    rows = rows.sort_by([(c, "ascending") for c in LINEAGE])  # stable: copies keep their order
    names = rows.column_names
    others = [c for c in names if c not in (*LINEAGE, KEY_COL, VALUE_COL, INGEST_COL)]
    next_offset: dict[int, int] = defaultdict(int)
    records = []
    for row in rows.to_pylist():
        batch, partition, seq = (int(row[c]) for c in LINEAGE)
        rid = output_id(batch, partition, seq, id_prefix)
        epoch, visible_ms = marks.get(batch, (None, 0))
        headers = [(ID_HEADER, rid.encode())]
        if epoch is not None:
            headers.append((EPOCH_HEADER, str(epoch).encode()))
        if row.get(INGEST_COL) is not None:
            headers.append((INGEST_HEADER, str(row[INGEST_COL]).encode()))
        value = row[VALUE_COL] if VALUE_COL in names else _as_json({c: row[c] for c in others})
        records.append(
            SinkRecord(
                id=rid,
                epoch=epoch,
                key=_as_bytes(row.get(KEY_COL)),
                value=_as_bytes(value),
                topic=topic,
                partition=partition,
                offset=next_offset[partition],
                headers=tuple(headers),
                timestamp_ms=visible_ms,
            )
        )
        next_offset[partition] += 1
    return records


def _batch_marks(commits: Iterable[TableCommit]) -> dict[int, tuple[int | None, int]]:
    """Per batch id, the epoch and time of the one commit whose mark names it; a batch named
    by several marks (apps sharing the table) gets no epoch: which wrote a row is unknown."""
    named: dict[int, list[TableCommit]] = defaultdict(list)
    for commit in commits:
        if commit.mark is not None:
            named[commit.mark.batch_id].append(commit)
    out: dict[int, tuple[int | None, int]] = {}
    for batch, found in named.items():
        if len(found) == 1 and found[0].mark is not None:
            out[batch] = (found[0].mark.epoch, found[0].timestamp_ms)
    return out


def _as_json(fields: Mapping[str, object]) -> str:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)


def _as_bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return str(value).encode()
