"""A team's Spark job, unchanged: it reads Kafka with ``spark.readStream.format("kafka")`` and
writes with ``writeStream.format("kafka")`` or ``foreachBatch``, and starts its own query.

The job's file stays as it is. A declaration beside it names what the toolkit needs to know::

    # teamjobs/recovery.py
    from recovery_lib.job import spark_query_job

    JOB = spark_query_job(
        "teamjobs.orders:main",      # main(spark) or main(): builds and starts the query
        name="orders",
        inputs={"bids": "orders"},   # input name -> the topic the job's code subscribes to
        output="orders_upper",       # the topic the job's code writes
    )

and runs as ``--job teamjobs.recovery:JOB``. In the job's process, Spark's Kafka reader and
writers are redirected (``KafkaRedirect``): the subscribed topics go to the launch's input
topics, the written topic to the launch's output topic, both to the launch's broker; the
streaming query gets the launch's checkpoint and name. So an experiment's reference and faulty
runs, a restart and a standby's takeover each read and write their own places, while the job's
own code runs as written.

The job writes its output itself: the project's sink modes, fence records and replicas do not
apply (``JobSpec.own_sink``). Spark's Kafka sink is at-least-once; the oracle judges the
output as plain records (no lineage ids), against the failure-free reference run.
"""

# ruff: noqa: A002 - the wrappers keep PySpark's parameter names (format=...)
from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recovery_lib.errors import JobError
from recovery_lib.job.spec import JobSpec, import_job_module
from recovery_lib.verify.contract import ConsistencyContract

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from recovery_lib.job.options import JobOptions

__all__ = ["KafkaRedirect", "SparkQuery", "spark_query_job"]

log = logging.getLogger(__name__)

# How long a job's own code may take to start its streaming query.
QUERY_START_TIMEOUT_S = 300.0


def _load_callable(ref: str) -> Callable[..., Any]:
    module_name, _, attr = ref.partition(":")
    if not attr:
        raise JobError(f"{ref!r}: name the job's function as module:function")
    fn = getattr(import_job_module(module_name), attr, None)
    if not callable(fn):
        raise JobError(f"{ref}: module {module_name} has no function {attr!r}")
    return fn


@dataclass
class KafkaRedirect:
    """Points Spark's Kafka reader and writers of this process at the launch's places.

    Args:
        topics: The job's own topic names -> the launch's (inputs and output).
        output: The launch's output topic (every Kafka write goes there).
        bootstrap: The launch's broker.
        checkpoint: The streaming query's checkpoint.
        query_name: The streaming query's name.
    """

    topics: Mapping[str, str]
    output: str
    bootstrap: str
    checkpoint: str
    query_name: str
    started: list[Any] = field(default_factory=list)  # the streaming queries started
    _saved: dict[tuple[type, str], Any] = field(default_factory=dict)

    def subscribe(self, value: str) -> str:
        """The launch's topics for the job's ``subscribe`` list."""
        mapped = []
        for topic in (t.strip() for t in value.split(",") if t.strip()):
            if topic not in self.topics:
                log.warning("the job subscribes to %s, which it did not declare: left as is", topic)
            mapped.append(self.topics.get(topic, topic))
        return ",".join(mapped)

    def install(self) -> KafkaRedirect:
        """Patch PySpark's readers and writers of this process (a job process runs one job)."""
        from pyspark.sql.readwriter import DataFrameWriter
        from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

        redirect = self
        for cls in (DataStreamReader, DataStreamWriter, DataFrameWriter):
            self._remember(cls, "format", "option", "options")
        self._remember(DataStreamWriter, "queryName")
        reader_load = self._saved[(DataStreamReader, "load")] = DataStreamReader.load
        stream_start = self._saved[(DataStreamWriter, "start")] = DataStreamWriter.start
        batch_save = self._saved[(DataFrameWriter, "save")] = DataFrameWriter.save

        def load(reader: Any, path: Any = None, format: Any = None, *a: Any, **options: Any) -> Any:
            fmt = format or getattr(reader, "_rl_format", None)
            if fmt == "kafka":
                given = {**getattr(reader, "_rl_options", {}), **options}
                for refused in ("subscribePattern", "assign"):
                    if refused in given:
                        raise JobError(
                            f"the job reads Kafka with {refused}: only subscribe (a topic list) "
                            "can be pointed at the launch's topics"
                        )
                if "subscribe" in given:
                    options["subscribe"] = redirect.subscribe(str(given["subscribe"]))
                if "startingOffsets" not in given:  # Spark's default, latest, skips a backlog
                    log.info(
                        "the job names no startingOffsets: it reads the launch's from the start"
                    )
                    options["startingOffsets"] = "earliest"
                options["kafka.bootstrap.servers"] = redirect.bootstrap
            return reader_load(reader, path, format, *a, **options)

        def start(
            writer: Any, path: Any = None, format: Any = None, *a: Any, **options: Any
        ) -> Any:
            fmt = format or getattr(writer, "_rl_format", None)
            given = {**getattr(writer, "_rl_options", {}), **options}
            if fmt == "kafka":
                options.update(redirect.kafka_write(given))
            own = given.get("checkpointLocation")
            if own and own != redirect.checkpoint:
                log.info(
                    "the job's checkpoint %s: the launch's %s instead", own, redirect.checkpoint
                )
            options["checkpointLocation"] = redirect.checkpoint
            options.pop("queryName", None)
            redirect._saved[(DataStreamWriter, "queryName")](writer, redirect.query_name)
            query = stream_start(writer, path, format, *a, **options)
            redirect.started.append(query)
            return query

        def save(writer: Any, path: Any = None, format: Any = None, *a: Any, **options: Any) -> Any:
            fmt = format or getattr(writer, "_rl_format", None)
            if fmt == "kafka":  # a foreachBatch function's write
                options.update(
                    redirect.kafka_write({**getattr(writer, "_rl_options", {}), **options})
                )
            return batch_save(writer, path, format, *a, **options)

        DataStreamReader.load = load  # type: ignore[method-assign]
        DataStreamWriter.start = start  # type: ignore[method-assign]
        DataFrameWriter.save = save  # type: ignore[method-assign]
        return self

    def kafka_write(self, given: Mapping[str, Any]) -> dict[str, str]:
        """The options a Kafka write of the job gets: the launch's topic and broker."""
        own = given.get("topic")
        if own is not None and own != self.output and own not in self.topics:
            log.warning(
                "the job writes %s, which it did not declare: to %s instead", own, self.output
            )
        return {"topic": self.output, "kafka.bootstrap.servers": self.bootstrap}

    def uninstall(self) -> None:
        for (cls, name), original in self._saved.items():
            setattr(cls, name, original)
        self._saved.clear()

    def _remember(self, cls: type, *names: str) -> None:
        """Wrap ``cls.<name>`` so that the instance keeps what it was told."""
        for name in names:
            original = self._saved[(cls, name)] = getattr(cls, name)
            setattr(cls, name, _recording(name, original))


def _recording(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if name == "format":
            self._rl_format = args[0] if args else kwargs.get("source")
        elif name == "option":
            key, value = args if len(args) == 2 else (kwargs["key"], kwargs["value"])
            self._rl_options = {**getattr(self, "_rl_options", {}), key: value}
        elif name == "options":
            self._rl_options = {**getattr(self, "_rl_options", {}), **kwargs}
        return original(self, *args, **kwargs)

    return call


@dataclass
class SparkQuery:
    """What a Spark job's build returns: the job's function, run when the runtime starts the
    query (``StartsItsQuery``), with Spark's Kafka reader and writers redirected."""

    spark: SparkSession
    run: Callable[..., Any]
    redirect: KafkaRedirect

    def start_own_query(self, opts: JobOptions, own_log: bool, events: Any = None) -> Any:
        """Run the job's function and return the streaming query it starts. A function that
        then waits for its query (``awaitTermination``) keeps doing so in a thread."""
        if own_log:
            raise JobError("mode cec needs a job whose build returns a CEC aggregate")
        self.redirect.install()
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                params = inspect.signature(self.run).parameters
                outcome["result"] = self.run(self.spark) if params else self.run()
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller
                outcome["error"] = exc

        thread = threading.Thread(target=call, name="spark-job", daemon=True)
        thread.start()
        deadline = time.monotonic() + QUERY_START_TIMEOUT_S
        while not self.redirect.started and thread.is_alive() and time.monotonic() < deadline:
            thread.join(0.05)
        if "error" in outcome:
            raise outcome["error"]
        result = outcome.get("result")
        if not self.redirect.started and hasattr(result, "start"):
            result.start()  # the function returned its writer without starting it
        if not self.redirect.started:
            raise JobError(
                f"the job's function started no streaming query within {QUERY_START_TIMEOUT_S:.0f} "
                "s: it must start one (writeStream...start()) and may return it or wait for it"
            )
        return self.redirect.started[0]


def spark_query_job(
    run: str | Callable[..., Any],
    *,
    name: str,
    inputs: Mapping[str, str],
    output: str,
    contract: ConsistencyContract | None = None,
    description: str = "",
) -> JobSpec:
    """Declare a team's unchanged Spark job (``format("kafka")`` in, ``format("kafka")`` or
    ``foreachBatch`` out) for the toolkit.

    Args:
        run: The job's function, or its ``module:function``: ``f(spark)`` or ``f()`` (which
            then takes the session with ``SparkSession.builder.getOrCreate()``). It builds and
            starts one streaming query; it may return it, its writer, or wait for it.
        name: The job's name (its checkpoint directory and its name in the metrics).
        inputs: Each input's name (what an experiment feeds, e.g. ``bids``) -> the topic the
            job's code subscribes to.
        output: The topic the job's code writes.
        contract: What every failure-free run agrees on (default: deterministic, the output
            as a multiset of records).
        description: One line for listings.

    Returns:
        The job's spec; its build runs the function with Kafka redirected to the launch's
        topics.

    Raises:
        JobError: No input is declared, or ``run`` does not name a function.
    """
    fn = _load_callable(run) if isinstance(run, str) else run

    def build(spark: SparkSession, opts: JobOptions) -> SparkQuery:
        topics = {own: opts.topic_for(input_name) for input_name, own in inputs.items()}
        topics[output] = opts.out_topic
        redirect = KafkaRedirect(
            topics=topics,
            output=opts.out_topic,
            bootstrap=opts.kafka["bootstrap.servers"],
            checkpoint=opts.checkpoint_path,
            query_name=opts.query,
        )
        return SparkQuery(spark, fn, redirect)

    return JobSpec(
        name=name,
        build=build,  # type: ignore[arg-type]
        inputs=tuple(inputs),
        contract=contract or ConsistencyContract(),
        description=description or f"Spark job {getattr(fn, '__qualname__', fn)} (unchanged)",
        own_sink=True,
    )
