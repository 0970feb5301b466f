"""Recovery of a CEC shard (paper 003, section II.B "Constructing an EC").

Step 1. Read the shard's output partition backwards from its end. The newest intact record
        gives the log's end state: N (windows open there), the input position t_c and the
        event-time marks. A record whose fingerprint does not match is a torn write: skipped.
Step 2. Go on backwards collecting, per window, its newest footprint (G_open or G_check),
        except windows whose result R was met first (they closed before t_c), until N
        footprints are found: the eventual checkpoint. The records passed are the extent.
Step 3. Replay the input from T, per input partition the oldest footprint's offset; the shard
        applies a tuple below t_c only to windows whose footprint is older (operator.load).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from recovery_lib.cec.exceptions import LogTooShort
from recovery_lib.cec.records import LazyRecord, LogRecord, RecordKind


@dataclass(frozen=True)
class EventualCheckpoint:
    """The state a shard recovers: a footprint per window open at the log's end."""

    footprints: tuple[LogRecord, ...]
    position: Mapping[int, int]  # t_c: what the log's end reflects
    event_marks: Mapping[int, int]
    log_end: int  # offset after the newest record
    extent: int  # records read back (all kinds, torn ones included)
    torn: int = 0
    closed_seen: int = 0
    empty: bool = False  # nothing in the log: start from the input's beginning

    @property
    def replay_from(self) -> dict[int, int]:
        """T: per input partition, the oldest footprint's offset (t_c where none is older)."""
        start = dict(self.position)
        for fp in self.footprints:
            at = dict(fp.position)
            for p in start:
                start[p] = min(start[p], at.get(p, 0))  # unseen by the footprint: from 0
        return start


@dataclass
class _Scan:
    found: dict[str, LogRecord] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)
    extent: int = 0
    torn: int = 0


def eventual_checkpoint(
    newest_first: Iterable[LogRecord | LazyRecord], log_end: int
) -> EventualCheckpoint:
    """Steps 1 and 2 over a shard's log read backwards (``log_end`` = its end offset). Only the
    log's end and the footprints taken are decoded whole and checked against their
    fingerprints; the other records are passed by their kind and window."""
    scan = _Scan()
    head: LogRecord | None = None
    for record in newest_first:
        scan.extent += 1
        if head is None:  # Step 1: the log's end state.
            full = record.full()
            if not full.intact:
                scan.torn += 1
                continue
            head = full
            if head.open_windows == 0:
                break
        # Step 2: newest footprint of each window still open at t_c.
        if record.kind is RecordKind.RESULT:
            scan.closed.add(record.window)
        elif record.window not in scan.closed and record.window not in scan.found:
            full = record.full()
            if not full.intact:
                scan.torn += 1
                continue
            scan.found[record.window] = full
            if len(scan.found) == head.open_windows:
                break
    if head is None:
        return EventualCheckpoint((), {}, {}, log_end, scan.extent, scan.torn, empty=True)
    if len(scan.found) < head.open_windows:
        raise LogTooShort(
            f"the output log ends with {head.open_windows} open windows but only "
            f"{len(scan.found)} footprints were found back to its start ({scan.extent} records "
            "read): the log was truncated below the eventual checkpoint. Never truncate a CEC "
            "output topic below what `recovery gc` keeps for it."
        )
    return EventualCheckpoint(
        footprints=tuple(scan.found.values()),
        position=dict(head.position),
        event_marks=dict(head.event_marks),
        log_end=log_end,
        extent=scan.extent,
        torn=scan.torn,
        closed_seen=len(scan.closed),
    )
