"""Library pieces every job is built from: reading a Kafka input of JSON records through our
source with a dead-letter path, and writing a job's output through the Kafka sink with its
ingest time.

A job's output DataFrame has columns ``key`` (string), ``value`` (a struct, serialized as JSON
with its type recorded as the output schema, or a JSON string) and
``ingest_ms`` (ingest time of the newest input the output depends on). ``write_output`` puts
``ingest_ms`` into the ``rl.ingest_ms`` header, where the latency collector finds it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recovery_lib.causal.operators import flushing, open_context, stamped
from recovery_lib.errors import JobError
from recovery_lib.ha.fencing import EPOCH_GUARD_HOOK, EpochStore
from recovery_lib.ha.standby.follow import FOLLOW_POLICY
from recovery_lib.ha.standby.rehearsal import JobOutput
from recovery_lib.io.client_cache import cached
from recovery_lib.io.parked import PARKED_OPTION
from recovery_lib.io.sinks.ids import CONTROL_HEADER, DET_COLUMN, ID_HEADER
from recovery_lib.io.sinks.kafka_sink import BATCH_SHIFT_FILE
from recovery_lib.io.sinks.modes import NEEDS_BROKER_TRANSACTIONS, REPLAY_BY_ID
from recovery_lib.io.sinks.table_target import TableTarget
from recovery_lib.io.source import SOURCE_NAME
from recovery_lib.io.task import task_info
from recovery_lib.job.options import JobOptions
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged
from recovery_lib.kafka.headers import INGEST_HEADER, REASON_HEADER, SOURCE_POSITION_HEADER
from recovery_lib.metrics.listener import DEAD_LETTER_METRIC
from recovery_lib.runtime.faults import (
    SINK_FAULT_HOOK,
    maybe_fail_task,
    raise_on_poison,
    sink_write_fault,
)


def _ingest_ms() -> Column:
    """When the input was written by another job (a pipeline's upstream stage), the ingest
    time of the event it came from travels in the ``rl.ingest_ms`` header, so latency is end
    to end across stages; otherwise the record's Kafka timestamp."""
    upstream = F.filter("headers", lambda h: h["key"] == INGEST_HEADER)
    return F.coalesce(
        F.try_element_at(upstream, F.lit(1))["value"].cast("string").try_cast("long"),
        F.unix_millis("timestamp"),
    )


def read_json_input(
    spark: SparkSession,
    opts: JobOptions,
    name: str,
    schema: str,
    required: Sequence[str],
    clock_column: tuple[str, str] | None = None,
) -> DataFrame:
    """Input ``name`` parsed as JSON records of ``schema``, read through the library's source.

    A record that is not JSON or lacks a ``required`` field goes to the dead-letter topic
    (reason and source position) and is counted in the progress metrics.

    Args:
        spark: The job's session.
        opts: The job's options (``build``'s second argument).
        name: One of the job's inputs; its topic is ``opts.topic_for(name)``.
        schema: The records' fields as a Spark DDL string (``"id long, amount double"``).
        required: Fields a record must have; one without them is a dead letter.
        clock_column: ``(column, scope)``, causal mode only: adds ``column``, the processing
            time at which rows passed the dead-letter router, read through the causal clock
            of ``scope``. The rows pass through Python there anyway, so the clock costs no
            extra Python operator (Q12).

    Returns:
        A streaming DataFrame with columns ``key``, ``topic``, ``partition``, ``offset``,
        ``ingest_ms`` and the schema's fields (and ``clock_column``'s).

    Raises:
        JobError: ``clock_column`` without causal mode (``opts.causal`` unset).
    """
    reader = spark.readStream.format(SOURCE_NAME).options(**opts.kafka_options())
    reader = reader.option("subscribe", opts.topic_for(name))
    # Records parked as poison (job/poison.py) go to the job's dead letters, not to the query.
    reader = reader.option("deadLetterTopic", opts.dlq_topic).option(
        PARKED_OPTION, opts.parked_path
    )
    if opts.max_records_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(opts.max_records_per_batch))
    topic = opts.topic_for(name)
    if opts.ending_offsets:
        reader = reader.option("endingOffsets", offsets_of(opts.ending_offsets, topic))
    # A job's inputs share the source options; offsets JSON names every input's topics, and
    # each source takes its own (a source refuses topics it does not read).
    reader = reader.options(
        **{
            k: offsets_of(v, topic) if k in ("startingOffsets", "endingOffsets") else v
            for k, v in opts.source_options.items()
        }
    )
    if opts.follow_log:
        # After the followed batches, the policy the mechanism chose (or free cuts).
        then = opts.source_options.get("cutPolicy", "free")
        reader = (
            reader.option("cutPolicy", FOLLOW_POLICY)
            .option("followLog", opts.follow_log)
            .option("followCheckpoint", opts.checkpoint_path)
            .option("followThen", then)
        )
        if opts.takeover_marker:  # a hot standby: the primary's committed batches only
            reader = reader.option("followHoldUntil", opts.takeover_marker)
    # Records that carry a mechanism's state (markers, footprints) are not input.
    raw = reader.load().where(
        ~F.coalesce(F.exists("headers", lambda h: h["key"] == CONTROL_HEADER), F.lit(False))
    )
    parsed = raw.select(
        F.col("key").cast("string").alias("key"),
        F.col("value"),
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        _ingest_ms().alias("ingest_ms"),
        F.from_json(F.col("value").cast("string"), schema).alias("e"),
    )
    missing = [F.when(F.col(f"e.{field}").isNull(), F.lit(field)) for field in required]
    # from_json yields a struct of nulls for text that is not JSON at all.
    all_null = F.lit(True)
    for field in required:
        all_null = all_null & F.col(f"e.{field}").isNull()
    reason: Column = F.when(
        F.col("e").isNull() | all_null, F.lit(f"value is not a JSON {name} record ({schema})")
    ).otherwise(
        F.when(
            F.concat_ws(",", *missing) != "",
            F.concat(F.lit("missing required fields: "), F.concat_ws(",", *missing)),
        )
    )
    flagged = parsed.select("*", reason.alias("_reason")).observe(
        f"{DEAD_LETTER_METRIC}_{name}", F.sum(F.when(F.col("_reason").isNotNull(), 1).otherwise(0))
    )
    routed = route_dead_letters(flagged, opts, clock_column)
    return routed.select(
        "key",
        "topic",
        "partition",
        "offset",
        "ingest_ms",
        "e.*",
        *([clock_column[0]] if clock_column else []),
    )


def offsets_of(text: str, topic: str) -> str:
    """Offsets JSON ``{topic: {partition: offset}}`` narrowed to ``topic`` (other spellings,
    e.g. "earliest", as they are)."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if not isinstance(parsed, dict):
        return text
    return json.dumps({t: parts for t, parts in parsed.items() if t == topic})


def route_dead_letters(
    df: DataFrame, opts: JobOptions, clock_column: tuple[str, str] | None = None
) -> DataFrame:
    """Send the rows with a ``_reason`` to the dead-letter topic; the others continue.

    Dead letters are flushed before the task ends, with the source position as their id, so
    a re-run dedups them. A task fails (RecordsNotAcknowledged) when the broker does not
    acknowledge them.

    Args:
        df: Rows with ``value``, ``_reason`` (null: a good row), ``key``, ``topic``,
            ``partition`` and ``offset``.
        opts: The job's options (its dead-letter topic and Kafka properties).
        clock_column: ``(column, scope)``, causal mode only: add ``column``, the processing
            time read through the causal clock of ``scope``.

    Returns:
        The good rows, without ``value`` and ``_reason``.

    Raises:
        JobError: ``clock_column`` without causal mode (``opts.causal`` unset).
    """
    kafka = dict(opts.kafka)
    topic = opts.dlq_topic
    out_fields = [f for f in df.schema.fields if f.name not in ("value", "_reason")]
    from pyspark.sql.types import StructField, StructType, TimestampType

    keep = [f.name for f in out_fields]
    causal = opts.causal
    if clock_column is not None:
        if causal is None:
            raise JobError(
                "clock_column needs causal mode (opts.causal): pass it only when opts.causal is set"
            )
        out_fields.append(StructField(clock_column[0], TimestampType(), True))
    out_schema = StructType(out_fields)

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if clock_column is None:
            yield from _route(batches)
            return

        ctx = open_context(clock_column[1], causal)
        rows = (stamped(batch, clock_column[0], ctx) for batch in _route(batches))
        yield from flushing(ctx, rows)  # determinants durable before rows leave

    def _route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        maybe_fail_task(task_info()["attempt"])
        producer: Any = None
        for batch in batches:
            raise_on_poison(batch)  # an experiment's poison record: "user code" that raises
            bad = pc.is_valid(batch.column("_reason"))
            if pc.any(bad).as_py():
                if producer is None:
                    from confluent_kafka import Producer

                    producer = cached("producer:deadletter", kafka, lambda c: Producer(c))
                rows = batch.filter(bad).to_pylist()
                for row in rows:
                    position = f"{row['topic']}/{row['partition']}@{row['offset']}"
                    producer.produce(
                        topic,
                        row["value"],
                        row["key"],
                        headers=[
                            (ID_HEADER, f"dlq:{position}".encode()),
                            (REASON_HEADER, row["_reason"].encode()),
                            (SOURCE_POSITION_HEADER, position.encode()),
                        ],
                    )
                batch = batch.filter(pc.invert(bad))
            yield batch.select(keep)
        if producer is not None and producer.flush(60):
            raise RecordsNotAcknowledged(
                f"dead letters were not acknowledged by the broker ({topic}); check the broker "
                "is up"
            )

    return df.mapInArrow(route, out_schema)


def output(key: Column, value_fields: list[Column], ingest_ms: Column) -> list[Column]:
    """A job's output columns, for ``df.select(*output(...))``.

    Args:
        key: The output's Kafka key (cast to string).
        value_fields: The value's fields. The writers serialize the struct as JSON and
            record its Spark type as the run's output schema, which the oracle checks every
            output against.
        ingest_ms: The ingest time (ms) of the newest input the output depends on.

    Returns:
        The columns ``key``, ``value`` and ``ingest_ms``.
    """
    return [
        key.cast("string").alias("key"),
        F.struct(*value_fields).alias("value"),
        ingest_ms.alias("ingest_ms"),
    ]


# Null fields are written (Spark leaves them out by default): a missing field is then always
# an output no run wrote (verify/schema.py, nulls_written).
JSON_OPTIONS = {"ignoreNullFields": "false"}


def serialized(df: DataFrame, opts: JobOptions) -> DataFrame:
    """``df`` with a struct ``value`` serialized as JSON, its type recorded as the run's output
    schema (``opts.schema_store``); a value the job serialized itself is left as it is."""
    from pyspark.sql.types import StructType

    kind = df.schema["value"].dataType if "value" in df.columns else None
    if not isinstance(kind, StructType):
        return df
    if opts.schema_store:
        from recovery_lib.verify.schema import OutputSchema, SchemaStore

        target = opts.table_sink or opts.out_topic
        SchemaStore(Path(opts.schema_store)).record(target, OutputSchema.from_spark(kind))
    return df.withColumn("value", F.to_json("value", JSON_OPTIONS))


def write_output(df: DataFrame, opts: JobOptions, once: bool = False):  # noqa: ANN201
    """Start the query writing ``df`` to the job's output: the Kafka sink in
    ``opts.sink_mode``, or the lakehouse table ``opts.table_sink``.

    The job runtime calls it with what ``build`` returned; a job calls it only when it runs
    its own queries.

    Args:
        df: The output (``key``, ``value``, ``ingest_ms``; see ``output``).
        opts: The job's options.
        once: Write one batch and stop (a standby's rehearsal).

    Returns:
        The started ``StreamingQuery``.
    """
    if opts.table_sink:
        return write_table_output(df, opts)
    df = serialized(df, opts)
    out = df.select(
        "key",
        "value",
        F.array(
            F.struct(
                F.lit(INGEST_HEADER).alias("key"),
                F.col("ingest_ms").cast("string").cast("binary").alias("value"),
            )
        ).alias("headers"),
        *([F.col(DET_COLUMN)] if DET_COLUMN in df.columns else []),
    )
    sink = sink_options(opts)
    if opts.output_mode == "update":
        # Spark's Python stream writers take append and complete only: each batch's changed
        # rows go through the same sink as a batch write carrying the batch's id.
        def write(batch: DataFrame, batch_id: int) -> None:
            batch.write.format(SOURCE_NAME).options(**sink).option("batchId", str(batch_id)).mode(
                "append"
            ).save()

        writer = out.writeStream.outputMode("update").foreachBatch(write)
    else:
        writer = out.writeStream.format(SOURCE_NAME).options(**sink)
    writer = writer.option("checkpointLocation", opts.checkpoint_path).queryName(opts.query_name)
    return (writer.trigger(once=True) if once else _triggered(writer, opts)).start()


def sink_options(opts: JobOptions) -> dict[str, str]:
    """The Kafka sink's options for the job's output (io/sinks/kafka_sink.py)."""
    sink = {
        **opts.kafka_options(),
        "topic": opts.out_topic,
        "mode": opts.sink_mode,
        "epoch": str(opts.epoch),
        "writeFault": SINK_FAULT_HOOK,  # experiments arm mid-write kills at run time
        # A hot standby that took over numbers its outputs as its primary did (follow.py).
        "batchShiftFile": f"{opts.checkpoint_path}/{BATCH_SHIFT_FILE}",
        **opts.sink_options,
    }
    if opts.epoch_store:  # standby jobs: a zombie primary's sink is fenced
        sink.update(writeGuard=EPOCH_GUARD_HOOK, epochStore=opts.epoch_store)
    if opts.takeover_marker:  # a hot standby writes nothing before its takeover
        sink["holdUntil"] = opts.takeover_marker
    if opts.epoch_file:
        sink["epochFile"] = opts.epoch_file
    if opts.causal is not None and opts.causal.storage == "output":
        sink["causalCarrier"] = "required"
    if opts.causal is not None or opts.sink_mode in REPLAY_BY_ID:
        # Causal mode covers Spark's own nondeterminism too: a stateful operator emits its rows
        # in state-store order, which changes when a re-executed batch reloads the store. The
        # release barrier needs the same numbering in a re-run. (The sink keeps the order of
        # rows that carry determinants.)
        sink["stableOrder"] = "true"
    if opts.sink_mode in NEEDS_BROKER_TRANSACTIONS:  # the job runtime tried the broker
        sink["brokerSupportsTransactions"] = "true"
    return sink


def write_table_output(df: DataFrame, opts: JobOptions):  # noqa: ANN201 - StreamingQuery
    """The output (``key``, ``value``, ``ingest_ms`` and the lineage columns) appended to a
    lakehouse table, one commit per micro-batch; a batch the table holds is skipped, a fenced
    epoch's batch refused (io/sinks/table_target.py, lakehouse.py). The sink runs in the
    driver (``foreachBatch``), so an armed mid-write kill fires after the table commit and
    before Spark's: the re-run batch must find its commit."""
    target = TableTarget.parse(opts.table_sink or "")
    df = serialized(df, opts)
    newest = EpochStore(opts.epoch_store).current if opts.epoch_store else None
    # The app id outlives a process: a restart, a standby and a replica share the prefix.
    sink = target.sink(opts.prefix, opts.query, opts.epoch, newest)
    sink.fault = sink_write_fault

    def write(batch: DataFrame, batch_id: int) -> None:
        sink.fence = dataclasses.replace(sink.fence, epoch=opts.epoch)  # a standby took over
        sink(batch.select("key", "value", "ingest_ms"), batch_id)

    writer = (
        df.writeStream.outputMode(opts.output_mode)
        .foreachBatch(write)
        .option("checkpointLocation", opts.checkpoint_path)
        .queryName(opts.query_name)
    )
    return _triggered(writer, opts).start()


def _triggered(writer: Any, opts: JobOptions) -> Any:
    if opts.available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=opts.trigger_interval)


# The output path handed to a standby (its rehearsal and warm loop; ha sits below job).
OUTPUT = JobOutput(start=write_output, sink_options=sink_options)
