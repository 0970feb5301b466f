"""The determinant log: durable storage of determinants, read back when a batch is re-executed.

``DeterminantLog`` is the one interface, with two storages:

``KafkaDeterminantLog`` (storage "kafka")   a single-partition determinant topic, one record per
    flushed run of one stream, produced synchronously before the output that depends on it
    leaves the causal operator. Works whatever lies between the operator and the sink.
``OutputCarriedLog`` (storage "output")     determinants piggybacked on the output records
    (Clonos 5.5): the causal operator puts them in a binary column, the sink writes them as a
    header of the first output record that depends on them, and pins the task's records to one
    Kafka partition so nothing that depends on them can be visible before them. No extra
    topic and no extra synchronous write; but the column must reach the sink (no aggregation
    or shuffle in between: the sink refuses to start otherwise), and a replay scans the
    output topic.

Truncation does not delete records (tansu has no DeleteRecords): it moves a low-water mark,
kept in the job's causal state directory next to the Spark checkpoint, below which no reader
looks.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery_lib.causal.determinants import (
    CorruptDeterminants,
    Determinant,
    DeterminantRun,
    MissingDeterminants,
    StreamKey,
    assemble,
    decode_runs,
    encode_runs,
)
from recovery_lib.errors import ConfigurationError
from recovery_lib.files import write_atomic
from recovery_lib.io.client_cache import cached
from recovery_lib.io.hooks import load_hook
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.io.sinks.fences import FenceFilter
from recovery_lib.io.sinks.ids import DET_HEADER
from recovery_lib.kafka.control_topic import ControlTopic
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged
from recovery_lib.kafka.headers import EPOCH_HEADER
from recovery_lib.settings import get_settings

STORAGES = ("kafka", "output")
ON_MISSING = ("fail", "recompute")


@dataclass(frozen=True)
class CausalConfig:
    """Everything an executor needs to log and replay determinants (pickled into closures).

    A job in mode causal finds it as ``opts.causal`` (``JobOptions.enable_causal`` builds it)
    and passes it to the ``recovery_lib.causal`` wrappers.

    Attributes:
        job: Whose determinants these are (the output topic's name).
        state_dir: The causal state (the truncation mark), next to the Spark checkpoint;
            shared storage on a cluster.
        topic: Storage "kafka": the determinant topic (default ``<job>.determinants``).
        kafka: Kafka client properties (may hold SASL passwords; left out of ``repr``).
        storage: "kafka" (a determinant topic) or "output" (piggybacked on the output
            records).
        output_topic: Storage "output": the sink topic the determinants ride in.
        on_missing: A replayed stream's log is unreadable: "fail" the task, or "recompute"
            live (at-least-once for that batch).
        epoch: The fencing epoch the determinants are logged in.
        epoch_store: Fencing (standby takeover): refuse to log once a newer epoch exists.
        write_guard: ``module:attr`` of the ``recovery_lib.io.hooks`` write-guard factory that
            enforces ``epoch_store`` (the sink's guard, so the log is fenced like the
            outputs).
        epoch_file: A standby builds its query before it knows its epoch: it writes the
            epoch here at takeover.
        source: Several processes compute the same streams (active replication):
            ``module:attr`` of a factory ``(config, key, log) -> DeterminantSource``.
        source_options: That factory's options.

    Raises:
        ConfigurationError: An unknown ``storage`` or ``on_missing``; a shared ``source``
            without storage "kafka"; storage "output" without ``output_topic``.
    """

    job: str
    state_dir: str
    topic: str = ""
    kafka: dict[str, str] = field(default_factory=dict, repr=False)
    storage: str = "kafka"
    output_topic: str = ""
    on_missing: str = "fail"
    epoch: int = 0
    epoch_store: str = ""
    write_guard: str = ""
    epoch_file: str = ""
    source: str = ""
    source_options: dict[str, str] = field(default_factory=dict)

    @property
    def current_epoch(self) -> int:
        """The epoch to log in: ``epoch_file``'s number once it holds one, else ``epoch``."""
        if self.epoch_file:
            try:
                return int(Path(self.epoch_file).read_text().strip())
            except (OSError, ValueError):
                return self.epoch
        return self.epoch

    def __post_init__(self) -> None:
        if self.storage not in STORAGES:
            raise ConfigurationError(
                f"storage must be one of {STORAGES}, got {self.storage!r}; set "
                "RECOVERY_CAUSAL_STORAGE to one of them"
            )
        if self.on_missing not in ON_MISSING:
            raise ConfigurationError(
                f"on_missing must be one of {ON_MISSING}, got {self.on_missing!r}; set "
                "RECOVERY_CAUSAL_ON_MISSING to one of them"
            )
        if not self.topic:
            object.__setattr__(self, "topic", f"{self.job}.determinants")
        if self.source and self.storage != "kafka":
            raise ConfigurationError(
                "a shared determinant source needs storage 'kafka': the writers of one stream "
                "meet in the determinant topic; set RECOVERY_CAUSAL_STORAGE=kafka"
            )
        if self.storage == "output" and not self.output_topic:
            raise ConfigurationError(
                "storage='output' needs output_topic: set it to the topic the sink writes"
            )


class DeterminantLog(ABC):
    """Stream markers: before a stream's first determinants are written, a marker file says
    "this stream may have logged determinants". A task opening a stream with a marker is a
    re-execution (task retry, stage recomputed after an executor loss, driver restart: the
    marker does not depend on Spark's attempt numbers, which restart at 0 in a new stage
    attempt) and reads the log; a task without one runs live without reading anything."""

    def __init__(self, config: CausalConfig) -> None:
        self.config = config

    def _marker(self, key: StreamKey) -> Path:
        return (
            Path(self.config.state_dir)
            / "streams"
            / str(key.batch)
            / (f"{key.scope}-{key.partition}")
        )

    def may_have(self, key: StreamKey) -> bool:
        return self._marker(key).exists()

    def begin(self, key: StreamKey) -> None:
        marker = self._marker(key)
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()

    def forget_markers(self, committed_batch: int) -> None:
        root = Path(self.config.state_dir) / "streams"
        if root.exists():
            for batch_dir in root.iterdir():
                if batch_dir.name.isdigit() and int(batch_dir.name) <= committed_batch:
                    shutil.rmtree(batch_dir, ignore_errors=True)

    @abstractmethod
    def append(self, run: DeterminantRun) -> None:
        """Buffer a run of determinants (not yet durable)."""

    @abstractmethod
    def flush(self) -> None:
        """Make every appended run durable; raise if any could not be written."""

    def runs(self, key: StreamKey) -> list[DeterminantRun]:
        """Every run (and claim) of a stream logged so far, in log order, read anew."""
        mark = TruncationMark.load(self.config.state_dir)
        try:
            return list(self._index(mark).get(key, []))
        except CorruptDeterminants:
            raise
        except Exception as exc:  # the topic is gone or unreachable
            raise MissingDeterminants(f"cannot read {self.where}: {exc}") from exc

    def read(self, key: StreamKey) -> list[Determinant]:
        """The logged prefix of a stream (empty if nothing was logged)."""
        mark = TruncationMark.load(self.config.state_dir)
        if key.batch <= mark.batch:
            raise MissingDeterminants(
                f"batch {key.batch} is being re-executed but its determinants were truncated "
                f"(the log keeps batches after {mark.batch}); truncate only committed batches"
            )
        try:
            runs = self._index(mark).get(key, [])
        except CorruptDeterminants:
            raise
        except Exception as exc:  # the topic is gone or unreachable
            raise MissingDeterminants(f"cannot read {self.where}: {exc}") from exc
        return assemble(runs)

    @property
    def where(self) -> str:
        """Where the determinants are kept (for error messages)."""
        return type(self).__name__

    def _index(self, mark: TruncationMark) -> dict[StreamKey, list[DeterminantRun]]:
        """Every stream's runs from the truncation mark on (storages override this)."""
        raise NotImplementedError

    @abstractmethod
    def truncate(self, committed_batch: int) -> int:
        """Forget streams of batches <= ``committed_batch``; returns the new low-water mark."""


# -- the truncation mark ----------------------------------------------------------------------


@dataclass(frozen=True)
class TruncationMark:
    batch: int  # streams of this batch and before are gone
    offset: int  # readers of the determinant topic start here
    offsets: tuple[tuple[int, int], ...] = ()  # storage "output": (partition, start) pairs

    @classmethod
    def load(cls, state_dir: str | os.PathLike[str]) -> TruncationMark:
        path = Path(state_dir) / "truncation.json"
        try:
            data = json.loads(path.read_text())
            offsets = tuple(sorted((int(p), int(o)) for p, o in data.get("offsets", {}).items()))
            return cls(int(data["batch"]), int(data["offset"]), offsets)
        except FileNotFoundError:
            return cls(-1, 0)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptDeterminants(f"truncation mark {path} is unreadable: {exc}") from exc

    def save(self, state_dir: str | os.PathLike[str]) -> None:
        path = Path(state_dir) / "truncation.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(
            path,
            json.dumps(
                {
                    "batch": self.batch,
                    "offset": self.offset,
                    "offsets": {str(p): o for p, o in self.offsets},
                }
            ),
        )


# -- Kafka ------------------------------------------------------------------------------------

_index_lock = threading.Lock()
# Per process: (topic, from offset) -> (end offset, {key: [runs]}); extended incrementally.
_indexes: dict[tuple[str, int], tuple[int, dict[StreamKey, list[DeterminantRun]], FenceFilter]] = {}
_readers: dict[str, ControlTopic] = {}  # per process: one reader of each determinant topic


class KafkaDeterminantLog(DeterminantLog):
    def __init__(self, config: CausalConfig) -> None:
        super().__init__(config)
        self._pending: list[DeterminantRun] = []
        self._errors: list[str] = []

    @property
    def where(self) -> str:
        return f"determinant log {self.config.topic}"

    def _producer(self):  # noqa: ANN202
        from confluent_kafka import Producer

        conf = {**self.config.kafka, "enable.idempotence": "true", "linger.ms": "0"}
        return cached("producer:determinants", conf, lambda c: Producer(c))

    def append(self, run: DeterminantRun) -> None:
        if run.determinants or run.claim:
            self._pending.append(run)

    def _check_fence(self) -> None:
        if not (self.config.epoch_store and self.config.write_guard):
            return
        factory = load_hook(self.config.write_guard, "write_guard")
        options = {"epochStore": self.config.epoch_store, "epoch": str(self.config.current_epoch)}
        guard = factory(options)
        if guard is not None:
            guard.check("determinant log write")

    def flush(self) -> None:
        if not self._pending:
            return
        self._check_fence()
        for run in self._pending:
            self.begin(run.key)  # marker first: a crash after it only costs a replay read
        producer = self._producer()
        errors: list[str] = []

        def delivered(err, _msg) -> None:  # noqa: ANN001
            if err is not None:
                errors.append(str(err))

        for run in self._pending:
            key, value = run.encode()
            producer.produce(
                self.config.topic,
                value=value,
                key=key,
                partition=0,
                headers=[(EPOCH_HEADER, str(run.epoch).encode())],
                on_delivery=delivered,
            )
        # As long as the sinks wait: a broker that stalls within the outage budget is waited
        # for, not a failed task.
        remaining = producer.flush(get_settings().sink_flush_timeout_s)
        if remaining or errors:
            raise RecordsNotAcknowledged(
                f"determinant log {self.config.topic}: {remaining} records undelivered, "
                f"errors {errors[:3]}; outputs depending on them are not released (check the "
                "broker is up)"
            )
        self._pending.clear()

    def _index(self, mark: TruncationMark) -> dict[StreamKey, list[DeterminantRun]]:
        """Every run from the mark on, read incrementally by one reader per process."""
        cache_key = (self.config.topic, mark.offset)
        with _index_lock:
            end, index, fence = _indexes.get(
                cache_key, (mark.offset, defaultdict(list), FenceFilter())
            )
            reader = _readers.get(self.config.topic)
            if reader is None:
                reader = _readers[self.config.topic] = ControlTopic(
                    self.config.topic, self.config.kafka
                )
            reader.position = max(end, reader.low_watermark())

            def add(msg: Any) -> None:
                headers = {k: (v or b"") for k, v in msg.headers() or ()}
                epoch = headers.get(EPOCH_HEADER)
                # A standby's takeover fences the log: a zombie primary's later runs drop out.
                if fence.accept(self.config.topic, 0, int(epoch) if epoch else None, headers):
                    run = DeterminantRun.decode(msg.key(), msg.value())
                    index[run.key].append(run)

            end = reader.fold_messages(add)
            _indexes[cache_key] = (end, index, fence)
            return index

    def truncate(self, committed_batch: int) -> int:
        """Low-water mark = the first record of any batch after ``committed_batch``."""

        mark = TruncationMark.load(self.config.state_dir)
        if committed_batch <= mark.batch:
            return mark.offset
        new_offset = None
        end = mark.offset
        for record in read_topic(self.config.topic, self.config.kafka, start={0: mark.offset}):
            end = record.offset + 1
            try:
                batch = StreamKey.decode(record.key).batch
            except CorruptDeterminants:
                continue  # unreadable records are not worth keeping for replay
            if batch > committed_batch and new_offset is None:
                new_offset = record.offset
        TruncationMark(committed_batch, new_offset if new_offset is not None else end).save(
            self.config.state_dir
        )
        self.forget_markers(committed_batch)
        return new_offset if new_offset is not None else end


# -- piggybacked on the output records ----------------------------------------------------------

# Per process: (topic, start offsets) -> (ends per partition, {key: [runs]}).
_carried_indexes: dict[
    tuple[str, tuple[tuple[int, int], ...]],
    tuple[dict[int, int], dict[StreamKey, list[DeterminantRun]]],
] = {}


class OutputCarriedLog(DeterminantLog):
    """``flush`` makes runs ready to ride; the causal operator takes them with
    ``take_carrier`` and attaches them to its next non-empty output batch. They are durable
    when the sink's record carrying them is acknowledged, which precedes every record that
    depends on them in the same Kafka partition."""

    def __init__(self, config: CausalConfig) -> None:
        super().__init__(config)
        self._pending: list[DeterminantRun] = []
        self._ready: list[DeterminantRun] = []

    @property
    def where(self) -> str:
        return f"determinants carried in {self.config.output_topic}"

    def append(self, run: DeterminantRun) -> None:
        if run.determinants:
            self._pending.append(run)

    def flush(self) -> None:
        for run in self._pending:
            self.begin(run.key)  # marker first: a crash after it only costs a replay read
        self._ready.extend(self._pending)
        self._pending.clear()

    def take_carrier(self) -> bytes | None:
        """The ready runs as one header value (None when there are none)."""
        if not self._ready:
            return None
        blob = encode_runs(self._ready)
        self._ready.clear()
        return blob

    def _carriers(self, start: dict[int, int]):  # noqa: ANN202 - Iterator[(record, runs)]

        for record in read_topic(self.config.output_topic, self.config.kafka, start=start):
            blob = dict(record.headers).get(DET_HEADER)
            yield record, (decode_runs(blob) if blob is not None else None)

    def _index(self, mark: TruncationMark) -> dict[StreamKey, list[DeterminantRun]]:
        cache_key = (self.config.output_topic, mark.offsets)
        with _index_lock:
            ends, index = _carried_indexes.get(cache_key, (dict(mark.offsets), defaultdict(list)))
            for record, runs in self._carriers(dict(ends)):
                for run in runs or ():
                    index[run.key].append(run)
                ends[record.partition] = record.offset + 1
            _carried_indexes[cache_key] = (ends, index)
            return index

    def truncate(self, committed_batch: int) -> int:
        """Per partition, the low-water mark moves to the first carrier of a later batch."""
        mark = TruncationMark.load(self.config.state_dir)
        if committed_batch <= mark.batch:
            return sum(o for _, o in mark.offsets)
        new: dict[int, int] = {}
        ends: dict[int, int] = dict(mark.offsets)
        for record, runs in self._carriers(dict(mark.offsets)):
            ends[record.partition] = record.offset + 1
            if record.partition in new or not runs:
                continue
            if any(run.key.batch > committed_batch for run in runs):
                new[record.partition] = record.offset
        offsets = {**ends, **new}
        TruncationMark(committed_batch, 0, tuple(sorted(offsets.items()))).save(
            self.config.state_dir
        )
        self.forget_markers(committed_batch)
        return sum(offsets.values())


def open_log(config: CausalConfig) -> DeterminantLog:
    if config.storage == "kafka":
        return KafkaDeterminantLog(config)
    if config.storage == "output":
        return OutputCarriedLog(config)
    raise ConfigurationError(
        f"unknown determinant storage {config.storage!r}; choose one of {', '.join(STORAGES)}"
    )
