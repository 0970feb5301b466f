"""One shard of a CEC aggregate: the open windows of the keys that map to one output partition,
and the log records (R, G_open, G_check) it writes there, in order.

A shard sees the subsequence of input tuples whose keys it owns, in input order (partition by
partition within a micro-batch, offsets ascending). Its ``position`` (input partition -> next
offset) therefore always describes a prefix: every own tuple below it has been applied, none
above. Each record carries the position its state reflects, which is what makes replay exact.
"""

from __future__ import annotations

import heapq
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recovery_lib.cec.exceptions import InconsistentReplay, KeySpansPartitions
from recovery_lib.cec.policy import CheckpointPolicy, CheckpointSlices
from recovery_lib.cec.records import LogRecord, RecordKind
from recovery_lib.cec.windows import (
    Accumulator,
    CountWindows,
    TimeWindows,
    WindowKind,
    count_window_id,
    count_window_partition,
    time_window_id,
    time_window_start,
)
from recovery_lib.verify.schema import OutputSchema

if TYPE_CHECKING:
    from recovery_lib.cec.recovery import EventualCheckpoint

Emit = Callable[[LogRecord], None]
# partition, offset, key, value, event ms, ingest ms
InputTuple = tuple[int, int, str, float, int, int]


def result_value(
    key: str, window: str, acc: Accumulator, aggregate: str, span: tuple[int, int] | None
) -> bytes:
    """A closed window's result as consumers read it (the same bytes in mode native)."""
    value: dict[str, object] = {
        "key": key,
        "window": window,
        "count": acc.count,
        aggregate: acc.result(aggregate),
    }
    if span is not None:
        value["start"], value["end"] = span
    return json.dumps(value, separators=(",", ":")).encode()


def result_schema(aggregate: str, timed: bool) -> OutputSchema:
    """The Spark type of ``result_value``'s values (a CEC job's declared output schema: its
    writer serializes them itself, so no run records one)."""
    fields = {"key": "string", "window": "string", "count": "long"}
    if aggregate != "count":
        fields[aggregate] = "double"
    if timed:
        fields |= {"start": "long", "end": "long"}
    return OutputSchema.declared(fields)


class OpenWindow:
    __slots__ = ("id", "key", "acc", "footprint", "seq", "start", "end", "partition")

    def __init__(
        self, wid: str, key: str, start: int = 0, end: int = 0, partition: int = -1
    ) -> None:
        self.id = wid
        self.key = key
        self.acc = Accumulator()
        self.footprint: dict[int, int] = {}  # position of its newest footprint (t_i)
        self.seq = 0  # log sequence of that footprint
        self.start = start
        self.end = end
        self.partition = partition  # count windows: the input partition of the key


@dataclass
class ShardStats:
    """What the dashboard and the benchmarks read of a shard."""

    results: int = 0
    opens: int = 0
    checks: int = 0
    late: int = 0
    replay_applied: int = 0
    replay_skipped: int = 0


@dataclass
class AggregateShard:
    """Windows of one output partition. ``emit`` receives records in log order."""

    kind: WindowKind
    aggregate: str
    emit: Emit
    input_partitions: tuple[int, ...]
    policy: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    slices: CheckpointSlices | None = None
    # Open windows, the one with the oldest footprint first (the next to G_check).
    windows: OrderedDict[str, OpenWindow] = field(default_factory=OrderedDict)
    position: dict[int, int] = field(default_factory=dict)
    marks: dict[int, int] = field(default_factory=dict)  # newest event time per input partition
    seq: int = 0  # log sequence of the next record (its offset when the shard owns the partition)
    stats: ShardStats = field(default_factory=ShardStats)
    # After a recovery: the log's end position; own tuples below it are already reflected.
    replayed_to: dict[int, int] = field(default_factory=dict)
    ingest_ms: int = 0  # of the tuple being applied
    _by_key: dict[str, str] = field(default_factory=dict)  # count windows: key -> open window
    _ends: list[tuple[int, str]] = field(default_factory=list)  # time windows: (end, id) heap

    def __post_init__(self) -> None:
        if self.slices is None:
            self.slices = CheckpointSlices(self.policy)

    # -- foreground path -------------------------------------------------------------------
    def process_batch(self, rows: Iterable[InputTuple]) -> None:
        """Apply own input tuples in input order, checkpointing in between (background path).

        Right after a recovery the rows must include every own tuple below the log's end
        (the replay from T and the batch Spark re-runs): those are applied first, each only to
        windows whose footprint lacks it, so every window is back at its state at t_c before
        any new tuple moves the watermark or a G_check records a window."""
        if self.replayed_to:
            below, above = [], []
            for row in rows:
                (below if row[1] < self.replayed_to.get(row[0], 0) else above).append(row)
            for row in below:
                self._replay(*row[:5])
            self.replayed_to = {}
            rows = above
        every = self.policy.check_every
        for i, row in enumerate(rows, 1):
            self.ingest_ms = row[5]
            self.process(*row[:5])
            if i % every == 0:
                self.checkpoint()
        self.checkpoint()

    def process(self, partition: int, offset: int, key: str, value: float, event_ms: int) -> None:
        """Apply one own input tuple (paper III: open, contribute, or contribute and close)."""
        if isinstance(self.kind, CountWindows):
            self._count_tuple(partition, offset, key, value)
        else:
            self._time_tuple(partition, offset, key, value, event_ms)

    # A window's G_open is written before the tuple that opens it is applied, with the empty
    # state and the position before that tuple: a replay applies the tuple again. (The paper's
    # G_open holds the state after it; this form also covers a tuple that opens several
    # sliding windows, whose G_opens a crash may separate.)
    def _count_tuple(self, partition: int, offset: int, key: str, value: float) -> None:
        wid = self._by_key.get(key)
        if wid is None:
            window = OpenWindow(count_window_id(key, partition, offset), key, partition=partition)
            if self.kind.size == 1:  # opens and closes at once: no footprint needed
                window.acc.add(value)
                self.position[partition] = offset + 1
                self._emit_result(window)
                return
            self.windows[window.id] = window
            self._by_key[key] = window.id
            self._footprint(window, RecordKind.OPEN)
        else:
            window = self.windows[wid]
            if window.partition != partition:
                raise KeySpansPartitions(
                    f"key {key!r} arrives on more than one input partition (window {wid}, now "
                    f"partition {partition}): a count window's contents would depend on how "
                    "batches interleave them. Produce the input with the key as the Kafka key "
                    "(or partition it by the key)"
                )
        window.acc.add(value)
        self.position[partition] = offset + 1
        if window.acc.count >= self.kind.size:
            del self.windows[window.id]
            del self._by_key[key]
            self._emit_result(window)

    def _time_tuple(
        self, partition: int, offset: int, key: str, value: float, event_ms: int
    ) -> None:
        kind: TimeWindows = self.kind  # type: ignore[assignment]
        if event_ms > self.marks.get(partition, event_ms - 1):
            # Results closed by this tuple's watermark carry the state before it (position and
            # marks): a crash between them replays the tuple, which closes the rest.
            before = dict(self.marks)
            self.marks[partition] = event_ms
            self._close_until(self.watermark(), before)
        watermark = self.watermark()
        for start in kind.starts(event_ms):
            end = start + kind.size_ms
            if end <= watermark:
                self.stats.late += 1  # its window has closed already
                continue
            wid = time_window_id(key, start)
            window = self.windows.get(wid)
            if window is None:
                window = OpenWindow(wid, key, start, end)
                self.windows[wid] = window
                heapq.heappush(self._ends, (end, wid))
                self._footprint(window, RecordKind.OPEN)
            window.acc.add(value)
        self.position[partition] = offset + 1

    def watermark(self) -> float:
        """Oldest of the input partitions' newest event times, minus the allowed lateness;
        -inf until every input partition delivered a tuple of this shard's keys."""
        if len(self.marks) < len(self.input_partitions):
            return float("-inf")
        return min(self.marks.values()) - self.kind.lateness_ms  # type: ignore[union-attr]

    def _close_until(self, watermark: float, marks_before: dict[int, int]) -> None:
        ends = self._ends
        while ends and ends[0][0] <= watermark:
            _end, wid = heapq.heappop(ends)
            window = self.windows.pop(wid, None)
            if window is not None:
                self._emit_result(window, marks_before)

    # -- records ---------------------------------------------------------------------------
    def _record(
        self, kind: RecordKind, window: OpenWindow, marks: dict[int, int] | None = None
    ) -> LogRecord:
        acc = window.acc
        if kind is RecordKind.RESULT:
            span = (window.start, window.end) if isinstance(self.kind, TimeWindows) else None
            value = result_value(window.key, window.id, acc, self.aggregate, span)
        else:
            value = json.dumps({"key": window.key, "window": window.id}).encode()
        record = LogRecord(
            kind=kind,
            window=window.id,
            key=window.key,
            state=tuple(acc.as_list()),
            value=value,
            open_windows=len(self.windows),
            position=tuple(sorted(self.position.items())),
            event_marks=tuple(sorted((self.marks if marks is None else marks).items())),
            ingest_ms=self.ingest_ms if kind is RecordKind.RESULT else 0,
        ).sealed()
        self.seq += 1
        self.emit(record)
        return record

    def _emit_result(self, window: OpenWindow, marks: dict[int, int] | None = None) -> None:
        self.stats.results += 1
        self._record(RecordKind.RESULT, window, marks)

    def _footprint(self, window: OpenWindow, kind: RecordKind) -> None:
        if not self.policy.footprints:
            return
        window.footprint = dict(self.position)
        window.seq = self.seq
        self.windows.move_to_end(window.id)
        if kind is RecordKind.OPEN:
            self.stats.opens += 1
        else:
            self.stats.checks += 1
        self._record(kind, window)

    # -- background path -------------------------------------------------------------------
    def extent(self) -> int:
        """q: records from the oldest footprint to the end of the log."""
        if not self.windows:
            return 0
        return self.seq - next(iter(self.windows.values())).seq

    def replay_size(self) -> int:
        """u: input tuples a recovery now would replay (all keys', from the oldest footprint)."""
        if not self.windows:
            return 0
        oldest = next(iter(self.windows.values())).footprint
        return sum(o - oldest.get(p, 0) for p, o in self.position.items())

    def checkpoint(self) -> int:
        """The background path: G_check the oldest windows while q > Q or u > U, inside one
        checkpoint interval; returns how many were written."""
        if not self.policy.checks or not self.windows:
            return 0
        if not self.policy.wants_check(self.extent(), self.replay_size()):
            return 0
        deadline = self.slices.open_slice()  # type: ignore[union-attr]
        if deadline is None:
            return 0
        written = 0
        # Each window at most once per interval: a target below N is unattainable (paper IV.B).
        for _ in range(len(self.windows)):
            oldest = next(iter(self.windows.values()))
            self._footprint(oldest, RecordKind.CHECK)
            written += 1
            if not self.policy.wants_check(self.extent(), self.replay_size()):
                break
            if not self.slices.within(deadline):  # type: ignore[union-attr]
                break
        return written

    # -- recovery path ---------------------------------------------------------------------
    def load(self, checkpoint: EventualCheckpoint) -> None:
        """Take the eventual checkpoint as this shard's state: its windows with their
        footprints, the log end's position and marks; own tuples below that position are
        then applied only to windows whose footprint does not hold them yet."""
        self.windows.clear()
        self._by_key.clear()
        self._ends.clear()
        for fp in sorted(checkpoint.footprints, key=lambda f: f.offset):
            window = OpenWindow(fp.window, fp.key)
            window.acc = Accumulator.from_list(list(fp.state))
            window.footprint = dict(fp.position)
            window.seq = fp.offset
            if isinstance(self.kind, TimeWindows):
                window.start = time_window_start(fp.window)
                window.end = window.start + self.kind.size_ms
                heapq.heappush(self._ends, (window.end, window.id))
            else:
                self._by_key[fp.key] = fp.window
                window.partition = count_window_partition(fp.window)
            self.windows[window.id] = window
        self.position = dict(checkpoint.position)
        self.marks = dict(checkpoint.event_marks)
        self.replayed_to = dict(checkpoint.position)
        self.seq = checkpoint.log_end

    def _replay(self, partition: int, offset: int, key: str, value: float, event_ms: int) -> None:
        """A tuple the log's end already reflects: only windows whose footprint is older take
        it (paper II.B: window w_i ignores tuples older than t_i)."""
        if isinstance(self.kind, CountWindows):
            wids = [self._by_key.get(key)]
        else:
            wids = [time_window_id(key, s) for s in self.kind.starts(event_ms)]
        applied = False
        for wid in wids:
            window = self.windows.get(wid) if wid is not None else None
            if window is None or offset < window.footprint.get(partition, 0):
                continue
            window.acc.add(value)
            applied = True
            if isinstance(self.kind, CountWindows) and window.acc.count >= self.kind.size:
                raise InconsistentReplay(
                    f"window {wid} reached its size replaying offset {partition}:{offset}, "
                    "below the log's end, where it was still open: the log and the input "
                    "disagree (was the input topic rewritten?)"
                )
        if applied:
            self.stats.replay_applied += 1
        else:
            self.stats.replay_skipped += 1
