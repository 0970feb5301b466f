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
    """``query`` is the job's name: the checkpoint subdirectory and the query name in Spark.
    Input ``x`` is read from ``inputs[x]`` if given, else ``<prefix>.x`` (``x`` without a
    prefix; NexMark's generator names its topics by the same rule). ``partitions``: the output
    topic's partitions when the job creates it."""

    query: str = "q1"
    prefix: str = "nexmark"
    partitions: int = 4
    checkpoint_dir: str = ".recovery/nexmark/checkpoints"
    output_topic: str | None = None
    dead_letter_topic: str | None = None
    sink_mode: str = "dedup"
    # "update": the output is a running aggregate (JobSpec.output_mode); each batch writes the
    # rows it changed, through foreachBatch (frames.write_output).
    output_mode: str = "append"
    available_now: bool = False
    trigger_interval: str = "0 seconds"
    max_records_per_batch: int | None = None
    ending_offsets: str | None = None  # JSON {topic: {partition: offset}}: a bounded run
    watermark_delay: str = "5 seconds"
    window_s: int = 10
    slide_s: int = 2
    q12_window_s: int = 10
    kafka: dict[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    inputs: dict[str, str] = field(default_factory=dict)  # input name -> topic (overrides)
    params: dict[str, str] = field(default_factory=dict)  # the job's own --param name=value
    causal: CausalConfig | None = None  # set in mode "causal": nondeterminism is logged
    # A mechanism's own source / sink options (a pipeline's checkpoint protocol: cut policy,
    # commit hook, record headers), given to every input and to the sink as they are.
    source_options: dict[str, str] = field(default_factory=dict)
    sink_options: dict[str, str] = field(default_factory=dict)
    # The output goes to this lakehouse table instead of the output topic (TableTarget.parse).
    table_sink: str | None = None
    # Standby jobs (recovery_lib/ha/standby): the fencing epoch the sink writes with and the epoch
    # store it checks; a standby replays its primary's batches from this shipped offset-log tail.
    epoch: int = 0
    epoch_store: str | None = None
    follow_log: str | None = None
    # A hot standby (ha/standby/process.py) runs its query before its takeover: until this
    # marker file exists it follows only batches the primary committed and writes nothing;
    # its sink's epoch is then read from ``epoch_file``.
    takeover_marker: str | None = None
    epoch_file: str | None = None
    parked_file: str | None = None  # default: beside the checkpoint (parked_path)
    # The query's name in Spark when it is not ``query``: a stage of a pipeline hosted with
    # others in one Spark application (pipeline/host.py), whose queries need names of their own.
    stream_name: str | None = None
    # Where the writers record the output's Spark type (verify/schema.py SchemaStore; None:
    # not recorded), for the oracle.
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
        return f"{self.checkpoint_dir}/{self.query}"

    def enable_causal(self, on_missing: str = "fail", storage: str = "kafka") -> CausalConfig:
        """Causal logging for this job: determinants in ``<output topic>.determinants`` (or
        piggybacked on the output records), the causal state next to the Spark checkpoint."""
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
        if self.output_topic:
            return self.output_topic
        return f"{self.prefix}.out.{self.query}" if self.prefix else f"{self.query}.out"

    @property
    def dlq_topic(self) -> str:
        if self.dead_letter_topic:
            return self.dead_letter_topic
        return f"{self.prefix}.deadletter" if self.prefix else "recovery.deadletter"

    def topic_for(self, name: str) -> str:
        """The topic input ``name`` is read from."""
        return input_topic(name, self.prefix, self.inputs)

    def param(self, name: str) -> str:
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
        return {f"kafka.{k}": v for k, v in self.kafka.items()}
