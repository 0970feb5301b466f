"""Where user code meets the causal services: wrappers for ``mapInPandas``, ``mapInArrow`` and
iterator pandas UDFs that open the task's ``CausalContext``, replay or log, and flush the
determinants before each output batch leaves the function (always-no-orphans: nothing
downstream, and so nothing the sink releases, depends on a determinant that is not durable).

    from recovery_lib import causal

    def convert(ctx, frames):
        for frame in frames:
            frame["rate"] = [ctx.call(fetch_rate, a) for a in frame["auction"]]
            frame["noise"] = ctx.random.random(len(frame))
            yield frame

    df = causal.map_in_pandas(bids, convert, schema, scope="convert", config=cfg)

``current(scope, config)`` gives a context anywhere else inside a task (a
``transformWithStateInPandas`` handler, a plain UDF); such a context flushes on every
determinant, since no wrapper knows when its outputs leave.

With ``storage="output"`` (determinants piggybacked on the output records) ``map_in_pandas`` and
``map_in_arrow`` add a binary column ``rl_determinants``: on the first row of an output batch,
the determinants flushed for it. Keep the column up to the sink (``carried(df)``); contexts
without a wrapper (``current``, ``pandas_udf``, ``foreach_batch``) need storage "kafka".
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import typing
from collections.abc import Callable, Iterator
from typing import Any

from recovery_lib.causal.determinants import DeterminantError, StreamKey
from recovery_lib.causal.log import CausalConfig, DeterminantLog, OutputCarriedLog, open_log
from recovery_lib.causal.services import CausalContext
from recovery_lib.errors import ConfigurationError
from recovery_lib.io.sinks.ids import DET_COLUMN
from recovery_lib.io.task import task_info
from recovery_lib.runtime.faults import maybe_kill_after_log

logger = logging.getLogger(__name__)  # not "log": that name is the determinant log here


def _needs_log_topic(config: CausalConfig, what: str) -> None:
    if config.storage == "output":
        raise ConfigurationError(
            f"{what} cannot piggyback determinants on output records: nothing tells it which "
            "output depends on them. Use storage='kafka' (a determinant topic) for this job"
        )


def _needs_replay(info: dict[str, Any], log: DeterminantLog, key: StreamKey) -> bool:
    """Read the log only when this task may be a re-execution: a retried task, or a stream
    whose marker says an earlier run may have logged determinants."""
    return (info["attempt"] or 0) > 0 or log.may_have(key)


def load_source(ref: str) -> Callable[[CausalConfig, StreamKey, DeterminantLog], Any]:
    """The determinant-source factory named ``module:attr``."""

    module, _, attr = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(
            f"determinant source {ref!r} (module:attr) not found: {exc}; check the name and "
            "that its module is on PYTHONPATH"
        ) from exc


def open_context(scope: str, config: CausalConfig, auto_flush: bool = False) -> CausalContext:
    info = task_info()
    batch = info["batch_id"] if info["batch_id"] is not None else -1
    partition = info["partition"] if info["partition"] is not None else -1
    key = StreamKey(config.job, batch, scope, partition)
    log = open_log(config)
    replay = []
    if config.source:  # another process computes the same stream: the source arbitrates
        return CausalContext(
            key,
            log,
            attempt=info["attempt"] or 0,
            epoch=config.current_epoch,
            auto_flush=auto_flush,
            source=load_source(config.source)(config, key, log),
        )
    if _needs_replay(info, log, key):
        try:
            replay = log.read(key)
        except DeterminantError as exc:
            if config.on_missing == "fail":
                raise DeterminantError(
                    f"{exc} -- the re-execution of {key} cannot repeat its first run. Fix the "
                    "log, or set on_missing='recompute' to run live (outputs of this batch may "
                    "then differ from ones already released: at-least-once, not exactly-once)"
                ) from exc
            logger.warning("causal: %s; recomputing %s live (on_missing=recompute)", exc, key)
    return CausalContext(
        key,
        log,
        replay,
        attempt=info["attempt"] or 0,
        epoch=config.current_epoch,
        auto_flush=auto_flush,
    )


_current: dict[tuple[str, str, int], CausalContext] = {}


def current(scope: str, config: CausalConfig) -> CausalContext:
    """The context of ``scope`` in the running task, opened on first use.

    For code no wrapper runs (a ``transformWithStateInPandas`` handler, a plain UDF): the
    context flushes on every determinant, since nothing knows when its outputs leave.

    Args:
        scope: The operator's name; unique within the job.
        config: The job's causal configuration (``opts.causal``).

    Returns:
        The task's context for ``scope``; a retried task gets a new one, which replays.

    Raises:
        ConfigurationError: ``config`` piggybacks determinants on the output (storage
            "output"), which needs a wrapper.
    """
    from pyspark import TaskContext

    _needs_log_topic(config, "current()")
    task = TaskContext.get()
    # Spark's task attempt id is unique within the application: a reused Python worker that
    # runs the same batch and partition again (a retry, a recomputed stage whose attempt
    # numbers restart at 0, a query restarted in the same driver) must not continue the
    # first execution's context: it opens a new one, which replays.
    attempt_id = task.taskAttemptId() if task is not None else -1
    if any(slot[2] != attempt_id for slot in _current):
        _current.clear()  # one task at a time per Python worker: forget the previous one's
    slot = (scope, config.job, attempt_id)
    ctx = _current.get(slot)
    if ctx is None:
        ctx = _current[slot] = open_context(scope, config, auto_flush=True)
    return ctx


def flushing(ctx: CausalContext, outputs: Iterator[Any]) -> Iterator[Any]:
    """``outputs`` with ``ctx``'s determinants made durable before each one leaves."""
    carrier = ctx.log if isinstance(ctx.log, OutputCarriedLog) else None
    for out in outputs:
        ctx.flush()  # determinants first, then the output that depends on them
        maybe_kill_after_log()  # fault hook: between the two writes
        if carrier is not None:
            # An empty batch cannot carry them: they wait for the next rows (nothing that
            # depends on them has left yet).
            out = attach_carrier(out, carrier.take_carrier() if _rows(out) else None)
        yield out
    ctx.flush()  # what no output carried: nothing depends on it


def _rows(out: Any) -> int:
    return out.num_rows if hasattr(out, "num_rows") else len(out)


def attach_carrier(out: Any, blob: bytes | None) -> Any:
    """``out`` (Arrow record batch or pandas frame) with the ``rl_determinants`` column:
    ``blob`` on the first row, null elsewhere."""
    n = _rows(out)
    values = [blob] + [None] * (n - 1) if n else []
    if hasattr(out, "num_rows"):
        import pyarrow as pa

        return pa.RecordBatch.from_arrays(
            [*out.columns, pa.array(values, pa.binary())], names=[*out.schema.names, DET_COLUMN]
        )
    out = out.copy(deep=False)
    out[DET_COLUMN] = values
    return out


def _with_carrier_column(schema: Any, config: CausalConfig) -> Any:
    if config.storage != "output":
        return schema
    if isinstance(schema, str):
        return f"{schema}, {DET_COLUMN} binary"
    from pyspark.sql.types import BinaryType, StructField, StructType

    return StructType([*schema.fields, StructField(DET_COLUMN, BinaryType(), True)])


def carried(df: Any) -> list[Any]:
    """The determinant column of ``df`` as a select list, to keep piggybacked determinants
    on the way to the sink: ``df.select(..., *causal.carried(df))``.

    Args:
        df: A DataFrame that may carry the ``rl_determinants`` column (storage "output").

    Returns:
        ``[rl_determinants]``, or an empty list when ``df`` has no such column.
    """
    from pyspark.sql import functions as F

    return [F.col(DET_COLUMN)] if DET_COLUMN in df.columns else []


def _per_partition(
    fn: Callable[[CausalContext, Iterator[Any]], Iterator[Any]], scope: str, config: CausalConfig
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The partition function Spark runs: open the task's context, flush before each output."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        ctx = open_context(scope, config)
        yield from flushing(ctx, fn(ctx, batches))

    return run


def map_in_pandas(
    df: Any,
    fn: Callable[[CausalContext, Iterator[Any]], Iterator[Any]],
    schema: Any,
    scope: str,
    config: CausalConfig,
) -> Any:
    """``df.mapInPandas`` with ``fn(ctx, frames)``: the task's context comes first, and its
    determinants are durable before each frame ``fn`` yields leaves.

    Args:
        df: The input DataFrame.
        fn: ``fn(ctx, frames)``: yields pandas DataFrames of ``schema``; takes its
            nondeterminism from ``ctx`` (a ``CausalContext``).
        schema: The output schema (a ``StructType`` or DDL string).
        scope: The operator's name; unique within the job.
        config: The job's causal configuration (``opts.causal``).

    Returns:
        The mapped DataFrame; with storage "output" it has the ``rl_determinants`` column
        too (keep it up to the sink: ``carried``).
    """
    return df.mapInPandas(_per_partition(fn, scope, config), _with_carrier_column(schema, config))


def map_in_arrow(
    df: Any,
    fn: Callable[[CausalContext, Iterator[Any]], Iterator[Any]],
    schema: Any,
    scope: str,
    config: CausalConfig,
) -> Any:
    """``df.mapInArrow`` with ``fn(ctx, batches)``: as ``map_in_pandas``, for Arrow record
    batches.

    Args:
        df: The input DataFrame.
        fn: ``fn(ctx, batches)``: yields Arrow record batches of ``schema``; takes its
            nondeterminism from ``ctx`` (a ``CausalContext``).
        schema: The output schema (a ``StructType`` or DDL string).
        scope: The operator's name; unique within the job.
        config: The job's causal configuration (``opts.causal``).

    Returns:
        The mapped DataFrame; with storage "output" it has the ``rl_determinants`` column
        too (keep it up to the sink: ``carried``).
    """
    return df.mapInArrow(_per_partition(fn, scope, config), _with_carrier_column(schema, config))


def pandas_udf(fn: Callable[..., Any], return_type: Any, scope: str, config: CausalConfig) -> Any:
    """A scalar iterator pandas UDF whose function takes the task's context.

    Args:
        fn: ``fn(ctx, *series)``, called per Arrow batch: returns a ``pandas.Series`` (a
            ``pandas.DataFrame`` for a struct ``return_type``) of the same length.
        return_type: The UDF's Spark return type.
        scope: The operator's name; unique within the job.
        config: The job's causal configuration (``opts.causal``); storage "kafka".

    Returns:
        A nondeterministic pandas UDF; call it on one or more columns,
        ``df.withColumn("x", udf("a", "b"))``.

    Raises:
        ConfigurationError: ``config`` piggybacks determinants on the output (storage
            "output"): a UDF cannot tell which output depends on them.
    """
    import pandas as pd
    from pyspark.sql.functions import pandas_udf as spark_pandas_udf

    _needs_log_topic(config, "pandas_udf")

    def run(batches):  # noqa: ANN001, ANN202 - annotated below, for Spark
        ctx = open_context(scope, config)

        def outputs() -> Iterator[Any]:
            for batch in batches:
                cols = batch if isinstance(batch, tuple) else (batch,)
                out = fn(ctx, *cols)
                yield out if isinstance(out, pd.Series | pd.DataFrame) else pd.Series(out)

        yield from flushing(ctx, outputs())

    # PySpark 4 infers the UDF kind from the type hints alone (no hints, or Iterator[Any]:
    # UNSUPPORTED_SIGNATURE). Iterator of tuples of columns -> iterator of Series is the
    # scalar iterator kind; Spark hands one column as a Series, several as a tuple, either
    # way: ``run`` accepts both. Real objects, not strings: this module uses postponed
    # annotations, which Spark would resolve in this module's globals.
    # typing.Union: Spark's check does not recognise the ``X | Y`` form.
    column = typing.Union[pd.Series, pd.DataFrame]  # noqa: UP007
    run.__annotations__ = {
        "batches": Iterator[tuple[column, ...]],  # type: ignore[valid-type]
        "return": Iterator[pd.Series],
    }
    udf = spark_pandas_udf(run, return_type)  # type: ignore[call-overload]
    return udf.asNondeterministic()


def with_processing_time(df: Any, column: str, scope: str, config: CausalConfig) -> Any:
    """Add the processing time, read through the causal clock, so a re-executed batch gets
    the same times (and processing-time windows the same contents).

    Args:
        df: The input DataFrame.
        column: The new timestamp column: when each Arrow batch of rows reached this
            operator.
        scope: The operator's name; unique within the job.
        config: The job's causal configuration (``opts.causal``).

    Returns:
        ``df`` with ``column``.
    """
    from pyspark.sql.types import StructField, StructType, TimestampType

    schema = StructType([*df.schema.fields, StructField(column, TimestampType(), True)])

    def stamp(ctx: CausalContext, batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            yield stamped(batch, column, ctx)

    return map_in_arrow(df, stamp, schema, scope, config)


def stamped(batch: Any, column: str, ctx: CausalContext) -> Any:
    """``batch`` (Arrow) with ``column``: the causal clock's time now, for every row."""
    import pyarrow as pa

    now_us = ctx.clock.now_ms() * 1000
    times = pa.array([now_us] * batch.num_rows, pa.timestamp("us", tz="UTC"))
    return pa.RecordBatch.from_arrays([*batch.columns, times], names=[*batch.schema.names, column])


@contextlib.contextmanager
def driver_context(scope: str, config: CausalConfig, batch_id: int) -> Iterator[CausalContext]:
    """For ``foreachBatch`` functions (driver side, partition -1): replays when the batch is a
    re-execution, flushes on every determinant."""
    _needs_log_topic(config, "foreach_batch")
    key = StreamKey(config.job, batch_id, scope, -1)
    log = open_log(config)
    if config.source:
        source = load_source(config.source)(config, key, log)
        ctx = CausalContext(key, log, epoch=config.current_epoch, auto_flush=True, source=source)
    else:
        replay = log.read(key) if log.may_have(key) else []
        ctx = CausalContext(key, log, replay, epoch=config.current_epoch, auto_flush=True)
    yield ctx
    ctx.flush()


def foreach_batch(
    fn: Callable[[CausalContext, Any, int], None], scope: str, config: CausalConfig
) -> Callable[[Any, int], None]:
    """A ``foreachBatch`` function whose body takes a context (driver side): a re-executed
    batch replays what its first run logged.

    Args:
        fn: ``fn(ctx, df, batch_id)``.
        scope: The operator's name; unique within the job.
        config: The job's causal configuration (``opts.causal``); storage "kafka".

    Returns:
        ``run(df, batch_id)`` for ``writeStream.foreachBatch``. It raises
        ``ConfigurationError`` when ``config`` has storage "output".
    """

    def run(df: Any, batch_id: int) -> None:
        with driver_context(scope, config, batch_id) as ctx:
            fn(ctx, df, batch_id)

    return run
