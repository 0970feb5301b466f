"""The cyclic reachability query as two stages (recovery_lib/pipeline/reachability.py has the
generator and the invariants):

    links, sources, reach --> JOIN (keyed by node) --> PROJECT (keyed by source) --> reach
                                    ^                                                  |
                                    +-------------------- feedback --------------------+

JOIN keeps, per node u, its outgoing links and the reach tuples (source, path) that end at u;
a new link u->v joins the tuples at u, a new tuple at u joins u's links, each giving a pair
(source, path, next=v); a deleted link leaves the state. Source nodes enter as the tuple
(s, [s]); their adds and deletes are also forwarded to PROJECT. PROJECT (select + project)
drops a pair whose next node is already on its path or whose source is deleted, and emits the
new reach tuple (source, v, path + [v]): the query's output, and JOIN's feedback input.

Both stages are order-sensitive within a micro-batch (a delete before or after a join), so
their contract says so: a pipeline runs them causal, each key's rows in lineage order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib.causal.order import ordered
from recovery_lib.job import JobOptions, JobSpec, read_json_input
from recovery_lib.pipeline.reachability import JoinPairs, ReachablePaths
from recovery_lib.verify.contract import ConsistencyContract
from recovery_lib.verify.schema import OutputSchema, array_of

LINK_SCHEMA = "src long, dst long, op string"
SOURCE_SCHEMA = "node long, op string"
REACH_SCHEMA = "source long, node long, path array<long>"
PAIR_SCHEMA = "kind string, source long, path array<long>, next long"
OUT = "key string, value string, ingest_ms long"
STATE = "data string"


def _lineage(df: DataFrame) -> list[Any]:
    """The source position (for lineage order within a key) and the ingest time."""
    return [df["topic"], df["partition"].cast("int"), df["offset"], df["ingest_ms"]]


def _contract() -> ConsistencyContract:

    return ConsistencyContract(
        deterministic=False,
        ordered=True,
        invariants=(ReachablePaths(_inputs_of_run),),
        # Written by the stage's own JSON (a pandas state function): declared.
        output_schema=OutputSchema.declared(
            {"source": "long", "node": "long", "path": array_of("long")}
        ),
        ordered_list="path",
    )


def _inputs_of_run(inputs: Any) -> list[tuple[str, dict[str, Any]]] | None:
    if inputs is None or not (inputs.has("links") and inputs.has("sources")):
        return None
    out = []
    for name in ("links", "sources"):
        out += [(name, value) for _, value in inputs.decoded(name) if isinstance(value, dict)]
    return out


def _join(key: tuple[Any, ...], frames: Iterator[Any], state: Any) -> Iterator[Any]:
    import pandas as pd

    node = int(key[0])  # a numpy scalar from Spark: json.dumps refuses it
    data = json.loads(state.get[0]) if state.exists else {"links": [], "tuples": []}
    links: list[int] = data["links"]
    tuples: list[list[Any]] = data["tuples"]  # [source, path]
    out: list[tuple[str, str, int]] = []

    def emit(source: int, value: dict[str, Any], ingest: int) -> None:
        # "n" (the emission index) leads the value: the sink sorts a task's rows by (key,
        # value) for replay-stable ids, and PROJECT must read one node's rows of a source in
        # the order they were emitted (an unsource before the pairs of a re-added source).
        out.append((str(source), json.dumps({"n": f"{len(out):08d}", **value}), ingest))

    def pair(source: int, path: list[int], nxt: int, ingest: int) -> None:
        emit(source, {"kind": "pair", "source": source, "path": path, "next": nxt}, ingest)

    for frame in frames:
        for row in frame.itertuples(index=False):
            ingest = int(row.ingest_ms)
            if row.kind == "link":
                if int(row.b) not in links:
                    links.append(int(row.b))
                    for source, path in tuples:
                        pair(source, path, int(row.b), ingest)
            elif row.kind == "unlink":
                if int(row.b) in links:
                    links.remove(int(row.b))
            elif row.kind in ("source", "reach"):
                source = int(row.a)
                path = json.loads(row.path) if row.kind == "reach" else [node]
                if [source, path] not in tuples:
                    tuples.append([source, path])
                    for nxt in links:
                        pair(source, path, nxt, ingest)
                if row.kind == "source":
                    emit(
                        source, {"kind": "source", "source": source, "path": [], "next": -1}, ingest
                    )
            elif row.kind == "unsource":
                source = int(row.a)
                tuples[:] = [t for t in tuples if not (t[0] == source and t[1] == [source])]
                emit(source, {"kind": "unsource", "source": source, "path": [], "next": -1}, ingest)
    state.update((json.dumps({"links": links, "tuples": tuples}),))
    yield pd.DataFrame(out, columns=["key", "value", "ingest_ms"])


def build_join(spark: SparkSession, opts: JobOptions) -> DataFrame:
    links = read_json_input(spark, opts, "links", LINK_SCHEMA, ["src", "dst", "op"])
    sources = read_json_input(spark, opts, "sources", SOURCE_SCHEMA, ["node", "op"])
    reach = read_json_input(spark, opts, "reach", REACH_SCHEMA, ["source", "node", "path"])
    rows = (
        links.select(
            F.col("src").alias("node"),
            F.when(F.col("op") == "delete", "unlink").otherwise("link").alias("kind"),
            F.col("src").alias("a"),
            F.col("dst").alias("b"),
            F.lit(None).cast("string").alias("path"),
            *_lineage(links),
        )
        .unionByName(
            sources.select(
                F.col("node"),
                F.when(F.col("op") == "delete", "unsource").otherwise("source").alias("kind"),
                F.col("node").alias("a"),
                F.lit(None).cast("long").alias("b"),
                F.lit(None).cast("string").alias("path"),
                *_lineage(sources),
            )
        )
        .unionByName(
            reach.select(
                F.col("node"),
                F.lit("reach").alias("kind"),
                F.col("source").alias("a"),
                F.lit(None).cast("long").alias("b"),
                F.to_json("path").alias("path"),
                *_lineage(reach),
            )
        )
    )
    from pyspark.sql.streaming.state import GroupStateTimeout

    return rows.groupBy("node").applyInPandasWithState(
        ordered(_join), OUT, STATE, "append", GroupStateTimeout.NoTimeout
    )


def _project(key: tuple[Any, ...], frames: Iterator[Any], state: Any) -> Iterator[Any]:
    import pandas as pd

    source = int(key[0])
    deleted = bool(state.get[0]) if state.exists else False
    out: list[tuple[str, str, int]] = []
    for frame in frames:
        for row in frame.itertuples(index=False):
            if row.kind == "unsource":
                deleted = True
            elif row.kind == "source":
                deleted = False
            elif not deleted:
                path = [int(n) for n in row.path]
                nxt = int(row.next)
                if nxt in path:  # select: a cycle
                    continue
                value = {"source": int(source), "node": nxt, "path": [*path, nxt]}
                out.append((str(nxt), json.dumps(value), int(row.ingest_ms)))
    state.update((deleted,))
    yield pd.DataFrame(out, columns=["key", "value", "ingest_ms"])


def build_project(spark: SparkSession, opts: JobOptions) -> DataFrame:
    from pyspark.sql.streaming.state import GroupStateTimeout

    pairs = read_json_input(spark, opts, "pairs", PAIR_SCHEMA, ["kind", "source"])
    rows = pairs.select("source", "kind", "path", "next", *_lineage(pairs))
    return rows.groupBy("source").applyInPandasWithState(
        ordered(_project), OUT, "deleted boolean", "append", GroupStateTimeout.NoTimeout
    )


JOIN = JobSpec(
    name="reach_join",
    build=build_join,
    inputs=("links", "sources", "reach"),
    contract=ConsistencyContract(
        deterministic=False,
        ordered=True,
        invariants=(JoinPairs(_inputs_of_run),),
        output_schema=OutputSchema.declared(
            {
                "n": "string",
                "kind": "string",
                "source": "long",
                "path": array_of("long"),
                "next": "long",
            }
        ),
        free=("n",),  # the emission index within a task's output
        ordered_list="path",
    ),
    default_prefix="reach",
    description="Reachability: links joined with reach tuples (the cycle's stateful stage)",
)

PROJECT = JobSpec(
    name="reach_project",
    build=build_project,
    inputs=("pairs",),
    contract=_contract(),
    default_prefix="reach",
    description="Reachability: select (no cycles, live sources) and project new reach tuples",
)
