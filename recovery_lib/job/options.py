"""What a running job is told: where its inputs and output are, its checkpoint, its sink mode,
its mode (native or causal) and the fencing epoch. Built from the command line by
``recovery_lib.job.runner``; defaults run on the embedded broker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from recovery_lib.causal.log import CausalConfig
from recovery_lib.kafka.clients import client_config
from recovery_lib.runtime.launch import LaunchRefused, parse_pairs

__all__ = ["JobOptions", "input_topic", "parse_pairs"]


def input_topic(name: str, prefix: str, inputs: Mapping[str, str]) -> str:
    """The topic a job's input ``name`` is read from: ``inputs[name]`` if given, else
    ``<prefix>.<name>`` (``name`` without a prefix)."""
    if name in inputs:
        return inputs[name]
    return f"{prefix}.{name}" if prefix else name


@dataclass
class JobOptions:
    """What a running job is told; ``build(spark, opts)`` gets it.

    A job reads its inputs' topics (``topic_for``), its params (``param``) and, in mode
    causal, ``causal``; the runtime reads the rest. Defaults run on the embedded broker.

    Attributes:
        query: The job's name: the checkpoint subdirectory and the query's name in Spark.
        prefix: Input ``x`` is read from ``<prefix>.x`` unless ``inputs`` names its topic
            (``x`` without a prefix; NexMark's generator names its topics by the same rule).
        partitions: The output topic's partitions when the job creates it.
        checkpoint_dir: The directory holding the job's checkpoint (``checkpoint_path``).
        output_topic: The output topic (default ``out_topic``'s rule).
        dead_letter_topic: Where unreadable input records go (default ``dlq_topic``'s rule).
        sink_mode: The Kafka sink's mode (``recovery_lib.io.sinks.modes.SINK_MODES``).
        output_mode: "append", or "update": the output is a running aggregate
            (``JobSpec.output_mode``); each batch writes the rows it changed, through
            ``foreachBatch`` (``write_output``).
        available_now: Process what the inputs hold, then stop.
        trigger_interval: Spark's processing-time trigger ("0 seconds": each batch as soon
            as the last ended).
        max_records_per_batch: At most this many input records per micro-batch.
        ending_offsets: JSON ``{topic: {partition: offset}}``: a bounded run stops there.
        watermark_delay: How late an event may come (Spark's ``withWatermark``).
        window_s: NexMark's sliding windows: their size in seconds.
        slide_s: NexMark's sliding windows: their slide in seconds.
        q12_window_s: NexMark Q12's processing-time window in seconds.
        kafka: Kafka client properties (may hold secrets; left out of ``repr``). Empty:
            the settings' client configuration.
        inputs: Input name -> topic, overriding the prefix rule.
        params: The job's own ``--param name=value``.
        causal: Set in mode causal: where nondeterminism is logged. Pass it to the
            ``recovery_lib.causal`` wrappers.
        source_options: A mechanism's own source options (a pipeline's checkpoint protocol:
            cut policy, record headers), given to every input as they are.
        sink_options: A mechanism's own sink options (a commit hook, record headers), given
            to the sink as they are (``recovery_lib.io.sinks.kafka_sink.SinkOptions``).
        table_sink: The output goes to this lakehouse table instead of the output topic,
            spelled as ``recovery_lib.io.sinks.table_target.TableTarget.parse`` reads it.
        epoch: Standby jobs: the fencing epoch the sink writes with.
        epoch_store: Standby jobs: the epoch store the sink checks.
        follow_log: A standby replays its primary's batches from this shipped offset-log
            tail.
        takeover_marker: A hot standby runs its query before its takeover: until this file
            exists it follows only batches the primary committed and writes nothing.
        epoch_file: A hot standby reads its sink's epoch from this file once it took over.
        parked_file: The job's parked input records (default: ``parked_path``).
        stream_name: The query's name in Spark when it is not ``query``: a stage of a
            pipeline hosted with others in one Spark application.
        schema_store: Where the writers record the output's Spark type for the oracle
            (``recovery_lib.verify.schema``); None: not recorded.
    """

    query: str = "q1"
    prefix: str = "nexmark"
    partitions: int = 4
    checkpoint_dir: str = ".recovery/nexmark/checkpoints"
    output_topic: str | None = None
    dead_letter_topic: str | None = None
    sink_mode: str = "dedup"
    output_mode: str = "append"
    available_now: bool = False
    trigger_interval: str = "0 seconds"
    max_records_per_batch: int | None = None
    ending_offsets: str | None = None
    watermark_delay: str = "5 seconds"
    window_s: int = 10
    slide_s: int = 2
    q12_window_s: int = 10
    kafka: dict[str, str] = field(default_factory=dict, repr=False)
    inputs: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    causal: CausalConfig | None = None
    source_options: dict[str, str] = field(default_factory=dict)
    sink_options: dict[str, str] = field(default_factory=dict)
    table_sink: str | None = None
    epoch: int = 0
    epoch_store: str | None = None
    follow_log: str | None = None
    takeover_marker: str | None = None
    epoch_file: str | None = None
    parked_file: str | None = None
    stream_name: str | None = None
    schema_store: str | None = None

    def __post_init__(self) -> None:
        if not self.kafka:
            self.kafka = client_config()

    @property
    def query_name(self) -> str:
        """The streaming query's name in Spark (its listeners tell its events by it)."""
        return self.stream_name or self.query

    @property
    def checkpoint_path(self) -> str:
        """The job's checkpoint: ``<checkpoint_dir>/<query>``."""
        return f"{self.checkpoint_dir}/{self.query}"

    def enable_causal(self, on_missing: str = "fail", storage: str = "kafka") -> CausalConfig:
        """Turn on causal logging for this job: determinants in ``<output topic>.determinants``
        (or piggybacked on the output records), the causal state next to the Spark checkpoint.

        Args:
            on_missing: A re-execution whose determinants cannot be read: "fail" the task, or
                "recompute" live (at-least-once for that batch).
            storage: "kafka" (a determinant topic) or "output" (on the output records).

        Returns:
            The configuration, also set as ``causal``.

        Raises:
            ConfigurationError: ``on_missing`` or ``storage`` is not one of the above.
        """
        self.causal = CausalConfig(
            job=self.out_topic,
            state_dir=f"{self.checkpoint_path}.causal",
            kafka=dict(self.kafka),
            on_missing=on_missing,
            storage=storage,
            output_topic=self.out_topic,
        )
        return self.causal

    @property
    def out_topic(self) -> str:
        """The output topic: ``output_topic``, else ``<prefix>.out.<query>`` (``<query>.out``
        without a prefix)."""
        if self.output_topic:
            return self.output_topic
        return f"{self.prefix}.out.{self.query}" if self.prefix else f"{self.query}.out"

    @property
    def dlq_topic(self) -> str:
        """The dead-letter topic: ``dead_letter_topic``, else ``<prefix>.deadletter``
        (``recovery.deadletter`` without a prefix)."""
        if self.dead_letter_topic:
            return self.dead_letter_topic
        return f"{self.prefix}.deadletter" if self.prefix else "recovery.deadletter"

    def topic_for(self, name: str) -> str:
        """The topic input ``name`` is read from.

        Args:
            name: One of the job's inputs (``JobSpec.inputs``).

        Returns:
            ``inputs[name]`` if given, else ``<prefix>.<name>`` (``name`` without a prefix).
        """
        return input_topic(name, self.prefix, self.inputs)

    def param(self, name: str) -> str:
        """The job's param ``name`` (``--param name=value``, or a service's).

        Args:
            name: One of ``JobSpec.params``.

        Returns:
            Its value.

        Raises:
            LaunchRefused: The launch did not give it.
        """
        try:
            return self.params[name]
        except KeyError:
            raise LaunchRefused(
                f"job {self.query} needs --param {name}=<value> (given: {sorted(self.params)})"
            ) from None

    @property
    def parked_path(self) -> str:
        """The job's parked input records (io/parked.py), beside its checkpoint."""
        return self.parked_file or f"{self.checkpoint_path}.parked.json"

    def kafka_options(self) -> dict[str, str]:
        """The Kafka client properties as Spark source options.

        Returns:
            ``kafka`` with each key prefixed by ``kafka.``.
        """
        return {f"kafka.{k}": v for k, v in self.kafka.items()}
