"""The causal API on real Spark: every operator and service, a re-executed batch returns what
its first execution returned.

Each test runs a streaming query (the Kafka source on the embedded broker, one micro-batch of
a few hundred records in two partitions) through one causal operator whose function uses the
services (clock, random, call, service), then a *spy*: a ``mapInPandas`` right after it that
saves every row it receives, per execution (batch, partition, task attempt, run), and passes
nothing on (noop sink). The batch is executed twice, in one of two ways:

``task_retry``  the spy raises on attempt 0 after it saw the operator's whole output (so after
    the determinants were flushed and the outputs released downstream); the master is
    ``local[2,4]``, so Spark retries the task and the operator runs again as attempt 1.
``restart``     the query runs its batch to the end; then the batch's commit file is deleted and
    the query is started again on the same checkpoint, which re-executes the same batch (same
    offsets) as a driver restart after a kill before the commit would. This is an in-process
    stand-in for a driver kill, much cheaper than one: the real SIGKILL of a separate driver
    process (twice, and mid-write) is tested in tests/test_causal_e2e.py.

The spy's rows of both executions must be equal, column by column, by id (source partition
and offset). Every output value is nondeterministic when run live (fresh random seeds, the
wall clock, a service answering a new UUID per call), and the control test shows the
comparison fails without causal logging. The services' functions log every live call: the
re-execution must not call them at all.

``foreach_batch`` runs its function on the driver, once per batch: a task retry inside the
batch does not run the function again, so only the restart applies to it.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from recovery_lib import causal
from recovery_lib.causal.driver import enable
from recovery_lib.io.source import SOURCE_NAME
from recovery_lib.kafka.clients import client_config
from tests.helpers import produce, uncommit

pytestmark = [pytest.mark.spark, pytest.mark.broker]

RECORDS = 200
PARTITIONS = 2
KINDS = ("task_retry", "restart")
OUT_SCHEMA = "id string, r double, t bigint, c string, s string"
STRUCT = "r double, t bigint, c string, s string"


# -- session and input -----------------------------------------------------------------------


def _task_retries(master: str) -> int:
    found = re.fullmatch(r"local\[\s*[\d*]+\s*,\s*(\d+)\s*\]", master.strip())
    return int(found.group(1)) if found else 1


@pytest.fixture(scope="module")
def session(kafka_bootstrap: str) -> Iterator[Any]:
    """One SparkSession for the module, ``local[2,4]`` (4 attempts per task) so that a failed
    task is retried. If another module's session already runs in this process (one per
    process), it is reused; without task retries the task-retry tests skip."""
    from pyspark import SparkContext, cloudpickle

    from recovery_lib.spark.session import build_session

    # The functions below run in Python workers: ship them by value (workers need not be able
    # to import the tests package).
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ours = SparkContext._active_spark_context is None
    spark = build_session("causal-api", master="local[2,4]")
    try:
        yield spark
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        if ours:
            spark.stop()


@pytest.fixture(scope="module")
def input_topic(admin) -> str:  # noqa: ANN001
    topic = f"capi-{uuid.uuid4().hex[:8]}"
    admin.create(topic, PARTITIONS)
    produce(topic, RECORDS, PARTITIONS, prefix="r")
    return topic


def _skip_without_retries(spark: Any, kind: str) -> None:
    if kind == "task_retry" and _task_retries(spark.sparkContext.master) < 2:
        pytest.skip(
            f"master {spark.sparkContext.master} does not retry tasks (a session without "
            "retries was already running in this process: run this module on its own)"
        )


class Case:
    """One test's files: checkpoint, causal state, spy output, live-call log."""

    def __init__(self, tmp_path: Path, name: str) -> None:
        self.checkpoint = tmp_path / "ck"
        self.spy_dir = tmp_path / "spy"
        self.spy_dir.mkdir()
        self.calls_log = tmp_path / "calls.log"
        self.calls_log.touch()
        self.config = causal.CausalConfig(
            job=f"capi-{name}-{uuid.uuid4().hex[:6]}",
            state_dir=str(tmp_path / "ck.causal"),
            kafka=client_config(),
        )

    def live_calls(self) -> list[str]:
        return self.calls_log.read_text().splitlines()


# -- executor-side pieces (shipped by value) -----------------------------------------------------


def make_token(calls_log: str) -> Callable[[str], str]:
    """A nondeterministic service: a new UUID per call, each live call logged to a file."""

    def token(kind: str) -> str:
        value = uuid.uuid4().hex
        with open(calls_log, "a") as f:  # one short line per call: appends do not interleave
            f.write(f"{kind} {value}\n")
        return value

    return token


def spy(directory: str, run: str, fail_first_attempt: bool) -> Callable[[Iterator], Iterator]:
    """Save every row of the task's input (what the causal operator returned) to
    ``<run>-<batch>-<partition>-<attempt>.pkl``; on attempt 0, optionally fail afterwards."""

    def save(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from pyspark import TaskContext

        task = TaskContext.get()
        seen = list(frames)
        rows = pd.concat(seen, ignore_index=True) if seen else pd.DataFrame()
        batch = task.getLocalProperty("streaming.sql.batchId")
        name = f"{run}-{batch}-{task.partitionId()}-{task.attemptNumber()}.pkl"
        rows.to_pickle(Path(directory) / name)
        if fail_first_attempt and task.attemptNumber() == 0:
            raise RuntimeError("injected task failure: after the operator's output was produced")
        return iter(())

    return save


def ids(frame: pd.DataFrame) -> pd.Series:
    return frame["partition"].astype(str) + "@" + frame["offset"].astype(str)


def services_frame(ctx: causal.CausalContext, frame: pd.DataFrame, token) -> pd.DataFrame:  # noqa: ANN001
    """Every service, per row: random, clock, call, service."""
    n = len(frame)
    service = ctx.service(token)
    return pd.DataFrame(
        {
            "id": ids(frame),
            "r": ctx.random.random(n),
            "t": [ctx.clock.now_ms() for _ in range(n)],
            "c": [ctx.call(token, "call") for _ in range(n)],
            "s": [service("service") for _ in range(n)],
        }
    )


# -- the operators under test: df (the source) -> DataFrame with an ``id`` column --------------


def via_map_in_pandas(df: Any, case: Case) -> Any:
    token = make_token(str(case.calls_log))

    def fn(ctx: causal.CausalContext, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for frame in frames:
            yield services_frame(ctx, frame, token)

    src = df.select("partition", "offset")
    return causal.map_in_pandas(src, fn, OUT_SCHEMA, scope="pandas", config=case.config)


def via_map_in_arrow(df: Any, case: Case) -> Any:
    token = make_token(str(case.calls_log))

    def fn(ctx: causal.CausalContext, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            yield pa.RecordBatch.from_pandas(
                services_frame(ctx, batch.to_pandas(), token), preserve_index=False
            )

    src = df.select("partition", "offset")
    return causal.map_in_arrow(src, fn, OUT_SCHEMA, scope="arrow", config=case.config)


def via_pandas_udf(df: Any, case: Case) -> Any:
    token = make_token(str(case.calls_log))

    def fn(ctx: causal.CausalContext, partition: pd.Series, offset: pd.Series) -> pd.DataFrame:
        frame = pd.DataFrame({"partition": partition, "offset": offset})
        return services_frame(ctx, frame, token).drop(columns="id")

    udf = causal.pandas_udf(fn, STRUCT, scope="udf", config=case.config)
    from pyspark.sql import functions as F

    out = df.select(
        F.concat_ws("@", "partition", "offset").alias("id"), udf("partition", "offset").alias("u")
    )
    return out.select("id", "u.*")


def via_current(df: Any, case: Case) -> Any:
    """A plain (row-at-a-time) Python UDF that opens its task's context with ``current``."""
    from pyspark.sql import functions as F

    token = make_token(str(case.calls_log))
    cfg = case.config

    def row(_offset):  # noqa: ANN001, ANN202 - no hints: Spark would try to infer a kind
        ctx = causal.current("row", cfg)
        return (
            float(ctx.random.random()),
            ctx.clock.now_ms(),
            ctx.call(token, "call"),
            ctx.service(token)("service"),
        )

    udf = F.udf(row, STRUCT).asNondeterministic()
    out = df.select(F.concat_ws("@", "partition", "offset").alias("id"), udf("offset").alias("u"))
    return out.select("id", "u.*")


def via_with_processing_time(df: Any, case: Case) -> Any:
    from pyspark.sql import functions as F

    src = df.select(F.concat_ws("@", "partition", "offset").alias("id"))
    return causal.with_processing_time(src, "t", scope="ptime", config=case.config)


def native_random(df: Any, case: Case) -> Any:
    """The control: the same kind of function without causal logging (fresh seed per run)."""

    def fn(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import numpy as np

        rng = np.random.default_rng()
        for frame in frames:
            yield pd.DataFrame({"id": ids(frame), "r": rng.random(len(frame))})

    return df.select("partition", "offset").mapInPandas(fn, "id string, r double")


OPERATORS: dict[str, Callable[[Any, Case], Any]] = {
    "map_in_pandas": via_map_in_pandas,
    "map_in_arrow": via_map_in_arrow,
    "pandas_udf": via_pandas_udf,
    "current": via_current,
    "with_processing_time": via_with_processing_time,
}
# Live calls of the logged services per row (ctx.call + ctx.service), in the first execution.
LIVE_CALLS_PER_ROW = {"with_processing_time": 0}  # the others: 2


# -- running a batch twice -------------------------------------------------------------------


def run_query(spark: Any, topic: str, case: Case, build, run: str, fail: bool) -> None:  # noqa: ANN001
    df = spark.readStream.format(SOURCE_NAME).option("subscribe", topic).load()
    out = build(df, case)
    spied = out.mapInPandas(spy(str(case.spy_dir), run, fail), out.schema)
    query = (
        spied.writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(case.checkpoint))
        .start()
    )
    try:
        assert query.awaitTermination(240), "the available-now query did not finish in 240 s"
    finally:
        query.stop()
    assert query.exception() is None, query.exception()


def execute_twice(spark: Any, topic: str, case: Case, build, kind: str) -> None:  # noqa: ANN001
    """Run batch 0 and re-execute it, by a task retry or by a restart on the checkpoint."""
    assert enable(spark, case.config, case.checkpoint) == -1  # nothing to replay yet
    if kind == "task_retry":
        run_query(spark, topic, case, build, "first", fail=True)
        return
    run_query(spark, topic, case, build, "first", fail=False)
    uncommit(case.checkpoint, 0)
    assert enable(spark, case.config, case.checkpoint) == 0  # the batch the restart replays
    run_query(spark, topic, case, build, "again", fail=False)


def executions(spy_dir: Path) -> dict[tuple[str, int], dict[str, pd.DataFrame]]:
    """(batch, partition) -> {"<run>/<attempt>": rows sorted by id}."""
    out: dict[tuple[str, int], dict[str, pd.DataFrame]] = {}
    for path in sorted(spy_dir.glob("*.pkl")):
        run, batch, partition, attempt = path.stem.split("-")
        rows = pd.read_pickle(path)
        rows = rows.sort_values("id").reset_index(drop=True) if len(rows) else rows
        out.setdefault((batch, int(partition)), {})[f"{run}/{attempt}"] = rows
    return out


def first_and_again(spy_dir: Path, kind: str) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """Per partition of batch 0: (first execution's rows, re-execution's rows)."""
    found = executions(spy_dir)
    assert sorted(found) == [("0", p) for p in range(PARTITIONS)], sorted(found)
    pairs = []
    for (_, partition), runs in sorted(found.items()):
        expected = ["first/0", "first/1"] if kind == "task_retry" else ["again/0", "first/0"]
        assert sorted(runs) == expected, f"partition {partition}: executions {sorted(runs)}"
        first, again = (
            (runs["first/0"], runs["first/1"])
            if kind == "task_retry"
            else (runs["first/0"], runs["again/0"])
        )
        pairs.append((first, again))
    everything = pd.concat([first for first, _ in pairs])
    assert sorted(everything["id"]) == sorted(
        f"{i % PARTITIONS}@{i // PARTITIONS}" for i in range(RECORDS)
    )
    return pairs


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("operator", list(OPERATORS))
def test_reexecuted_batch_returns_what_the_first_execution_returned(
    session, input_topic, tmp_path, operator, kind
):
    _skip_without_retries(session, kind)
    case = Case(tmp_path, f"{operator.replace('_', '')}-{kind[0]}")
    execute_twice(session, input_topic, case, OPERATORS[operator], kind)
    for first, again in first_and_again(case.spy_dir, kind):
        for column in first.columns:
            assert first[column].tolist() == again[column].tolist(), (
                f"{operator}, {kind}: column {column!r} differs on re-execution"
            )
        # The values are live nondeterminism, not constants that would match anyway.
        assert first["t"].notna().all()
        if "r" in first:
            assert first["r"].nunique() == len(first)
            assert first["c"].nunique() == first["s"].nunique() == len(first)
    # The re-execution replayed the logged results: the services ran only in the first one.
    calls = case.live_calls()
    assert len(calls) == RECORDS * LIVE_CALLS_PER_ROW.get(operator, 2), len(calls)


def test_foreach_batch_restart_returns_what_the_first_execution_returned(
    session, input_topic, tmp_path
):
    """Driver-side context (partition -1): the function runs again after a restart and gets
    the same random numbers, clock reading and call results."""
    import json

    case = Case(tmp_path, "foreachbatch")
    token = make_token(str(case.calls_log))
    results = tmp_path / "results"
    results.mkdir()

    def fn(ctx: causal.CausalContext, df: Any, batch_id: int) -> None:
        value = {
            "rows": df.count(),
            "r": ctx.random.random(3).tolist(),
            "t": ctx.clock.now_ms(),
            "c": ctx.call(token, "call"),
            "s": ctx.service(token)("service"),
        }
        runs = len(list(results.glob(f"{batch_id}-*.json")))
        (results / f"{batch_id}-{runs}.json").write_text(json.dumps(value))

    def start() -> None:
        df = session.readStream.format(SOURCE_NAME).option("subscribe", input_topic).load()
        query = (
            df.select("offset")
            .writeStream.foreachBatch(causal.foreach_batch(fn, "fb", case.config))
            .trigger(availableNow=True)
            .option("checkpointLocation", str(case.checkpoint))
            .start()
        )
        try:
            assert query.awaitTermination(240), "the available-now query did not finish"
        finally:
            query.stop()
        assert query.exception() is None, query.exception()

    assert enable(session, case.config, case.checkpoint) == -1
    start()
    uncommit(case.checkpoint, 0)
    assert enable(session, case.config, case.checkpoint) == 0
    start()
    first, again = (json.loads((results / f"0-{i}.json").read_text()) for i in (0, 1))
    assert first["rows"] == RECORDS
    assert first == again
    assert len(case.live_calls()) == 2  # one call, one service call: only in the first run


@pytest.mark.parametrize("kind", KINDS)
def test_without_causal_logging_the_reexecution_differs(session, input_topic, tmp_path, kind):
    """The control: the same comparison on a function drawing its own random numbers fails,
    so the tests above can fail too."""
    _skip_without_retries(session, kind)
    case = Case(tmp_path, f"native-{kind[0]}")
    execute_twice(session, input_topic, case, native_random, kind)
    for first, again in first_and_again(case.spy_dir, kind):
        assert first["id"].tolist() == again["id"].tolist()  # the same rows ...
        assert first["r"].tolist() != again["r"].tolist()  # ... with other random numbers
