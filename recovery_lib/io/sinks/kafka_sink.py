"""Kafka sink (a Python streaming data-source writer): ``writeStream.format("rlkafka")``.

Every record carries headers ``rl.id`` (deterministic, see ids.py) and ``rl.epoch``. A
delivery error fails the task; nothing is dropped silently. Modes:

- at_least_once: produce and flush; a re-executed batch writes its records again.
- dedup: the same, and consumers read through ``DedupReader`` (first id wins).
- release: the release barrier (release.py): records leave as soon as a task computed them,
  and a re-run drops those released before, so a plain consumer sees each once. Task
  partition p writes Kafka partition p; the replay must be deterministic (the job runtime
  checks).
- two_phase: a commit-gated two-phase commit on any broker (commit_gate.py): records are
  tagged with their task attempt and visible to ``CommittedReader`` only when the driver's
  commit record for their batch arrives.
- transactional: one Kafka transaction per task (transactional.id = sink id + partition),
  task partition p on Kafka partition p, and a re-run task skips what its partition
  committed before (the release barrier, read_committed); needs a broker whose
  read_committed consumers hide aborted records (Apache Kafka). The embedded tansu does
  not, so it is refused unless ``brokerSupportsTransactions=true``.

Options (``SinkOptions`` holds them parsed): topic (required), mode, epoch (written as header
``rl.epoch``, default 0), writeGuard (a hook ``module:attr``, io/hooks.py: a task refuses to
write, and drops what it queued, once the guard says a newer writer took over; fencing epochs
pass ``epochStore`` to theirs),
writeFault (a hook ``module:attr`` for fault injection inside the write), sinkId (id prefix when
several queries share a topic), brokerSupportsTransactions, causalCarrier (``required``: the
job piggybacks determinants on its outputs, refuse to start without their column),
stableOrder (``true``: sort a task's rows by key and value before numbering them, so that a
re-executed batch gives each output the id it had; not with piggybacked determinants, whose
carrier must stay first), batchId (a batch write only, see below), holdUntil (a hot standby's
takeover marker: until the file exists the writer writes nothing, the primary has delivered
those batches), epochFile (a file holding the epoch to write, read by each task: a hot
standby's changes at its takeover), batchShiftFile (a file holding a number added to Spark's
batch id in output ids: a hot standby ran fewer, larger batches than its primary before its
takeover, and its ids go on from the primary's; 0 while the file does not exist),
``kafka.<property>``.

Input columns: value (string or binary, required), key (string or binary), partition (int),
headers (``array<struct<key:string,value:binary>>``), rl_determinants (binary: piggybacked
determinants, written as header ``rl.det``; a task's records then all go to one partition, in
order, so none is visible before the determinants it depends on).

``batch.write.format("rlkafka").option("batchId", id)`` inside ``foreachBatch`` writes a
streaming batch the sink cannot take directly (an aggregate in update mode: Spark's Python
stream writers take append and complete only), with the ids, modes and commit of batch ``id``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from recovery_lib.io.client_cache import cached
from recovery_lib.io.exceptions import InvalidSinkOption, SinkDeliveryError, WriterFenced
from recovery_lib.io.hooks import CommitHook, WriteFault, WriteGuard, load_hook, writer_epoch
from recovery_lib.io.sinks.commit_gate import COMMIT_HEADER, TXN_HEADER, commit_record
from recovery_lib.io.sinks.ids import DET_COLUMN, DET_HEADER, EPOCH_HEADER, ID_HEADER, output_id
from recovery_lib.io.sinks.modes import (
    HOLDABLE_MODES,
    NEEDS_BROKER_TRANSACTIONS,
    REPLAY_BY_ID,
    SINK_MODES,
)
from recovery_lib.io.sinks.release import ReleaseBarrier, Released
from recovery_lib.io.task import task_info
from recovery_lib.io.worker_timing import record_first_call
from recovery_lib.kafka.outage import ride_out
from recovery_lib.settings import get_settings

__all__ = [
    "SinkOptions",
]

log = logging.getLogger(__name__)

HEADERS_SPARK_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
ALLOWED_COLUMNS = {
    "value": (StringType(), BinaryType()),
    "key": (StringType(), BinaryType()),
    "partition": (IntegerType(),),
    "headers": (HEADERS_SPARK_TYPE,),
    DET_COLUMN: (BinaryType(),),
}


_CAST_HINTS = {
    "value": "serialize it, e.g. df.select(to_json(struct('*')).alias('value'))",
    "key": "df.withColumn('key', col('key').cast('string'))",
    "partition": "df.withColumn('partition', col('partition').cast('int'))",
    "headers": "build array(struct(lit('name').alias('key'), <binary>.alias('value')))",
}


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options (``.option(name, value)`` on ``format("rlkafka")``), parsed; the
    module docstring says what each does. A job passes its own through
    ``JobOptions.sink_options``.

    Attributes:
        topic: Option ``topic`` (required): the output topic.
        kafka: Options ``kafka.<property>``: Kafka client properties (may hold SASL
            credentials; left out of ``repr``).
        mode: Option ``mode``, one of ``recovery_lib.io.sinks.modes.SINK_MODES``.
        epoch: Option ``epoch``: the fencing epoch written as header ``rl.epoch``.
        sink_id: Option ``sinkId``: the id prefix when several queries share a topic.
        carrier_required: Option ``causalCarrier=required``: the job piggybacks
            determinants on its outputs; refuse to start without their column.
        stable_order: Option ``stableOrder=true``: number a task's rows in key and value
            order, so a re-executed batch gives each output the id it had.
        write_guard: Option ``writeGuard``: ``module:attr`` of a ``recovery_lib.io.hooks``
            write-guard factory (fencing).
        write_fault: Option ``writeFault``: ``module:attr`` of a write-fault factory (fault
            injection inside the write).
        commit_hook: Option ``commitHook``: ``module:attr`` of a commit-hook factory.
        record_headers: Option ``recordHeaders``: ``module:attr`` of a factory of headers
            added to each batch's records.
        hook_options: Every option, as the hook factories are given them.
        batch_id: Option ``batchId``: a batch write inside ``foreachBatch``, the streaming
            batch it writes.
        hold_until: Option ``holdUntil``: a hot standby's takeover marker; nothing is written
            before the file exists.
        epoch_file: Option ``epochFile``: a file holding the epoch to write, read by each
            task (a hot standby's changes at its takeover).
        batch_shift_file: Option ``batchShiftFile``: a file holding a number added to
            Spark's batch id in output ids (a hot standby's, after its takeover).
    """

    topic: str
    kafka: dict[str, str] = field(repr=False)
    mode: str = "at_least_once"
    epoch: int = 0
    sink_id: str = ""
    carrier_required: bool = False
    stable_order: bool = False
    write_guard: str = ""
    write_fault: str = ""
    commit_hook: str = ""
    record_headers: str = ""
    hook_options: tuple[tuple[str, str], ...] = ()
    batch_id: int | None = None
    hold_until: str = ""
    epoch_file: str = ""
    batch_shift_file: str = ""

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """The options as the writer was given them.

        Args:
            options: Option name -> value, names in any case. Without
                ``kafka.bootstrap.servers``, the settings' client configuration.

        Returns:
            The parsed options.

        Raises:
            InvalidSinkOption: No topic; an unknown mode; ``transactional`` without
                ``brokerSupportsTransactions=true``; an epoch or batch id that is not a
                number; ``holdUntil`` with a mode that commits.
        """
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        topic = opts.get("topic", "").strip()
        if not topic:
            raise InvalidSinkOption("option 'topic' is required: .option('topic', 'results')")
        mode = opts.get("mode", "at_least_once").lower().replace("-", "_")
        if mode not in SINK_MODES:
            raise InvalidSinkOption(f"mode {mode!r} is unknown; choose one of {list(SINK_MODES)}")
        if mode in NEEDS_BROKER_TRANSACTIONS and opts.get("brokersupportstransactions") != "true":
            raise InvalidSinkOption(
                "mode=transactional needs a broker whose read_committed consumers hide aborted "
                "records (Apache Kafka); the embedded tansu broker does not. Use mode=dedup, or "
                "set brokerSupportsTransactions=true against a real Kafka cluster"
            )
        try:
            epoch = int(opts.get("epoch", "0"))
        except ValueError:
            raise InvalidSinkOption(f"epoch must be an integer, got {opts['epoch']!r}") from None
        if opts.get("holduntil") and mode not in HOLDABLE_MODES:
            raise InvalidSinkOption(
                f"holdUntil (a hot standby) with mode {mode}: a held batch writes nothing, "
                "which a commit record or transaction of its own would contradict; use mode "
                "dedup or release"
            )
        try:
            batch_id = int(opts["batchid"]) if "batchid" in opts else None
        except ValueError:
            raise InvalidSinkOption(
                f"batchId must be the streaming batch's id, got {opts['batchid']!r}"
            ) from None
        kafka = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
        if "bootstrap.servers" not in kafka:
            from recovery_lib.kafka.clients import client_config

            kafka = {**client_config(), **kafka}
        return cls(
            topic=topic,
            kafka=kafka,
            mode=mode,
            epoch=epoch,
            sink_id=opts.get("sinkid", ""),
            carrier_required=opts.get("causalcarrier", "") == "required",
            stable_order=opts.get("stableorder", "false") == "true",
            write_guard=opts.get("writeguard", ""),
            write_fault=opts.get("writefault", ""),
            commit_hook=opts.get("commithook", ""),
            record_headers=opts.get("recordheaders", ""),
            hook_options=tuple(sorted(opts.items())),
            batch_id=batch_id,
            hold_until=opts.get("holduntil", ""),
            epoch_file=opts.get("epochfile", ""),
            batch_shift_file=opts.get("batchshiftfile", ""),
        )

    def batch_shift(self) -> int:
        """What output ids add to Spark's batch id.

        Returns:
            The batch shift file's number, else 0.
        """
        return read_batch_shift(self.batch_shift_file)

    def held(self) -> bool:
        """Whether the writer is a hot standby before its takeover (then it writes nothing).

        Returns:
            True while ``hold_until`` names a file that does not exist.
        """
        return bool(self.hold_until) and not Path(self.hold_until).exists()

    def current_epoch(self) -> int:
        """The epoch records carry.

        Returns:
            The epoch file's when there is one (a hot standby took over), else ``epoch``.
        """
        return writer_epoch({"epoch": str(self.epoch), "epochFile": self.epoch_file})

    def guard(self) -> WriteGuard | None:
        """The write guard, built from ``write_guard`` with the options.

        Returns:
            The guard, or None without one.
        """
        if not self.write_guard:
            return None
        return load_hook(self.write_guard, "writeGuard")(dict(self.hook_options))

    def fault(self) -> WriteFault | None:
        """The write fault, built from ``write_fault``.

        Returns:
            The fault hook, or None without one.
        """
        return load_hook(self.write_fault, "writeFault")() if self.write_fault else None

    def on_commit(self) -> CommitHook | None:
        """The commit hook, built from ``commit_hook`` with the options.

        Returns:
            The hook, or None without one.
        """
        if not self.commit_hook:
            return None
        return load_hook(self.commit_hook, "commitHook")(dict(self.hook_options))

    def batch_headers(self, batch_id: int) -> list[tuple[str, bytes]]:
        """Headers added to every record of a batch, from the ``record_headers`` hook.

        Args:
            batch_id: The batch.

        Returns:
            (name, value) pairs; none without a hook.
        """
        if not self.record_headers:
            return []
        return load_hook(self.record_headers, "recordHeaders")(dict(self.hook_options)).for_batch(
            batch_id
        )


def validate_sink_schema(
    schema: StructType, carrier_required: bool = False, mode: str = "at_least_once"
) -> None:
    names = {f.name: f.dataType for f in schema.fields}
    if mode in REPLAY_BY_ID and "partition" in names:
        raise InvalidSinkOption(
            f"mode={mode} writes task partition p to Kafka partition p, so that output ids "
            "increase along every partition (the release barrier reads the last one back); "
            "drop the 'partition' column, or use mode=dedup or two_phase to choose partitions"
        )
    if carrier_required and DET_COLUMN not in names:
        raise InvalidSinkOption(
            f"this job piggybacks determinants on its outputs (causal storage 'output') but the "
            f"sink's input has no {DET_COLUMN!r} column, so outputs would leave without the "
            f"determinants they depend on. Keep the column from the causal operator to the sink "
            f"(df.select(..., *causal.carried(df))), or use causal storage 'kafka' when an "
            f"aggregation or shuffle lies between them"
        )
    if DET_COLUMN in names and "partition" in names:
        raise InvalidSinkOption(
            f"columns 'partition' and {DET_COLUMN!r} cannot be combined: piggybacked "
            "determinants need the sink to keep a task's records in one partition"
        )
    if "value" not in names:
        raise InvalidSinkOption(
            f"the Kafka sink needs a 'value' column (string or binary); got columns "
            f"{list(names)}. Build one, e.g. df.select(to_json(struct('*')).alias('value'))"
        )
    for name, dtype in names.items():
        allowed = ALLOWED_COLUMNS.get(name)
        if allowed is None:
            raise InvalidSinkOption(
                f"column {name!r} cannot be written to Kafka; the sink takes only "
                f"{sorted(ALLOWED_COLUMNS)}. Drop it or fold it into 'value' (to_json(struct(...)))"
            )
        kinds = [t.simpleString() for t in allowed]
        if dtype.simpleString() not in kinds:  # nullability does not matter
            hint = _CAST_HINTS.get(
                name, f"df.withColumn('{name}', col('{name}').cast('{kinds[0]}'))"
            )
            raise InvalidSinkOption(
                f"column {name!r} has type {dtype.simpleString()}, which is not valid for the "
                f"Kafka sink; it must be {' or '.join(kinds)}. Fix: {hint}"
            )


def stable_order(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A task's rows sorted by (key, value): output ids (batch, partition, seq) then depend on
    which rows the task writes, not on the order the operator before the sink emitted them in.
    A stateful operator's output order follows its state store's iteration order, which
    differs after the store is reloaded from its checkpoint (a re-executed batch)."""
    whole = list(batches)
    if not whole:
        return iter(())
    table = pa.Table.from_batches(whole)
    keys = [(name, "ascending") for name in ("key", "value") if name in table.column_names]
    return iter(table.sort_by(keys).combine_chunks().to_batches())


def check_replayed(released: Released, key: Any, value: Any, partition: int) -> bool:
    """A re-run skips the rows its first run released, by number: that is right only if it
    numbers the same rows the same way. Its row at the last released number must be the
    released record; if not, the rows around it are lost or sent twice, and the job log says
    so (the oracle's verdict is the judge; this names the batch and partition)."""

    def raw(item: Any) -> bytes | None:
        return item.encode() if isinstance(item, str) else item

    same = raw(key) == released.key and raw(value) == released.value
    if not same:
        log.error(
            "release barrier: batch %d partition %d: the re-run's row %d is not the record "
            "released under that number (key %r, value %.120r; released: key %r, value "
            "%.120r). The re-run does not reproduce the first run's rows or their order "
            "(nondeterminism outside causal logging, or input read differently), so outputs "
            "near it are lost or duplicated",
            released.batch, partition, released.seq, raw(key), raw(value), released.key,
            released.value,
        )  # fmt: skip
    return same


@dataclass
class SinkCommit(WriterCommitMessage):
    batch_id: int
    partition: int
    attempt: int
    rows: int
    dropped: int = 0  # release: re-computed rows the barrier did not send again
    txn: str = ""  # two_phase: the task attempt's transaction token


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, options.carrier_required, options.mode)
        self.options = options
        self.columns = [f.name for f in schema.fields]
        # Made on the driver when the query starts: tells this run's transactions from an
        # earlier run's (two_phase), since Spark's task attempt ids restart with the driver.
        self.run_token = uuid.uuid4().hex[:12]
        self._commit_hook: CommitHook | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_commit_hook"] = None  # driver-only, may hold clients
        return state

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        task = task_info()
        record_first_call("write", task)
        batch_id = self.options.batch_id
        if batch_id is None:
            batch_id = int(task["batch_id"])
        batch_id += self.options.batch_shift()
        partition = int(task["partition"])
        attempt = int(task["attempt"])
        if self.options.held():  # the primary delivered this batch: compute it, write nothing
            dropped = sum(batch.num_rows for batch in iterator)
            # Open the producer the released writer will write with: its connection and the
            # idempotent producer's id are ready at a standby's takeover (a new one cost the
            # takeover's first batch ~1 s per task on 2 cores, docs/standby.md).
            cached("producer:sink", self._producer_config(), _new_producer)
            return SinkCommit(batch_id, partition, attempt, 0, dropped=dropped)
        if self.options.stable_order and DET_COLUMN not in self.columns:
            iterator = stable_order(iterator)
        mode = self.options.mode
        if mode in REPLAY_BY_ID:
            write = self._write_release if mode == "release" else self._write_transactional
            rows, dropped = write(iterator, batch_id, partition)
            return SinkCommit(batch_id, partition, attempt, rows, dropped=dropped)
        elif mode == "two_phase":
            token = f"{self.run_token}.{task['attempt_id']}"
            rows = self._write(iterator, batch_id, partition, [(TXN_HEADER, token.encode())])
            return SinkCommit(batch_id, partition, attempt, rows, txn=token)
        else:
            rows = self._write(iterator, batch_id, partition)
        return SinkCommit(batch_id, partition, attempt, rows)

    def _producer_config(self) -> dict[str, Any]:
        return {
            **self.options.kafka,
            "enable.idempotence": "true",
            "linger.ms": "5",
            # Delivery callbacks only for failures: a Python call per success costs throughput.
            "delivery.report.only.error": True,
            "batch.num.messages": "10000",
            "queue.buffering.max.messages": "500000",
        }

    def _write(
        self,
        iterator: Iterator[pa.RecordBatch],
        batch_id: int,
        partition: int,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> int:
        producer = cached("producer:sink", self._producer_config(), _new_producer)
        return self._produce_all(producer, iterator, batch_id, partition, headers=headers)

    def _write_release(
        self, iterator: Iterator[pa.RecordBatch], batch_id: int, partition: int
    ) -> tuple[int, int]:
        """Rows released before (the topic's last id of this partition) are not sent again."""
        settings = get_settings()
        producer = cached("producer:sink", self._producer_config(), _new_producer)
        # This process's queued records of an earlier attempt must be in the log before the
        # barrier reads it, or they would be released twice.
        if producer.flush(settings.sink_flush_timeout_s):
            raise SinkDeliveryError(
                f"batch {batch_id} partition {partition}: earlier records of this process were "
                "not acknowledged, so the release barrier cannot tell what was released"
            )
        last, skip = self._release_point(producer, batch_id, partition, self.options.kafka)
        try:
            rows = self._produce_all(
                producer, iterator, batch_id, partition, skip=skip, pin=partition, released=last
            )
        except WriterFenced:
            raise
        except BaseException:
            producer.flush(settings.sink_flush_timeout_s)  # released is released: say so
            raise
        return rows, rows if skip is None else min(skip, rows)

    def _released_rows(
        self, producer: Any, batch_id: int, partition: int, config: Mapping[str, str]
    ) -> int | None:
        """Rows of this task already in its partition (release.py); None: all of them."""
        return self._release_point(producer, batch_id, partition, config)[1]

    def _release_point(
        self, producer: Any, batch_id: int, partition: int, config: Mapping[str, str]
    ) -> tuple[Released | None, int | None]:
        """The last output released in this task's partition and how many of this batch's
        rows it says were released (None: all of them)."""
        last = self._last_released(producer, partition, config)
        return last, last.skip_for(batch_id) if last is not None else 0

    def _last_released(
        self, producer: Any, partition: int, config: Mapping[str, str]
    ) -> Released | None:
        """The last output of this sink in its partition (release.py)."""
        topic = self.options.topic
        # A broker that stalls (a pause, a network fault) is waited for up to the outage
        # budget, as the source does: a write task that gave up after one request timeout
        # failed the batch and cost the job a restart.
        what = f"release barrier of {topic}/{partition}"
        count = ride_out(lambda: partition_count(producer, topic), what)
        if partition >= count:
            raise InvalidSinkOption(
                f"mode={self.options.mode} writes task partition p to Kafka partition p, and "
                f"this query's output stage has a task {partition} while {topic} has {count} "
                f"partitions. Create {topic} with more partitions (--partitions), or coalesce "
                f"the output to {count} partitions (df.coalesce({count}))"
            )
        settings = get_settings()
        barrier = cached(
            "consumer:release-barrier",
            config,
            lambda c: ReleaseBarrier(c, settings.kafka_request_timeout_s),
        )
        return ride_out(lambda: barrier.last_released(topic, partition, self.options.sink_id), what)

    def _write_transactional(
        self, iterator: Iterator[pa.RecordBatch], batch_id: int, partition: int
    ) -> tuple[int, int]:
        """One Kafka transaction per task, on Kafka partition = task partition. A re-run
        task (a retry, a batch re-executed after a driver restart) first reads the partition's
        last committed id (read_committed) and skips what committed before: Spark commits a
        task's transaction at the task's end, not at the batch's, so this is what keeps a
        re-executed batch from committing its outputs twice.

        Each task opens its own producer (transactional.id = sink id + partition) and its
        ``init_transactions`` comes before the barrier's read: it fences any older attempt
        and ends its open transaction, so what the barrier reads is final. (A producer cached
        per Python worker was fenced whenever another worker had written the partition since,
        and failed its next task: measured on q3, one restart per few batches.)"""
        config = {
            **self._producer_config(),
            "transactional.id": f"{self.options.sink_id or self.options.topic}-p{partition}",
        }
        timeout = get_settings().sink_flush_timeout_s
        what = f"transactional writer of {self.options.topic}/{partition}"
        producer = ride_out(lambda: _new_transactional_producer(config), what)
        committed = {**self.options.kafka, "isolation.level": "read_committed"}
        last, skip = self._release_point(producer, batch_id, partition, committed)
        producer.begin_transaction()
        try:
            rows = self._produce_all(
                producer, iterator, batch_id, partition, skip=skip, pin=partition, released=last
            )
            producer.commit_transaction(timeout)
        except BaseException:
            with contextlib.suppress(Exception):  # fenced or broken: the next task inits anew
                producer.abort_transaction(timeout)
            raise
        return rows, rows if skip is None else min(skip, rows)

    def _produce_all(
        self,
        producer: Any,
        iterator: Iterator[pa.RecordBatch],
        batch_id: int,
        partition: int,
        headers: list[tuple[str, bytes]] | None = None,
        skip: int | None = 0,
        pin: int | None = None,
        released: Released | None = None,
    ) -> int:
        """Produce every row; the first ``skip`` rows (all, if None) are numbered and not
        sent. ``pin``: the Kafka partition of every record. ``released``: the last record
        released, which the row of its number must match (``check_replayed``). Returns the
        rows numbered."""
        failures: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                failures.append(str(err))

        fault = self.options.fault()
        guard = self.options.guard()
        headers = [*(headers or ()), *self.options.batch_headers(batch_id)]
        self._guard_check(guard, producer, batch_id, partition)
        epoch = str(self.options.current_epoch()).encode()
        prefix = self.options.sink_id
        topic = self.options.topic
        seq = 0
        for batch in iterator:
            cols = {name: batch.column(name).to_pylist() for name in batch.schema.names}
            values = cols["value"]
            keys = cols.get("key")
            parts = cols.get("partition")
            extra_headers = cols.get("headers")
            carriers = cols.get(DET_COLUMN)
            if pin is not None:
                parts = [pin] * len(values)
            elif carriers is not None:  # one partition, in order: carriers precede dependents
                parts = [pinned_partition(producer, topic, partition)] * len(values)
            produce = producer.produce
            for i, value in enumerate(values):
                if skip is None or seq < skip:
                    if released is not None and released.batch == batch_id and seq == released.seq:
                        check_replayed(released, keys[i] if keys else None, value, partition)
                    seq += 1
                    continue
                record_headers = [
                    (ID_HEADER, output_id(batch_id, partition, seq, prefix).encode()),
                    (EPOCH_HEADER, epoch),
                    *headers,
                ]
                if extra_headers is not None and extra_headers[i]:
                    record_headers.extend((h["key"], h["value"]) for h in extra_headers[i])
                if carriers is not None and carriers[i] is not None:
                    record_headers.append((DET_HEADER, carriers[i]))
                key = keys[i] if keys is not None else None
                part = parts[i] if parts is not None and parts[i] is not None else -1
                while True:
                    try:
                        produce(topic, value, key, part, on_delivery, headers=record_headers)
                        break
                    except BufferError:
                        producer.poll(0.05)
                seq += 1
                if fault is not None and fault.should_fire(batch_id, seq):
                    producer.flush(get_settings().sink_flush_timeout_s)
                    fault.fire()
            producer.poll(0)
            self._guard_check(guard, producer, batch_id, partition)
        self._guard_check(guard, producer, batch_id, partition)
        remaining = producer.flush(get_settings().sink_flush_timeout_s)
        if remaining or failures:
            raise SinkDeliveryError(
                f"batch {batch_id} partition {partition}: {len(failures)} records failed and "
                f"{remaining} were not acknowledged by "
                f"{self.options.kafka.get('bootstrap.servers')} "
                f"(first error: {failures[0] if failures else 'timeout'}); Spark will retry the "
                "task. Check that the broker is up and the topic exists"
            )
        return seq

    @staticmethod
    def _guard_check(
        guard: WriteGuard | None, producer: Any, batch_id: int, partition: int
    ) -> None:
        """Stop a zombie: the guard refuses -> drop what is still queued and fail."""
        if guard is None:
            return
        try:
            guard.check(f"sink write (batch {batch_id}, partition {partition})", batch_id)
        except WriterFenced:
            producer.purge(in_queue=True, in_flight=False)
            raise

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are already acknowledged by the broker when a task succeeds; two_phase
        makes them visible now, with a commit record in every partition (on the driver).
        Then the commit hook, if any (a checkpoint protocol's channel record)."""
        record_first_call("commit")
        if self.options.mode == "two_phase":
            self._commit_two_phase(messages, batchId)
        if self.options.commit_hook:
            if self._commit_hook is None:
                self._commit_hook = self.options.on_commit()
            self._commit_hook.committed(batchId)

    def _commit_two_phase(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        tokens = [m.txn for m in messages if isinstance(m, SinkCommit) and m.txn]
        settings = get_settings()
        producer = cached("producer:commit", self._producer_config(), _new_producer)
        topic = self.options.topic
        value = commit_record(batchId, tokens, self.options.sink_id)
        headers = [(COMMIT_HEADER, str(batchId).encode())]
        for part in range(partition_count(producer, topic)):
            producer.produce(topic, value, None, part, headers=headers)
        if producer.flush(settings.sink_flush_timeout_s):
            raise SinkDeliveryError(
                f"the commit record of batch {batchId} was not acknowledged by "
                f"{self.options.kafka.get('bootstrap.servers')}; the batch fails and is re-run"
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo outside transactional mode: consumers dedup by id."""


BATCH_SHIFT_FILE = "batch_shift"  # in a query's checkpoint directory (shipped with it)


def read_batch_shift(path: str | Path) -> int:
    """The shift in a batch shift file (0 when there is none): JSON ``{"shift": n,
    "from_batch": b}`` (b: the first own batch it applied to at the takeover that wrote it)."""
    if not path:
        return 0
    try:
        return int(json.loads(Path(path).read_text())["shift"])
    except FileNotFoundError:
        return 0


class KafkaBatchWriter(DataSourceArrowWriter):
    """One streaming batch written from ``foreachBatch`` (option ``batchId``): the stream
    writer's tasks, ids and commit, with the batch id the option names."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        if options.batch_id is None:
            raise InvalidSinkOption(
                "a batch write of rlkafka writes one streaming batch: call it in foreachBatch "
                "with .option('batchId', batch_id), so that a re-run batch gets its ids again"
            )
        self.batch_id = options.batch_id
        self.stream = KafkaStreamWriter(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return self.stream.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.stream.commit(messages, self.batch_id)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.stream.abort(messages, self.batch_id)


_partition_counts: dict[str, int] = {}


def partition_count(producer: Any, topic: str) -> int:
    count = _partition_counts.get(topic)
    if count is None:
        meta = producer.list_topics(topic, timeout=get_settings().kafka_request_timeout_s)
        count = len(meta.topics[topic].partitions) or 1
        _partition_counts[topic] = count
    return count


def pinned_partition(producer: Any, topic: str, task_partition: int) -> int:
    """The Kafka partition all records of a Spark task go to when they carry determinants."""
    return task_partition % partition_count(producer, topic)


def _new_producer(config: dict[str, str]) -> Any:
    from confluent_kafka import Producer

    return Producer(config)


def _new_transactional_producer(config: dict[str, str]) -> Any:
    from confluent_kafka import Producer

    producer = Producer(config)
    producer.init_transactions(get_settings().sink_flush_timeout_s)
    return producer
