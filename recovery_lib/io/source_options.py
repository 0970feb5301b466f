"""The source's options (parsed once on the driver, pickled to executors) and its unit of
work, one topic partition's offset range: what the driver's reader plans and the executors'
range reader reads (io/source.py, io/range_reader.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

from recovery_lib.io.exceptions import InvalidSourceOption
from recovery_lib.io.offsets import Offsets, parse_ending_offsets, parse_starting_offsets

HEADERS_TYPE = "array<struct<key:string,value:binary>>"
VALUE_FORMATS = {"binary": "binary", "string": "string"}
DEFAULT_DEAD_LETTER_TOPIC = "recovery.deadletter"
# Where a batch's records are read (readPath): by a task's Python worker per partition, or by the
# source's driver process while it plans the batch (io/driver_read.py).
READ_PATHS = frozenset({"executors", "driver"})


def source_schema(value_format: str = "binary") -> str:
    return (
        f"key binary, value {VALUE_FORMATS[value_format]}, topic string, partition int, "
        f"offset bigint, timestamp timestamp, headers {HEADERS_TYPE}"
    )


@dataclass(frozen=True)
class SourceOptions:
    topics: list[str]
    kafka: dict[str, str] = field(repr=False)  # holds SASL passwords: not shown
    starting: str | Offsets = "earliest"
    max_records: int | None = None
    cut_policy: str = "free"
    value_format: str = "binary"
    on_bad_record: str = "deadletter"
    dead_letter_topic: str = DEFAULT_DEAD_LETTER_TOPIC
    audit_path: str | None = None
    parked: str | None = None  # the file of parked records (io/parked.py): never delivered
    ending: Offsets | None = None
    read_path: str = "executors"
    raw: dict[str, str] = field(default_factory=dict, repr=False)  # kafka.* options too

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        topics = [t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()]
        if not topics:
            raise InvalidSourceOption(
                "option 'subscribe' is required: a comma-separated list of topics, "
                ".option('subscribe', 'bids,persons')"
            )
        kafka = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
        if "bootstrap.servers" not in kafka:
            from recovery_lib.kafka.clients import client_config

            kafka = {**client_config(), **kafka}
        max_records = None
        if opts.get("maxoffsetspertrigger"):
            try:
                max_records = int(opts["maxoffsetspertrigger"])
            except ValueError:
                max_records = 0
            if max_records <= 0:
                raise InvalidSourceOption(
                    f"maxOffsetsPerTrigger must be a positive integer, got "
                    f"{opts['maxoffsetspertrigger']!r}"
                )
        value_format = opts.get("valueformat", "binary").lower()
        if value_format not in VALUE_FORMATS:
            raise InvalidSourceOption(
                f"valueFormat {value_format!r} is not supported; use one of {sorted(VALUE_FORMATS)}"
            )
        on_bad = opts.get("onbadrecord", "deadletter").lower()
        if on_bad not in ("deadletter", "fail"):
            raise InvalidSourceOption(f"onBadRecord must be 'deadletter' or 'fail', got {on_bad!r}")
        read_path = opts.get("readpath", "executors").lower()
        if read_path not in READ_PATHS:
            raise InvalidSourceOption(
                f"readPath must be one of {sorted(READ_PATHS)}, got {read_path!r}"
            )
        return cls(
            topics=topics,
            kafka=kafka,
            starting=parse_starting_offsets(opts.get("startingoffsets", "earliest"), topics),
            max_records=max_records,
            cut_policy=_policy_name(opts.get("cutpolicy", "free")),
            value_format=value_format,
            on_bad_record=on_bad,
            dead_letter_topic=opts.get("deadlettertopic", DEFAULT_DEAD_LETTER_TOPIC),
            audit_path=opts.get("auditpath"),
            parked=opts.get("parkedrecords"),
            ending=parse_ending_offsets(opts.get("endingoffsets"), topics),
            read_path=read_path,
            raw=opts,
        )


@dataclass(frozen=True)
class KafkaRange(InputPartition):
    """One Spark task: records ``[start, end)`` of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "value", None)


def _policy_name(value: str) -> str:
    """Built-in names are case-insensitive; a ``module:attr`` keeps its case."""
    return value if ":" in value else value.lower()
