"""Reference results: each query's expected output over the same input, as DuckDB SQL.

The input is regenerated from the generator config (events are a pure function of seed and
event id) into DuckDB tables persons, auctions, bids. Windowed queries run in append mode
and emit a window once the watermark passes its end, so their reference keeps the windows
with ``end <= watermark``, where watermark = max event time seen - delay (the minimum over
the query's inputs, Spark's default policy). Q12 is processing-time: ``check_q12`` verifies
its invariants instead.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.json as pj

from recovery_lib.errors import OracleError
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.generator import AUCTION, BID, PERSON, NexmarkGenerator
from recovery_lib.nexmark.queries import Q2_AUCTION_SKIP, Q3_CATEGORY, Q3_STATES
from recovery_lib.nexmark.streams import KINDS

BLOCK = 100_000


def load_events(
    config: GeneratorConfig,
    count: int,
    first_event_id: int = 0,
    con: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyConnection:
    """Tables persons, auctions, bids parsed from the very bytes the generator produces."""
    con = con or duckdb.connect()
    generator = NexmarkGenerator(config)
    lines: dict[int, list[bytes]] = {PERSON: [], AUCTION: [], BID: []}
    for start in range(first_event_id, first_event_id + count, BLOCK):
        block = generator.block(start, min(BLOCK, first_event_id + count - start))
        for _eid, kind, _key, value, _part in generator.encode(block):
            lines[kind].append(value)
    for kind, name in ((PERSON, "persons"), (AUCTION, "auctions"), (BID, "bids")):
        con.register("generated", _json_table(lines[kind], name))
        con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM generated")
        con.unregister("generated")
    return con


def _json_table(values: list[bytes], kind: str) -> pa.Table:
    schema = pa.schema(
        [
            (name, pa.int64() if typ == "long" else pa.string())
            for name, typ in (part.strip().split(" ") for part in KINDS[kind][0].split(","))
        ]
    )
    if not values:
        return schema.empty_table()
    return pj.read_json(
        io.BytesIO(b"\n".join(values)), parse_options=pj.ParseOptions(explicit_schema=schema)
    )


def watermark(con: duckdb.DuckDBPyConnection, inputs: Iterable[str], delay_ms: int) -> int:
    return (
        min(con.execute(f"SELECT max(dateTime) FROM {name}").fetchone()[0] for name in inputs)
        - delay_ms
    )


@dataclass
class ReferenceParams:
    window_s: int = 10
    slide_s: int = 2
    watermark_delay_ms: int = 5_000


def reference_rows(
    con: duckdb.DuckDBPyConnection, query: str, params: ReferenceParams | None = None
) -> list[dict[str, Any]]:
    p = params or ReferenceParams()
    size, slide = p.window_s * 1000, p.slide_s * 1000
    states = ", ".join(f"'{s}'" for s in Q3_STATES)
    if query == "q1":
        sql = "SELECT auction, bidder, (price * 89) // 100 AS price, dateTime FROM bids"
    elif query == "q2":
        sql = f"SELECT auction, price FROM bids WHERE auction % {Q2_AUCTION_SKIP} = 0"
    elif query == "q3":
        sql = f"""SELECT p.name, p.city, p.state, a.id FROM persons p JOIN auctions a
                  ON p.id = a.seller WHERE p.state IN ({states}) AND a.category = {Q3_CATEGORY}"""
    elif query == "q5":
        wm = watermark(con, ["bids"], p.watermark_delay_ms)
        sql = f"""
          WITH w AS (
            SELECT auction, (dateTime // {slide}) * {slide} - k * {slide} AS window_start
            FROM bids, range(0, {size // slide}) r(k)
          ), c AS (
            SELECT window_start, auction, count(*) AS num FROM w
            WHERE window_start + {size} > 0 GROUP BY ALL
          )
          SELECT arg_max(auction, (num, auction)) AS auction, max(num) AS num, window_start,
                 window_start + {size} AS window_end
          FROM c WHERE window_start + {size} <= {wm} GROUP BY window_start"""
    elif query == "q7":
        wm = watermark(con, ["bids"], p.watermark_delay_ms)
        sql = f"""
          SELECT arg_max(auction, (price, auction, bidder, dateTime)) AS auction,
                 arg_max(bidder, (price, auction, bidder, dateTime)) AS bidder,
                 max(price) AS price,
                 arg_max(dateTime, (price, auction, bidder, dateTime)) AS dateTime,
                 (dateTime // {size}) * {size} AS window_start
          FROM bids GROUP BY window_start HAVING window_start + {size} <= {wm}"""
    elif query == "q8":
        sql = f"""SELECT p.id, p.name, a.id AS auction,
                         (p.dateTime // {size}) * {size} AS window_start
                  FROM persons p JOIN auctions a ON p.id = a.seller
                  AND p.dateTime // {size} = a.dateTime // {size}"""
    else:
        raise OracleError(f"no reference for {query!r}; q12 is checked by check_q12")
    frame = con.execute(sql).df()
    return [dict(row) for row in frame.to_dict(orient="records")]


def as_multiset(rows: Iterable[dict[str, Any]]) -> Counter:
    return Counter(json.dumps(row, sort_keys=True, default=int) for row in rows)


@dataclass
class Comparison:
    outputs: int
    expected: int
    missing: int
    unexpected: int

    @property
    def equal(self) -> bool:
        return self.missing == 0 and self.unexpected == 0


def compare(outputs: Iterable[dict[str, Any]], expected: Iterable[dict[str, Any]]) -> Comparison:
    got, want = as_multiset(outputs), as_multiset(expected)
    return Comparison(
        sum(got.values()),
        sum(want.values()),
        sum((want - got).values()),
        sum((got - want).values()),
    )


def check_q12(
    con: duckdb.DuckDBPyConnection,
    outputs: Iterable[dict[str, Any]],
    ignore_bidders: Iterable[int] = (),
) -> dict[str, Any]:
    """Every bid counted exactly once across windows: per bidder, the window counts add up to
    the bidder's bids, and no (bidder, window) appears twice."""
    ignore = set(ignore_bidders)
    per_bidder: Counter = Counter()
    seen: Counter = Counter()
    for row in outputs:
        if row["bidder"] in ignore:
            continue
        per_bidder[row["bidder"]] += row["num"]
        seen[(row["bidder"], row["window_start"])] += 1
    expected = Counter(
        dict(con.execute("SELECT bidder, count(*) FROM bids GROUP BY bidder").fetchall())
    )
    repeated = sum(1 for v in seen.values() if v > 1)
    return {
        "bidders": len(expected),
        "bids_expected": sum(expected.values()),
        "bids_counted": sum(per_bidder.values()),
        "bidders_wrong": sum(
            1 for b in set(expected) | set(per_bidder) if expected[b] != per_bidder[b]
        ),
        "repeated_windows": repeated,
        "ok": per_bidder == expected and repeated == 0,
    }
