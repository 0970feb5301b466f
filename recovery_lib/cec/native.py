"""The same aggregate on Spark's own state store: what mode ``native`` runs for a CEC job, the
comparison of the CEC issue, and the failure-free reference the oracle judges CEC against
(an independent implementation: the two must agree on every result).

Count windows: ``applyInPandasWithState`` per key, rows sorted by input position (a key's
tuples come from one input partition, so their order is the input's). Time windows: Spark's
``window`` aggregation under the job's watermark. Spark snapshots the state every micro-batch
(HDFS-backed provider, or RocksDB with ``spark.sql.streaming.stateStore.providerClass``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from recovery_lib.cec.aggregate import AggregateSpec
from recovery_lib.cec.operator import result_value
from recovery_lib.cec.windows import (
    Accumulator,
    CountWindows,
    TimeWindows,
    count_window_id,
    time_window_id,
)

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame

    from recovery_lib.job.options import JobOptions

OUTPUT_SCHEMA = "key string, value string, ingest_ms long"
_STATE_SCHEMA = "window string, count long, total double, high double, low double"


def native_frame(rows: DataFrame, spec: AggregateSpec, opts: JobOptions) -> DataFrame:
    """The aggregate ``spec`` of a CEC plan's input ``rows`` as a job output DataFrame (key,
    value, ingest_ms)."""
    kind = spec.kind
    if isinstance(kind, CountWindows):
        return _count_windows(rows, spec, kind)
    return _time_windows(rows, spec, kind, opts)


def _count_windows(rows: DataFrame, spec: AggregateSpec, kind: CountWindows) -> DataFrame:
    from pyspark.sql.streaming.state import GroupStateTimeout

    aggregate, size = spec.aggregate, kind.size

    def windows(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any):  # noqa: ANN202
        import pandas as pd

        (k,) = key
        if state.exists:
            wid, count, total, high, low = state.get
            acc = Accumulator(int(count), total, high, low)
        else:
            wid, acc = "", Accumulator()
        batch = pd.concat(list(frames)).sort_values(["partition", "offset"])
        out: list[tuple[str, str, int]] = []
        for p, o, v, ingest in zip(
            batch["partition"], batch["offset"], batch["value"], batch["ingest_ms"], strict=True
        ):
            if not wid:
                wid, acc = count_window_id(k, int(p), int(o)), Accumulator()
            acc.add(float(v))
            if acc.count >= size:
                out.append((k, result_value(k, wid, acc, aggregate, None).decode(), int(ingest)))
                wid = ""
        if wid:
            state.update((wid, acc.count, acc.total, acc.high, acc.low))
        elif state.exists:
            state.remove()
        yield pd.DataFrame(out, columns=["key", "value", "ingest_ms"])

    return rows.groupBy("key").applyInPandasWithState(
        windows, OUTPUT_SCHEMA, _STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )


def _time_windows(
    rows: DataFrame, spec: AggregateSpec, kind: TimeWindows, opts: JobOptions
) -> DataFrame:
    from pyspark.sql import functions as F

    aggregate = spec.aggregate
    timed = rows.withColumn("event_time", F.timestamp_millis("event_ms")).withWatermark(
        "event_time", opts.watermark_delay
    )
    grouped = timed.groupBy(
        "key",
        F.window("event_time", f"{kind.size_ms} milliseconds", f"{kind.slide} milliseconds"),
    ).agg(
        F.count("value").alias("count"),
        F.sum("value").alias("total"),
        F.max("value").alias("high"),
        F.min("value").alias("low"),
        F.max("ingest_ms").alias("ingest_ms"),
    )
    flat = grouped.select(
        "key",
        F.unix_millis("window.start").alias("start"),
        F.unix_millis("window.end").alias("end"),
        "count",
        "total",
        "high",
        "low",
        "ingest_ms",
    )

    def encode(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import pandas as pd

        for f in frames:
            values = [
                result_value(
                    k,
                    time_window_id(k, int(s)),
                    Accumulator(int(c), t, h, lo),
                    aggregate,
                    (int(s), int(e)),
                ).decode()
                for k, s, e, c, t, h, lo in zip(
                    f["key"],
                    f["start"],
                    f["end"],
                    f["count"],
                    f["total"],
                    f["high"],
                    f["low"],
                    strict=True,
                )
            ]
            yield pd.DataFrame(
                {"key": f["key"], "value": values, "ingest_ms": f["ingest_ms"].astype("int64")}
            )

    return flat.mapInPandas(encode, OUTPUT_SCHEMA)
