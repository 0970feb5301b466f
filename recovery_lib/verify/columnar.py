"""The oracle's engine for millions of outputs: each side's records as Arrow batches, judged in
DuckDB, with Python reading only the few outputs the verdict hangs on.

Where each side lives (``SpilledSide``):
  * the raw records in an Arrow IPC file on disk (memory-mapped when rows must be read back);
  * per record, in a file-backed DuckDB table: its position (``seq``), id, a hash of its key and
    value (``h``), a hash of its agreement unit (``u``: the whole output for ``Exact``, the key
    and agreed fields for ``Fields``, the Kafka key and key fields for ``KeyTotals``), the
    total (``KeyTotals``) and ``flag``: the SQL could not show the output well-formed.

The definitions stay the plain-Python ones of contract.py and oracle.py (``judge_objects``):
SQL only finds what agrees for certain (equal hashes, equal totals), and every unit that does
not agree, every flagged output and every id whose copies differ in bytes is decided by the
Python definition on the decoded outputs. So JSON values are compared as values (key order,
number spelling) exactly as ``judge_objects`` does. A 64-bit hash could match two different
outputs: at 10^7 outputs per side the chance of any such collision is below 10^-5.

Steps of ``judge_sides`` (each a method below):
  1. the consumer's view: the first copy of each id (dedup) or every record;
  2. ids whose copies differ (SQL candidates, decided as values);
  3. malformed outputs (SQL flags, decided by the agreement);
  4. invariants, on the decoded consumer view (Python; only contracts that have invariants;
     UniqueOutputs with fields on the outputs that share its hash, ``unique_sql``);
  5. the reference run checked as a run (2-4 on it);
  6. the agreement: per unit counts (or per key totals) compared in SQL, the rest in Python.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import logging
import queue
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from recovery_lib.io.sinks.dedup_reader import SINK_BATCH_SCHEMA, SinkRecord
from recovery_lib.verify.contract import (
    Agreement,
    ConsistencyContract,
    Exact,
    Fields,
    InvariantResult,
    KeyTotals,
    Output,
    TimeSpan,
    UniqueOutputs,
    Windows,
    divergent_ids,
)
from recovery_lib.verify.inputs import InputView
from recovery_lib.verify.schema import OutputSchema

log = logging.getLogger(__name__)

DUCKDB_MEMORY = "1GB"  # DuckDB spills to its file beyond this: peak RSS stays bounded
QUEUE_BATCHES = 4  # batches read ahead of the DuckDB ingest (each ~100k records)


def _path(name: str) -> str:
    """A JSON path for a field name (quoted: names may hold dots)."""
    return "$." + json.dumps(name)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(map(_quote, values)) + "]"


@dataclass(frozen=True)
class UnitSQL:
    """What the SQL computes of an agreement for each record (``v``: the value as text, NULL
    when it is not UTF-8 or not JSON; ``x``: the JSON values at the paths of ``extract``,
    taken in one parse of the value (a missing field: NULL; x NULL when v is))."""

    unit: str  # the unit's hash (u)
    total: str  # the total (KeyTotals) or NULL
    flag: str  # true: the SQL cannot show the output well-formed; Python decides
    ignored: str  # true: not data (KeyTotals.ignore)
    per_key: str | None  # "sum" | "max": units are totals per key (KeyTotals)
    # Per UniqueOutputs invariant with fields: a hash under which outputs the invariant calls
    # equal always collide (uniques_sql); columns uq0, uq1 ...
    uniques: tuple[str, ...] = ()
    extract: tuple[str, ...] = ()  # JSON paths: x[1], x[2] ... (one parse per record)
    # With an output schema (SchemaSQL): ``typed`` the value read as the schema's types (one
    # parse), ``suspect`` true where the SQL cannot show the value fits (Python decides).
    typed: str = "NULL"
    suspect: str = "false"
    # With placed windows (window_sql): the window's start and end in ms, NULL where the value
    # does not hold an integer there (Python decides).
    window_start: str = "NULL"
    window_end: str = "NULL"
    window_paths: tuple[str, ...] = ()  # JSON paths: w[1] (start), w[2] (end)


def unique_sql(fields: tuple[str, ...]) -> str:
    """A hash of the Kafka key and ``fields`` that is equal for any two outputs
    ``UniqueOutputs(fields)`` finds equal (it may be equal for others too: Python decides
    among the outputs that share one). Each field coarsened so that equal JSON values give one
    text: strings unescaped, numbers as doubles, objects and arrays by their type only, a
    missing field as null. (A value that is not a JSON object is malformed for a contract
    with fields, so the run is judged inconsistent whatever its duplicates.)"""
    parts = []
    for name in fields:
        j = f"json_extract(v, '{_path(name)}')"
        parts.append(
            f"coalesce(CASE json_type({j}) WHEN 'OBJECT' THEN 'O' WHEN 'ARRAY' THEN 'A' "
            f"WHEN 'VARCHAR' THEN 's' || ({j} ->> '$') WHEN 'NULL' THEN 'n' "
            f"WHEN 'BOOLEAN' THEN {j}::VARCHAR "
            f"ELSE 'd' || TRY_CAST({j} AS DOUBLE)::VARCHAR END, 'n')"
        )
    return f"hash(key, concat_ws(chr(31), {', '.join(parts)}))"


def unit_sql(
    agreement: Agreement | None,
    uniques: tuple[str, ...] = (),
    schema: OutputSchema | None = None,
    windows: Windows | None = None,
) -> UnitSQL:
    fits = SchemaSQL(schema) if schema is not None else None
    typed = fits.unit_sql(agreement) if fits is not None else None
    sql = dataclasses.replace(typed or _unit_sql(agreement), uniques=uniques)
    if fits is not None:
        sql = dataclasses.replace(sql, typed=fits.typed(), suspect=fits.suspect())
    if windows is not None:
        if fits is not None and fits.integral(windows.start, windows.end):
            # The typed value holds them (a value whose text differs is Python's anyway).
            start = f"t[{_quote(windows.start)}]"
            end = f"t[{_quote(windows.end)}]" if windows.end is not None else "NULL"
            if windows.end is None and windows.size_ms is not None:
                end = f"({start}) + {int(windows.size_ms)}"
            return dataclasses.replace(sql, window_start=start, window_end=end)
        start, end = window_sql(windows)
        sql = dataclasses.replace(
            sql, window_start=start, window_end=end, window_paths=window_paths(windows)
        )
    return sql


def window_sql(windows: Windows) -> tuple[str, str]:
    """SQL of an output's window start and end (ms), from ``w``: its window fields taken in
    one parse. NULL where a field is not an integer."""

    def integer(j: str) -> str:
        return f"CASE WHEN json_type({j}) IN ('UBIGINT', 'BIGINT') THEN TRY_CAST({j} AS BIGINT) END"

    start = integer("w[1]")
    if windows.end is not None:
        return start, integer("w[2]")
    if windows.size_ms is not None:
        return start, f"({start}) + {int(windows.size_ms)}"
    return start, "NULL"


def window_paths(windows: Windows) -> tuple[str, ...]:
    return (_path(windows.start), *([_path(windows.end)] if windows.end is not None else []))


# Spark types whose JSON DuckDB reads and writes back as Spark's to_json wrote it; the others
# are kept as raw JSON and checked on their own (``SchemaSQL.suspect``).
_ROUND_TRIP = {
    "long": "BIGINT",
    "integer": "INTEGER",
    "short": "SMALLINT",
    "byte": "TINYINT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "string": "VARCHAR",
}
_TEXT_CAST = {"timestamp": "TIMESTAMPTZ", "timestamp_ntz": "TIMESTAMP", "date": "DATE"}


class SchemaSQL:
    """The output schema in SQL, at one JSON parse per record: the value read as the schema's
    types (``json_transform``) and written back (``to_json``) gives the same text only when
    every field is there, no other is, and each holds its type's JSON (a long as an integer
    in range, not 1.5 or "banana"). That is a superset check: whatever fails it (or holds a
    null, whose place the schema decides) is decided by ``OutputSchema.problem`` in Python;
    a value written with other spacing or field order only takes that slower path."""

    def __init__(self, schema: OutputSchema):
        self.schema = schema
        self.raw: list[tuple[str, Any]] = []  # top-level fields kept as JSON: (name, type)
        self.nested_raw = False  # a nested field that only Python can check
        self.structure = {
            f["name"]: self._duck(f["type"], top=f["name"]) for f in schema.struct["fields"]
        }

    def _duck(self, kind: Any, top: str | None) -> Any:
        if isinstance(kind, str) and kind in _ROUND_TRIP:
            return _ROUND_TRIP[kind]
        if isinstance(kind, dict) and kind["type"] == "array":
            return [self._duck(kind["elementType"], None)]
        if isinstance(kind, dict) and kind["type"] == "struct":
            return {f["name"]: self._duck(f["type"], None) for f in kind["fields"]}
        if top is not None:
            self.raw.append((top, kind))
        else:
            self.nested_raw = True
        return "JSON"

    def integral(self, *names: str | None) -> bool:
        """Every named field is a top-level integer the typed value holds."""
        return all(
            self.structure.get(n) in ("BIGINT", "INTEGER", "SMALLINT", "TINYINT")
            for n in names
            if n is not None
        )

    def unit_sql(self, agreement: Agreement | None) -> UnitSQL | None:
        """The agreement's units from the typed value, with no parse of their own (None: a
        field it reads is not a top-level field whose type reads back exactly). Typed values
        are equal exactly when their JSON is for a value whose text they give back; any other
        value is suspect, and Python decides its units (``flag``)."""
        if not isinstance(agreement, Fields | KeyTotals):
            return None
        names = agreement.names if isinstance(agreement, Fields) else (*agreement.keys,)
        total = agreement.total if isinstance(agreement, KeyTotals) else None
        exact = ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "BOOLEAN", "VARCHAR")
        if not names or any(self.structure.get(n) not in exact for n in names):
            return None  # a double's text may not read back: the JSON path decides
        suspect = self.suspect()
        values = ", ".join(f"t[{_quote(n)}]" for n in names)
        if total is None:
            return UnitSQL(f"hash(key, {values})", "NULL", suspect, "false", None)
        assert isinstance(agreement, KeyTotals)
        kind = self.structure.get(total)
        if kind not in ("BIGINT", "INTEGER", "SMALLINT", "TINYINT") and (
            agreement.integer or kind != "DOUBLE"
        ):
            return None
        amount = f"t[{_quote(total)}]"
        checks = [suspect, f"NOT isfinite({amount}::DOUBLE)"]
        if agreement.nonnegative:
            checks.append(f"{amount} < 0")
        ignore = [json.dumps(x) for x in agreement.ignore]
        ignored = (
            f"coalesce(to_json(t[{_quote(names[0])}])::VARCHAR IN "
            f"({', '.join(map(_quote, ignore))}), false)"
            if ignore
            else "false"
        )
        return UnitSQL(
            f"hash(key, {values})",
            f"{amount}::DOUBLE",
            " OR ".join(f"coalesce({c}, true)" for c in checks),
            ignored,
            agreement.how,
        )

    def typed(self) -> str:
        return f"try(json_transform(d, {_quote(json.dumps(self.structure))}))"

    def suspect(self) -> str:
        checks = ["NOT coalesce(to_json(t)::VARCHAR = d, false)", "contains(d, 'null')"]
        if self.nested_raw:
            return "true"
        for name, kind in self.raw:
            field = f"t[{_quote(name)}]"
            if kind in _TEXT_CAST:
                checks.append(f"TRY_CAST({field} ->> '$' AS {_TEXT_CAST[kind]}) IS NULL")
            elif kind == "binary":
                checks.append(f"try(from_base64({field} ->> '$')) IS NULL")
            elif kind == "float" or (isinstance(kind, str) and kind.startswith("decimal")):
                checks.append(
                    f"json_type({field}) NOT IN ('UBIGINT', 'BIGINT', 'DOUBLE') "
                    f"OR NOT isfinite(TRY_CAST({field} AS DOUBLE))"
                )
            elif kind in ("char", "varchar") or str(kind).startswith(("char(", "varchar(")):
                checks.append(f"json_type({field}) <> 'VARCHAR'")
            else:
                return "true"  # maps, intervals, variants: Python decides each value
        return " OR ".join(f"coalesce({c}, true)" for c in checks)


OBJECT = "json_type(v) = 'OBJECT'"


def _unit_sql(agreement: Agreement | None) -> UnitSQL:
    # Each field is taken once, by one multi-path json_extract per record (``x``): parsing a
    # value once per field made ingesting 10^7 outputs twice as slow as reading them.
    if agreement is None or isinstance(agreement, Exact):
        return UnitSQL("hash(key, value)", "NULL", "false", "false", None)
    if isinstance(agreement, Fields):
        n = len(agreement.names)
        # a field present in a value shows it is an object; without fields, ask
        present = " AND ".join(f"x[{i}] IS NOT NULL" for i in range(1, n + 1))
        return UnitSQL(
            "hash(key, x::VARCHAR)" if n else "hash(key)",
            "NULL",
            f"NOT coalesce({present or OBJECT}, false)",
            "false",
            None,
            extract=tuple(_path(name) for name in agreement.names),
        )
    if isinstance(agreement, KeyTotals):
        k = len(agreement.keys)
        total = f"x[{k + 1}]"
        kinds = "('UBIGINT', 'BIGINT')" if agreement.integer else "('UBIGINT', 'BIGINT', 'DOUBLE')"
        present = " AND ".join(f"x[{i}] IS NOT NULL" for i in range(1, k + 1)) or OBJECT
        nonneg = f"AND TRY_CAST({total} AS DOUBLE) >= 0" if agreement.nonnegative else ""
        ok = (
            f"{present} AND json_type({total}) IN {kinds} "
            f"AND isfinite(TRY_CAST({total} AS DOUBLE)) {nonneg}"
        )
        ignore = [json.dumps(x) for x in agreement.ignore]
        ignored = (
            f"coalesce(x[1]::VARCHAR IN ({', '.join(map(_quote, ignore))}), false)"
            if ignore
            else "false"
        )
        return UnitSQL(
            f"hash(key, list_slice(x, 1, {k})::VARCHAR)",
            f"TRY_CAST({total} AS DOUBLE)",
            f"NOT coalesce({ok}, false)",
            ignored,
            agreement.how,
            extract=(*(_path(key) for key in agreement.keys), _path(agreement.total)),
        )
    raise TypeError(f"no SQL for agreement {type(agreement).__name__}: judge_objects judges it")


class SpilledSide:
    """One side's records (see the module docstring). ``add`` batches of
    ``SINK_BATCH_SCHEMA``, then ``finish``; rows are read back by position (``seq``)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        name: str,
        directory: Path,
        sql: UnitSQL,
        spill: bool,
    ):
        """``spill``: the raw records go to an IPC file in ``directory`` (sides read from
        topics, of unknown size); else they stay in memory (they were in memory already)."""
        self.con, self.name, self.sql = con, name, sql
        self.path = directory / f"{name}.arrow"
        self._writer: pa.ipc.RecordBatchFileWriter | None = (
            pa.ipc.new_file(str(self.path), SINK_BATCH_SCHEMA) if spill else None
        )
        self._kept: list[pa.RecordBatch] | None = None if spill else []
        self.rows = 0
        self._starts: list[int] = []  # first seq of each batch
        self._reader: pa.ipc.RecordBatchFileReader | None = None
        uniques = "".join(f", uq{i} UBIGINT" for i in range(len(sql.uniques)))
        con.execute(
            f"CREATE TABLE {name} (seq BIGINT, id BLOB, h UBIGINT, u UBIGINT, "
            f"total DOUBLE, flag BOOLEAN, ignored BOOLEAN, suspect BOOLEAN, "
            f"w0 BIGINT, w1 BIGINT{uniques})"
        )

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self._kept is not None:
            self._kept.append(batch)
        else:
            assert self._writer is not None, "add after finish"
            self._writer.write_batch(batch)
        self._starts.append(self.rows)
        seq = pa.array(range(self.rows, self.rows + batch.num_rows), pa.int64())
        chunk = pa.RecordBatch.from_arrays([seq, *batch.columns], ["seq", *batch.schema.names])
        self.rows += batch.num_rows
        sql = self.sql
        rows = "SELECT *, try(decode(value)) AS d FROM chunk"
        if sql.extract:
            rows = f"SELECT *, try(json_extract(d, {_sql_list(sql.extract)})) AS x FROM ({rows})"
        valid = "json_valid(d)"
        if sql.typed != "NULL":
            rows = f"SELECT *, {sql.typed} AS t FROM ({rows})"
            # A value the schema's types read is JSON: only the others are parsed again.
            valid = "t IS NOT NULL OR json_valid(d)"

        if sql.window_paths:
            paths = _sql_list(sql.window_paths)
            rows = f"SELECT *, try(json_extract(d, {paths})) AS w FROM ({rows})"
        self.con.register("chunk", chunk)
        try:
            self.con.execute(
                f"INSERT INTO {self.name} SELECT seq, id, hash(key, value), {sql.unit}, "
                f"{sql.total}, {sql.flag}, {sql.ignored}, {sql.suspect}, "
                f"{sql.window_start}, {sql.window_end}"
                f"{''.join(', ' + u for u in sql.uniques)} "
                f"FROM (SELECT *, CASE WHEN {valid} THEN d END AS v FROM ({rows}))"
            )
        finally:
            self.con.unregister("chunk")

    def finish(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _batches(self) -> int:
        if self._kept is not None:
            return len(self._kept)
        self.finish()
        if self._reader is None:
            if not self._starts:
                return 0
            self._reader = pa.ipc.open_file(pa.memory_map(str(self.path)))
        return self._reader.num_record_batches

    def _batch(self, b: int) -> pa.RecordBatch:
        if self._kept is not None:
            return self._kept[b]
        assert self._reader is not None
        return self._reader.get_batch(b)

    def records(self, seqs: Iterable[int]) -> dict[int, SinkRecord]:
        """The records at these positions (read batch by batch)."""
        wanted: dict[int, list[int]] = {}
        self._batches()
        for seq in sorted(set(seqs)):
            wanted.setdefault(bisect.bisect_right(self._starts, seq) - 1, []).append(seq)
        out = {}
        for b, batch_seqs in wanted.items():
            start = self._starts[b]
            rows = self._batch(b).take(pa.array([s - start for s in batch_seqs])).to_pylist()
            for seq, row in zip(batch_seqs, rows, strict=True):
                out[seq] = SinkRecord(
                    _text(row["id"]),
                    None,
                    row["key"],
                    row["value"],
                    "",
                    row["partition"] or 0,
                    row["offset"] or 0,
                    (),
                )
        return out

    def outputs(self, seqs: Iterable[int]) -> dict[int, Output]:
        return {s: Output.decode(r.id, r.key, r.value) for s, r in self.records(seqs).items()}

    def iter_outputs(
        self, keep: Callable[[int], bool] | None = None
    ) -> Iterator[tuple[int, Output]]:
        """Every output in read order (those ``keep`` accepts), decoded batch by batch."""
        for b in range(self._batches()):
            batch = self._batch(b)
            start = self._starts[b]
            ids = batch.column("id").to_pylist()
            keys = batch.column("key").to_pylist()
            values = batch.column("value").to_pylist()
            for i in range(batch.num_rows):
                if keep is None or keep(start + i):
                    yield start + i, Output.decode(_text(ids[i]), keys[i], values[i])


def _text(rid: bytes | None) -> str | None:
    return rid.decode(errors="replace") if rid is not None else None


class OutputsView(Sequence[Output]):
    """The consumer's view of a side as the invariants read it: decoded on first use."""

    def __init__(self, side: SpilledSide, seen: set[int] | None):
        self.side, self.seen = side, seen
        self._items: list[Output] | None = None

    def _load(self) -> list[Output]:
        if self._items is None:
            keep = None if self.seen is None else self.seen.__contains__
            self._items = [o for _, o in self.side.iter_outputs(keep)]
        return self._items

    def __len__(self) -> int:
        return len(self._load())

    def __getitem__(self, i):  # type: ignore[no-untyped-def, override]
        return self._load()[i]

    def __iter__(self) -> Iterator[Output]:
        return iter(self._load())


@dataclass
class SideFacts:
    """What steps 1-4 found on one side."""

    seen_table: str  # the consumer view (a table or view name)
    outputs: int
    records: int
    copies: int  # surplus same-id copies
    divergent: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    invariants: list[InvariantResult] = field(default_factory=list)


class ColumnarJudge:
    """Judges two spilled sides; see the module docstring for the steps."""

    def __init__(self, contract: ConsistencyContract, directory: Path, on_disk: bool):
        """``on_disk``: DuckDB's tables in a file of ``directory`` and the raw records in IPC
        files (sides of unknown size, read from topics); else in memory, DuckDB spilling to
        ``directory`` beyond its limit."""
        self.on_disk = on_disk
        self.contract = contract
        self.directory = directory
        self.con = duckdb.connect(str(directory / "oracle.duckdb") if on_disk else ":memory:")
        self.con.execute(
            f"SET memory_limit = '{DUCKDB_MEMORY}'; SET preserve_insertion_order = false; "
            f"SET temp_directory = '{directory / 'spill'}'"
        )
        # UniqueOutputs with fields are found in SQL (a Counter of 10^7 decoded outputs is not
        # what a judge of 10^7 outputs can afford); the other invariants read decoded outputs.
        self.uniques = [
            inv for inv in contract.invariants if isinstance(inv, UniqueOutputs) and inv.fields
        ]
        self.sql = unit_sql(
            contract.view,
            tuple(unique_sql(inv.fields) for inv in self.uniques),
            contract.output_schema,
            contract.windows,
        )

    def side(self, name: str) -> SpilledSide:
        return SpilledSide(self.con, name, self.directory, self.sql, spill=self.on_disk)

    # -- steps 1-4 --------------------------------------------------------------------------

    def facts(
        self,
        side: SpilledSide,
        dedup: bool,
        inputs: InputView | None,
        max_examples: int,
        span: TimeSpan | None = None,
    ) -> SideFacts:
        """Steps 1-4 on ``side``; ``span``: the times its windows can hold
        (``ConsistencyContract.window_span``), None: windows not placed."""
        side.finish()
        t = side.name
        records, distinct, with_id = self.con.execute(
            f"SELECT count(*), count(DISTINCT id), count(id) FROM {t}"
        ).fetchone()
        copies = with_id - distinct
        # Step 1: the consumer view.
        seen = t
        if dedup and copies:
            seen = f"{t}_seen"
            self.con.execute(
                f"CREATE TABLE {seen} AS SELECT * FROM {t} WHERE id IS NULL OR seq IN "
                f"(SELECT min(seq) FROM {t} WHERE id IS NOT NULL GROUP BY id)"
            )
        outputs = self.con.execute(f"SELECT count(*) FROM {seen}").fetchone()[0]
        facts = SideFacts(seen, outputs, records, copies)
        # Step 2: ids whose copies differ in bytes, decided as values.
        if copies:
            rows = self.con.execute(
                f"SELECT id, list(seq) FROM {t} WHERE id IN (SELECT id FROM {t} WHERE id IS "
                f"NOT NULL GROUP BY id HAVING count(DISTINCT h) > 1) GROUP BY id"
            ).fetchall()
            records_by_seq = side.records(s for _, seqs in rows for s in seqs)
            facts.divergent, _ = divergent_ids(list(records_by_seq.values()))
        # Step 3: outputs the SQL could not show well-formed, decided by the contract (the
        # agreement and the output schema).
        where = "flag"
        if self.contract.output_schema is not None:
            where += " OR suspect"
        placed = self.contract.windows is not None and span is not None
        if placed:
            assert span is not None
            where += f" OR w0 IS NULL OR w0 > {span.last_ms} OR w1 <= {span.first_ms} OR w1 <= w0"
        if self.contract.view is not None or self.contract.output_schema is not None or placed:
            flagged = [
                s for (s,) in self.con.execute(f"SELECT seq FROM {seen} WHERE {where}").fetchall()
            ]
            for _seq, o in sorted(side.outputs(flagged).items()):
                why = self.contract.malformed(o, span)
                if why is not None:
                    facts.malformed.append(f"{o.id}: {why}")
        # Step 4: invariants, on the decoded consumer view (UniqueOutputs on the outputs that
        # share a hash in SQL, in read order: the same result as on every output).
        if self.contract.invariants:
            keep = None
            view: OutputsView | None = None
            for inv in self.contract.invariants:
                if inv in self.uniques:
                    column = f"uq{self.uniques.index(inv)}"
                    seqs = [
                        s
                        for (s,) in self.con.execute(
                            f"SELECT seq FROM {seen} WHERE {column} IN (SELECT {column} FROM "
                            f"{seen} GROUP BY {column} HAVING count(*) > 1) ORDER BY seq"
                        ).fetchall()
                    ]
                    found = side.outputs(seqs)
                    outputs: Sequence[Output] = [found[s] for s in seqs]
                else:
                    if view is None:
                        if seen != t:
                            keep = {
                                s for (s,) in self.con.execute(f"SELECT seq FROM {seen}").fetchall()
                            }
                        view = OutputsView(side, keep)
                    outputs = view
                result = inv.check(outputs, inputs)
                result.agreement_covers = inv.agreement_covers
                facts.invariants.append(result)
        return facts

    # -- step 6: the agreement ----------------------------------------------------------------

    def compare(
        self,
        run: SpilledSide,
        run_seen: str,
        reference: SpilledSide,
        reference_seen: str,
        excluded: tuple[set[int], set[int]] | None,
    ) -> tuple[Counter[Hashable], Counter[Hashable]]:
        """(units of the run, units of the reference) among what the SQL could not match:
        the rest agrees. ``excluded``: positions left out of the comparison on each side."""
        view = self.contract.view
        assert view is not None
        run_rows, ref_rows = run_seen, reference_seen
        if excluded is not None:
            run_rows = self._without(run_seen, excluded[0], "run_cmp")
            ref_rows = self._without(reference_seen, excluded[1], "ref_cmp")
        if self.sql.per_key is None:
            agg = "count(*)"
        else:
            agg = "sum(total)" if self.sql.per_key == "sum" else "max(total)"
        where = "NOT flag AND NOT ignored"
        self.con.execute(
            f"CREATE TEMP TABLE unmatched AS SELECT coalesce(r.u, f.u) AS u FROM "
            f"(SELECT u, {agg} AS n FROM {run_rows} WHERE {where} GROUP BY u) r FULL OUTER JOIN "
            f"(SELECT u, {agg} AS n FROM {ref_rows} WHERE {where} GROUP BY u) f ON r.u = f.u "
            "WHERE r.n IS DISTINCT FROM f.n "
            # A flagged output's unit is Python's to read: its group goes to Python whole, on
            # both sides, or a total would be compared without the group's other outputs.
            f"UNION SELECT u FROM {run_rows} WHERE flag AND NOT ignored "
            f"UNION SELECT u FROM {ref_rows} WHERE flag AND NOT ignored"
        )
        pick = "SELECT seq FROM {t} WHERE NOT ignored AND (flag OR u IN (SELECT u FROM unmatched))"
        run_seqs = [s for (s,) in self.con.execute(pick.format(t=run_rows)).fetchall()]
        ref_seqs = [s for (s,) in self.con.execute(pick.format(t=ref_rows)).fetchall()]
        self.con.execute("DROP TABLE unmatched")
        got = view.units(run.outputs(run_seqs).values())
        want = view.units(reference.outputs(ref_seqs).values())
        return got, want

    def _without(self, table: str, excluded: set[int], name: str) -> str:
        self.con.register(
            "excluded_arrow", pa.table({"seq": pa.array(sorted(excluded), pa.int64())})
        )
        self.con.execute(
            f"CREATE TEMP TABLE {name} AS SELECT * FROM {table} "
            "WHERE seq NOT IN (SELECT seq FROM excluded_arrow)"
        )
        self.con.unregister("excluded_arrow")
        return name

    def close(self) -> None:
        self.con.close()


def ingest(side: SpilledSide, batches: Iterable[pa.RecordBatch], threaded: bool) -> None:
    """Read ``batches`` into ``side``. ``threaded``: DuckDB ingests in a second thread while
    the next batch is read (both release the GIL in their native parts)."""
    if not threaded:
        for batch in batches:
            side.add(batch)
        side.finish()
        return
    pending: queue.Queue[pa.RecordBatch | None] = queue.Queue(maxsize=QUEUE_BATCHES)
    failed: list[BaseException] = []

    def worker() -> None:
        while True:
            batch = pending.get()
            if batch is None:
                return
            if failed:
                continue
            try:
                side.add(batch)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the reading thread
                failed.append(exc)

    thread = threading.Thread(target=worker, name=f"oracle-ingest-{side.name}", daemon=True)
    thread.start()
    try:
        for batch in batches:
            if failed:
                break
            pending.put(batch)
    finally:
        pending.put(None)
        thread.join()
    if failed:
        raise failed[0]
    side.finish()


def record_batches(records: Iterable[SinkRecord], rows: int = 100_000) -> Iterator[pa.RecordBatch]:
    """SinkRecords (e.g. read with ``read_topic``) as ``SINK_BATCH_SCHEMA`` batches."""
    chunk: list[SinkRecord] = []

    def batch() -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [
                pa.array([r.id.encode() if r.id is not None else None for r in chunk], pa.binary()),
                pa.array([r.key for r in chunk], pa.binary()),
                pa.array([r.value for r in chunk], pa.binary()),
                pa.array([r.partition for r in chunk], pa.int32()),
                pa.array([r.offset for r in chunk], pa.int64()),
            ],
            schema=SINK_BATCH_SCHEMA,
        )

    for record in records:
        chunk.append(record)
        if len(chunk) >= rows:
            yield batch()
            chunk = []
    if chunk:
        yield batch()


def workspace() -> tempfile.TemporaryDirectory[str]:
    """A directory for one judgement's spilled sides (removed afterwards)."""
    return tempfile.TemporaryDirectory(prefix="recovery-oracle-")
