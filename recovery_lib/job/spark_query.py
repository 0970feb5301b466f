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
from recovery_lib.kafka.clients import spark_kafka_options
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


# Writers that leave nothing in a place of the team's (everything else is refused: an
# experiment's or a standby's run would write into production).
HARMLESS_FORMATS = frozenset({"kafka", "noop", "console", "memory"})


@dataclass
class KafkaRedirect:
    """Points Spark's Kafka reader and writers of this process at the launch's places.

    Args:
        topics: The job's own topic names -> the launch's (inputs and output).
        output: The launch's output topic (every Kafka write goes there).
        client: The launch's Kafka client settings as Spark's Kafka options
            (``kafka.bootstrap.servers``, ``kafka.security.protocol``, SASL and TLS).
        checkpoint: The streaming query's checkpoint.
        query_name: The streaming query's name.
    """

    topics: Mapping[str, str]
    output: str
    client: Mapping[str, str]
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

    def kafka_read(self, given: Mapping[str, Any]) -> dict[str, str]:
        """The options a Kafka read of the job gets: the launch's topics and client settings,
        from the start of its topics (a run's input is there before its query starts; the
        checkpoint decides where a restart resumes)."""
        lowered = {k.lower(): v for k, v in given.items()}
        for refused in ("subscribepattern", "assign"):
            if refused in lowered:
                raise JobError(
                    f"the job reads Kafka with {refused}: only subscribe (a topic list) can be "
                    "pointed at the launch's topics"
                )
        options = {**self.client, "startingOffsets": "earliest"}
        if lowered.get("startingoffsets", "earliest") != "earliest":
            log.warning(
                "the job starts from %s: the launch reads from the start",
                lowered["startingoffsets"],
            )
        if "subscribe" in lowered:
            options["subscribe"] = self.subscribe(str(lowered["subscribe"]))
        return options

    def kafka_write(self, given: Mapping[str, Any]) -> dict[str, str]:
        """The options a Kafka write of the job gets: the launch's topic and client settings."""
        own = {k.lower(): v for k, v in given.items()}.get("topic")
        if own is not None and own != self.output and own not in self.topics:
            log.warning(
                "the job writes %s, which it did not declare: to %s instead", own, self.output
            )
        return {**self.client, "topic": self.output}

    def install(self) -> KafkaRedirect:
        """Patch PySpark's readers and writers of this process (a job process runs one job)."""
        from pyspark.sql.readwriter import DataFrameWriter
        from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

        if getattr(DataStreamWriter.start, "_rl_redirect", None) is not None:
            raise JobError("Spark's readers and writers are already redirected in this process")
        redirect = self
        for cls in (DataStreamReader, DataStreamWriter, DataFrameWriter):
            self._remember(cls, "format", "option", "options")
        load_of = self._saved[(DataStreamReader, "load")] = DataStreamReader.load
        start_of = self._saved[(DataStreamWriter, "start")] = DataStreamWriter.start
        save_of = self._saved[(DataFrameWriter, "save")] = DataFrameWriter.save
        name_of = DataStreamWriter.queryName

        def load(reader: Any, *args: Any, **kwargs: Any) -> Any:
            call = _Call(load_of, reader, args, kwargs)
            if call.format(reader) == "kafka":
                call.options.update(redirect.kafka_read(call.given(reader)))
            return call.run()

        def start(writer: Any, *args: Any, **kwargs: Any) -> Any:
            call = _Call(start_of, writer, args, kwargs)
            fmt = call.format(writer)
            given = call.given(writer)
            if fmt == "kafka":
                call.options.update(redirect.kafka_write(given))
            elif fmt not in HARMLESS_FORMATS and call.named.get("path") is not None:
                raise JobError(
                    f"the job's query writes format {fmt} to {call.named['path']}: a run of the "
                    "toolkit would write there too; only Kafka writes go to the launch's places"
                )
            own = given.get("checkpointLocation")
            if own and own != redirect.checkpoint:
                log.info("the job's checkpoint %s: the launch's %s", own, redirect.checkpoint)
            call.options["checkpointLocation"] = redirect.checkpoint
            call.named["queryName"] = None
            name_of(writer, redirect.query_name)
            query = call.run()
            redirect.started.append(query)
            return query

        def save(writer: Any, *args: Any, **kwargs: Any) -> Any:
            call = _Call(save_of, writer, args, kwargs)
            fmt = call.format(writer)
            if fmt == "kafka":  # e.g. a foreachBatch function's write
                call.options.update(redirect.kafka_write(call.given(writer)))
            elif fmt not in HARMLESS_FORMATS:
                raise JobError(
                    f"the job writes format {fmt} from a batch: a run of the toolkit would "
                    "write into the team's place too; only Kafka writes go to the launch's"
                )
            return call.run()

        start._rl_redirect = self  # type: ignore[attr-defined]
        DataStreamReader.load = load  # type: ignore[method-assign]
        DataStreamWriter.start = start  # type: ignore[method-assign]
        DataFrameWriter.save = save  # type: ignore[method-assign]
        return self

    def uninstall(self) -> None:
        for (cls, name), original in self._saved.items():
            setattr(cls, name, original)
        self._saved.clear()

    def _remember(self, cls: type, *names: str) -> None:
        """Wrap ``cls.<name>`` so that the instance keeps what it was told."""
        for name in names:
            original = self._saved[(cls, name)] = getattr(cls, name)
            setattr(cls, name, _recording(name, original))


class _Call:
    """A call of PySpark's ``load``/``start``/``save``, its arguments bound by name, so that
    the redirect changes the format's options and named arguments wherever the job put them."""

    def __init__(self, original: Callable[..., Any], this: Any, args: Any, kwargs: Any) -> None:
        bound = inspect.signature(original).bind(this, *args, **kwargs)
        self.original, self.this = original, this
        self.named = {k: v for k, v in bound.arguments.items() if k not in ("self", "options")}
        self.options: dict[str, Any] = dict(bound.arguments.get("options", {}))

    def format(self, this: Any) -> str | None:
        fmt = self.named.get("format") or getattr(this, "_rl_format", None)
        return str(fmt).lower() if fmt is not None else None

    def given(self, this: Any) -> dict[str, Any]:
        """Every option the job set: before the call and in it."""
        return {**getattr(this, "_rl_options", {}), **self.options}

    def run(self) -> Any:
        return self.original(self.this, **self.named, **self.options)


def _recording(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs).arguments
        if name == "format":
            self._rl_format = bound.get("source")
        elif name == "option":
            self._rl_options = {**getattr(self, "_rl_options", {}), bound["key"]: bound["value"]}
        elif name == "options":
            self._rl_options = {**getattr(self, "_rl_options", {}), **bound.get("options", {})}
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
                outcome["result"] = self.run(self.spark) if _takes_spark(self.run) else self.run()
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


def _takes_spark(fn: Callable[..., Any]) -> bool:
    """Whether the job's function takes the session: a first parameter named spark, or one
    without a default (``main(argv=None)`` takes none)."""
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        return False
    return params[0].name == "spark" or params[0].default is inspect.Parameter.empty


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
            client=spark_kafka_options(opts.kafka),
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
