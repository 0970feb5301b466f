"""A job process's launch, typed: built once by whoever starts a job (the experiment runner, the
job daemon, a pipeline), turned into argv once where the process starts (the supervisor's
command), parsed once in the job process (``JobLaunch.from_argv``, the job runtime). A
standby, a replica or a pipeline stage derives its launch with a typed method
(``as_replica``, ``as_standby`` ...), never by editing argv.

argv is the door between processes and the command line a user types
(``python -m recovery_lib.job --job mod:attr --prefix p ...``): ``to_argv`` and
``from_argv`` are each other's inverse (a property test checks it).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from recovery_lib.errors import ConfigurationError
from recovery_lib.io.sinks.modes import SINK_MODES, sink_mode


class ProcessMode(StrEnum):
    """What the job process itself runs beside native Spark: nothing, its nondeterminism
    logged and replayed (causal), or a CEC aggregate's windows kept in its own output log. On
    argv as ``--mode``, the command line people know. (A recovery mode, recovery_lib/modes,
    chooses one of these for its processes.)"""

    NATIVE = "native"
    CAUSAL = "causal"
    CEC = "cec"

    @property
    def causal(self) -> bool:
        return self is ProcessMode.CAUSAL

    @property
    def own_log(self) -> bool:
        return self is ProcessMode.CEC


class Role(StrEnum):
    """A job process's role, in its launch and in its heartbeat."""

    PRIMARY = "primary"
    STANDBY = "standby"


DEFAULT_CHECKPOINTS = ".recovery/jobs/checkpoints"
DEFAULT_TRIGGER = "0 seconds"


class LaunchRefused(ConfigurationError):
    """A launch that cannot run, with what to change."""


def parse_pairs(items: list[str], option: str, require_value: bool = False) -> dict[str, str]:
    """``name=value`` arguments (``--param``, ``--input``, ``--replay``) as a dict; raises
    ``LaunchRefused`` naming ``option`` for one without a name (or a value, if required)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or (require_value and not value):
            raise LaunchRefused(f"{option} takes name=value, got {item!r}")
        out[name] = value
    return out


@dataclass(frozen=True)
class StandbyRole:
    """A standby's watch: the primary's checkpoint to ship, its lease, the standby's storage."""

    primary_checkpoint: str
    primary_heartbeat: str
    standby_dir: str


@dataclass(frozen=True)
class JobLaunch:
    """Everything a job process is told. ``job`` is the job's module:attr; ``name`` its name,
    the checkpoint subdirectory under ``checkpoints`` (for the supervisors: not on argv, the
    process knows its job's name). ``prefix`` None: the job's default prefix."""

    job: str
    name: str = ""
    prefix: str | None = None
    inputs: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    partitions: int | None = None  # the output topic's, when the job creates it
    checkpoints: str = DEFAULT_CHECKPOINTS
    output_topic: str | None = None
    sink_mode: str = "dedup"
    sink_options: Mapping[str, str] = field(default_factory=dict)
    # A lakehouse table instead of the output topic: io/sinks/table_target.py's spelling
    # (delta:<path>, iceberg:<root>[#ns.table]).
    table_sink: str | None = None
    source_options: Mapping[str, str] = field(default_factory=dict)
    max_records: int | None = None
    trigger_interval: str = DEFAULT_TRIGGER
    available_now: bool = False
    ending_offsets: str | None = None  # JSON {topic: {partition: offset}}: a bounded run
    follow_log: str | None = None  # re-run batches with this offset log's boundaries
    causal: bool = False  # log nondeterminism and replay it (recovery_lib/causal)
    # Causal processes that compute the same streams share them (active replication):
    # streamSource=module:attr and that source's options.
    causal_options: Mapping[str, str] = field(default_factory=dict)
    own_log: bool = False  # a CEC aggregate's windows live in its output log (mode cec)
    metrics: str | None = None
    run_id: str | None = None
    heartbeat: str | None = None  # the file the driver rewrites (the supervisor's lease)
    task_retries: int = 1
    epoch_store: str | None = None  # fencing epochs (shared storage)
    standby: StandbyRole | None = None  # None: the process is a primary

    def __post_init__(self) -> None:
        if self.causal and self.own_log:
            raise LaunchRefused(
                "a launch is causal or keeps its own log (mode cec), not both: a CEC "
                "aggregate's replay reads its input again and has no nondeterminism to log"
            )
        if self.causal_options and not self.causal:
            raise LaunchRefused("--causal-option is for --mode causal")
        if self.causal_options and not self.causal_options.get("streamSource"):
            raise LaunchRefused("--causal-option needs streamSource=module:attr")
        if self.standby is not None and not self.epoch_store:
            raise LaunchRefused("a standby needs an epoch store (--epoch-store)")

    # -- the process mode ---------------------------------------------------------------------

    @property
    def process_mode(self) -> ProcessMode:
        """The ``--mode`` of argv (and the metrics store's run mode of a job run alone)."""
        if self.causal:
            return ProcessMode.CAUSAL
        return ProcessMode.CEC if self.own_log else ProcessMode.NATIVE

    @property
    def role(self) -> Role:
        return Role.STANDBY if self.standby is not None else Role.PRIMARY

    # -- derived launches ---------------------------------------------------------------------

    def replace(self, **changes: object) -> JobLaunch:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def with_process_mode(self, mode: ProcessMode | str) -> JobLaunch:
        mode = ProcessMode(mode)
        return self.replace(causal=mode.causal, own_log=mode.own_log)

    def as_primary(self, checkpoints: str, epoch_store: str) -> JobLaunch:
        """A primary under fencing: each incarnation takes a new epoch."""
        return self.replace(checkpoints=checkpoints, epoch_store=epoch_store, standby=None)

    def as_standby(self, checkpoints: str, epoch_store: str, role: StandbyRole) -> JobLaunch:
        return self.replace(checkpoints=checkpoints, epoch_store=epoch_store, standby=role)

    def as_replica(
        self,
        checkpoints: str,
        output_topic: str,
        source_options: Mapping[str, str],
        sink_options: Mapping[str, str],
        causal_options: Mapping[str, str] | None = None,
    ) -> JobLaunch:
        """One replica of an actively replicated job: its own checkpoint, the raw topic
        through the release sink, the replication's cut policy and write hooks."""
        return self.replace(
            checkpoints=checkpoints,
            output_topic=output_topic,
            sink_mode="release",
            source_options={**self.source_options, **source_options},
            sink_options={**self.sink_options, **sink_options},
            causal_options=dict(causal_options or {}) if self.causal else {},
        )

    def as_reference(self, checkpoints: str, output_topic: str) -> JobLaunch:
        """A failure-free run of the same job, read deduplicated: nothing to replay."""
        return self.replace(
            checkpoints=checkpoints,
            output_topic=output_topic,
            sink_mode="dedup",
            table_sink=None,  # a table job's reference writes its topic
            causal=False,
            causal_options={},
            own_log=False,
        )

    # -- argv ---------------------------------------------------------------------------------

    def to_argv(self) -> list[str]:
        argv = ["--job", self.job]
        if self.prefix is not None:
            argv += ["--prefix", self.prefix]
        argv += _pairs("--input", self.inputs) + _pairs("--param", self.params)
        if self.partitions:
            argv += ["--partitions", str(self.partitions)]
        argv += ["--checkpoints", self.checkpoints]
        if self.output_topic:
            argv += ["--output-topic", self.output_topic]
        argv += ["--sink-mode", self.sink_mode]
        argv += _pairs("--sink-option", self.sink_options)
        if self.table_sink:
            argv += ["--table-sink", self.table_sink]
        argv += _pairs("--source-option", self.source_options)
        if self.max_records is not None:
            argv += ["--max-records", str(self.max_records)]
        if self.trigger_interval != DEFAULT_TRIGGER:
            argv += ["--trigger-interval", self.trigger_interval]
        if self.available_now:
            argv.append("--available-now")
        if self.ending_offsets:
            argv += ["--ending-offsets", self.ending_offsets]
        if self.follow_log:
            argv += ["--follow-log", self.follow_log]
        argv += ["--mode", self.process_mode.value]
        argv += _pairs("--causal-option", self.causal_options)
        for flag, value in (
            ("--metrics", self.metrics),
            ("--run-id", self.run_id),
            ("--heartbeat", self.heartbeat),
            ("--epoch-store", self.epoch_store),
        ):
            if value:
                argv += [flag, value]
        if self.task_retries != 1:
            argv += ["--task-retries", str(self.task_retries)]
        if self.standby is not None:
            argv += [
                "--role",
                Role.STANDBY.value,
                "--primary-checkpoint",
                self.standby.primary_checkpoint,
                "--primary-heartbeat",
                self.standby.primary_heartbeat,
                "--standby-dir",
                self.standby.standby_dir,
            ]
        return argv

    @classmethod
    def from_argv(
        cls, argv: list[str], description: str = "", prefix_help: str = "", param_help: str = ""
    ) -> JobLaunch:
        """Parse a job process's argv; a refused argument exits with argparse's usage (the
        process edge), naming what to fix."""
        parser = _parser(description, prefix_help, param_help)
        args = parser.parse_args(argv)
        if Role(args.role) is Role.STANDBY and not (
            args.primary_checkpoint
            and args.primary_heartbeat
            and args.standby_dir
            and args.epoch_store
        ):
            parser.error(
                "--role standby needs --primary-checkpoint, --primary-heartbeat, "
                "--standby-dir and --epoch-store"
            )
        try:
            mode = ProcessMode(args.mode)
            return cls(
                job=args.job or "",
                prefix=args.prefix,
                inputs=parse_pairs(args.input, "--input"),
                params=parse_pairs(args.param, "--param"),
                partitions=args.partitions,
                checkpoints=args.checkpoints,
                output_topic=args.output_topic,
                sink_mode=args.sink_mode,
                sink_options=parse_pairs(args.sink_option, "--sink-option"),
                table_sink=args.table_sink,
                source_options=parse_pairs(args.source_option, "--source-option"),
                max_records=args.max_records,
                trigger_interval=args.trigger_interval,
                available_now=args.available_now,
                ending_offsets=args.ending_offsets,
                follow_log=args.follow_log,
                causal=mode.causal,
                causal_options=parse_pairs(args.causal_option, "--causal-option"),
                own_log=mode.own_log,
                metrics=args.metrics,
                run_id=args.run_id,
                heartbeat=args.heartbeat,
                task_retries=args.task_retries,
                epoch_store=args.epoch_store,
                standby=StandbyRole(
                    args.primary_checkpoint, args.primary_heartbeat, args.standby_dir
                )
                if Role(args.role) is Role.STANDBY
                else None,
            )
        except ValueError as exc:  # LaunchRefused and a malformed name=value
            parser.error(str(exc))
            raise  # unreachable: parser.error exits


def _pairs(flag: str, pairs: Mapping[str, str]) -> list[str]:
    return [arg for k, v in pairs.items() for arg in (flag, f"{k}={v}")]


def _parser(description: str, prefix_help: str, param_help: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=description or "a job on Spark Structured Streaming"
    )
    parser.add_argument("--job", default=None, help="module:attr of the job (the launcher's)")
    parser.add_argument(
        "--prefix",
        default=None,
        help=prefix_help or "topic prefix: input x is read from <prefix>.x",
    )
    parser.add_argument(
        "--input", action="append", default=[], help="input=topic: read an input from a topic"
    )
    parser.add_argument(
        "--param", action="append", default=[], help=param_help or "name=value for the job"
    )
    parser.add_argument("--partitions", type=int, default=None, help="output topic partitions")
    parser.add_argument("--checkpoints", default=DEFAULT_CHECKPOINTS)
    parser.add_argument("--output-topic", default=None)
    parser.add_argument(
        "--sink-mode",
        default="dedup",
        type=sink_mode,
        help=f"how outputs reach consumers: {', '.join(SINK_MODES)} (io/sinks/modes.py)",
    )
    parser.add_argument(
        "--table-sink",
        default=None,
        help="write the output to a lakehouse table instead of the output topic: "
        "delta:<path> or iceberg:<root>[#namespace.table] (io/sinks/table_target.py)",
    )
    parser.add_argument("--max-records", type=int, default=None)
    parser.add_argument(
        "--trigger-interval",
        default=DEFAULT_TRIGGER,
        help="processing-time trigger, e.g. '2 seconds' (default: as soon as the last ended)",
    )
    parser.add_argument(
        "--source-option",
        action="append",
        default=[],
        help="name=value passed to every input's source (a mechanism's cut policy and options)",
    )
    parser.add_argument(
        "--sink-option",
        action="append",
        default=[],
        help="name=value passed to the sink (a mechanism's commit hook, record headers)",
    )
    parser.add_argument(
        "--causal-option",
        action="append",
        default=[],
        help="name=value for causal logging (mode causal): streamSource=module:attr shares "
        "streams between processes that compute them together (active replication), the rest "
        "goes to that source",
    )
    parser.add_argument(
        "--follow-log",
        default=None,
        help="re-run batches with the boundaries of this offset log, then cut freely (the "
        "tail `recovery checkpoint rewind` moved aside: <moved_to>/offsets)",
    )
    parser.add_argument(
        "--available-now", action="store_true", help="process what is there, then stop"
    )
    parser.add_argument(
        "--ending-offsets",
        default=None,
        help='read no further than these offsets, JSON {"topic": {"0": 42}} (a bounded run)',
    )
    parser.add_argument("--metrics", default=None, help="DuckDB metrics store to write to")
    parser.add_argument(
        "--mode",
        default="native",
        choices=[m.value for m in ProcessMode],
        help="native | causal (log nondeterminism, replay it) | cec (a CEC aggregate's windows "
        "checkpointed into its output log, recovery_lib/cec)",
    )
    parser.add_argument("--run-id", default=None, help="metrics run id (the supervisor's)")
    parser.add_argument("--heartbeat", default=None, help="file the driver rewrites every second")
    parser.add_argument(
        "--task-retries",
        type=int,
        default=1,
        help="attempts per task in local mode (Spark's maxFailures)",
    )
    standby = parser.add_argument_group("standby jobs (recovery_lib/ha/standby)")
    standby.add_argument("--role", default=Role.PRIMARY.value, choices=[r.value for r in Role])
    standby.add_argument(
        "--epoch-store", default=None, help="fencing epoch directory (shared storage)"
    )
    standby.add_argument("--primary-checkpoint", default=None, help="standby: what to ship")
    standby.add_argument("--primary-heartbeat", default=None, help="standby: the lease to watch")
    standby.add_argument("--standby-dir", default=None, help="standby: its own storage")
    return parser
