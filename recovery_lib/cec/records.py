"""The CEC log record: what an aggregate writes into its output partition, in order.

Three kinds share one partition log (the operator's output queue in the paper):

  R       a closed window's result, the output consumers read (id = the window's id)
  open    G_open: a window's first footprint, its state after the tuple that opened it
  check   G_check: a later footprint of an open window, its partial result

Every record carries what the backward scan needs at that point of the log: ``open_windows``
(the paper's N, windows open after this record), ``position`` (the input offsets the state
reflects: the paper's timestamp t, one offset per input partition because Spark input is a set
of Kafka partitions) and, for time windows, ``event_marks`` (each input partition's newest
event time, the watermark's source). A ``fingerprint`` over all of it detects a torn write;
a record whose fingerprint does not match is skipped by recovery and by readers.

Kafka layout: value = JSON of the window and its aggregates (what a consumer reads of an R),
headers ``rl.id`` (window id), ``rl.cec`` (kind), ``rl.cec.meta`` (N, position, marks, state)
and ``rl.cec.fp``; control records (G_open, G_check) also carry ``rl.control``, so readers
of the topic skip them unless they ask."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from recovery_lib.kafka.headers import (
    CEC_FINGERPRINT_HEADER,
    CEC_KIND_HEADER,
    CEC_META_HEADER,
    CONTROL_HEADER,
    ID_HEADER,
    INGEST_HEADER,
)

KIND_HEADER = CEC_KIND_HEADER
META_HEADER = CEC_META_HEADER
FINGERPRINT_HEADER = CEC_FINGERPRINT_HEADER

Position = Mapping[int, int]  # input partition -> next offset not yet reflected


class RecordKind(StrEnum):
    RESULT = "R"
    OPEN = "open"
    CHECK = "check"


CONTROL_KINDS = frozenset({RecordKind.OPEN.value, RecordKind.CHECK.value})


@dataclass(frozen=True)
class LogRecord:
    """One record of an aggregate's output log (see the module docstring)."""

    kind: RecordKind
    window: str
    key: str
    state: tuple[float, ...]  # the accumulator: count, sum, max, min
    value: bytes  # what a consumer reads (JSON)
    open_windows: int
    position: tuple[tuple[int, int], ...]
    event_marks: tuple[tuple[int, int], ...] = ()
    fingerprint: int = 0
    offset: int = -1  # where it lies in its partition (filled in when read back)
    ingest_ms: int = 0  # a result's: ingest time of the tuple that closed it (latency)

    @property
    def is_control(self) -> bool:
        return self.kind is not RecordKind.RESULT

    def full(self) -> LogRecord:
        """The record itself (the backward scan also takes ``LazyRecord``)."""
        return self

    def _meta(self) -> str:
        return json.dumps(
            [self.open_windows, self.position, self.event_marks, self.state],
            separators=(",", ":"),
        )

    def computed_fingerprint(self) -> int:
        head = f"{self.kind.value}|{self.window}|{self.key}|{self._meta()}|".encode()
        return zlib.crc32(self.value, zlib.crc32(head))

    def sealed(self) -> LogRecord:
        """This record with its fingerprint set."""
        return replace(self, fingerprint=self.computed_fingerprint())

    @property
    def intact(self) -> bool:
        return self.fingerprint == self.computed_fingerprint()

    def headers(self) -> list[tuple[str, bytes]]:
        headers = [
            (ID_HEADER, self.record_id.encode()),
            (KIND_HEADER, self.kind.value.encode()),
            (META_HEADER, self._meta().encode()),
            (FINGERPRINT_HEADER, str(self.fingerprint).encode()),
        ]
        if self.is_control:  # readers skip it unless they ask (io/sinks/ids.py)
            headers.append((CONTROL_HEADER, b"cec"))
        elif self.ingest_ms:
            headers.append((INGEST_HEADER, str(self.ingest_ms).encode()))
        return headers

    @property
    def record_id(self) -> str:
        """A result's id is its window's; a footprint's id names the window and the input
        position it reflects, so a re-run writes it under the same id."""
        if self.kind is RecordKind.RESULT:
            return self.window
        at = ",".join(f"{p}:{o}" for p, o in self.position)
        return f"{self.kind.value}:{self.window}@{at}"

    @classmethod
    def decode(
        cls,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]] | None,
        offset: int = -1,
    ) -> LogRecord | None:
        """The record from a Kafka message; ``None`` for a message that is no CEC record.
        A damaged record decodes with a fingerprint that does not match (``intact`` False)."""
        h = {k: v for k, v in headers or ()}
        kind = h.get(KIND_HEADER)
        if kind is None:
            return None
        try:
            n, position, marks, state = json.loads(h.get(META_HEADER, b"null"))
            fingerprint = int(h.get(FINGERPRINT_HEADER, b"-1"))
            record_kind = RecordKind(kind.decode())
            window = window_of(record_kind, h.get(ID_HEADER, b"").decode())
            return cls(
                kind=record_kind,
                window=window,
                key=(key or b"").decode(),
                state=tuple(state),
                value=value or b"",
                open_windows=int(n),
                position=tuple((int(p), int(o)) for p, o in position),
                event_marks=tuple((int(p), int(t)) for p, t in marks),
                fingerprint=fingerprint,
                offset=offset,
            )
        except (ValueError, TypeError, IndexError, UnicodeDecodeError):
            # Headers torn beyond parsing: a record that can never be intact.
            return cls(
                kind=RecordKind.CHECK,
                window="",
                key="",
                state=(),
                value=value or b"",
                open_windows=-1,
                position=(),
                fingerprint=-1,
                offset=offset,
            )


def window_of(kind: RecordKind, record_id: str) -> str:
    """The window a record id names (the inverse of ``LogRecord.record_id``)."""
    if kind is RecordKind.RESULT:
        return record_id
    return record_id.split(":", 1)[1].rsplit("@", 1)[0]


class LazyRecord:
    """A log message as the backward scan meets it: its kind and window read from two headers,
    the whole record (JSON, fingerprint) decoded only when the scan needs it (the log's end
    and one footprint per open window)."""

    __slots__ = ("offset", "_key", "_value", "_headers", "kind", "window", "_full")

    def __init__(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
        offset: int,
    ) -> None:
        self.offset = offset
        self._key, self._value, self._headers = key, value, headers
        self._full: LogRecord | None = None
        h = dict(headers)
        try:
            self.kind: RecordKind | None = RecordKind(h[KIND_HEADER].decode())
            self.window = window_of(self.kind, h[ID_HEADER].decode())
        except (KeyError, ValueError, IndexError, UnicodeDecodeError):
            self.kind, self.window = None, ""  # decoded whole, it shows as torn

    def full(self) -> LogRecord:
        if self._full is None:
            decoded = LogRecord.decode(self._key, self._value, self._headers, self.offset)
            assert decoded is not None  # built only for messages with a kind header
            self._full = decoded
        return self._full


def is_control(headers: Sequence[tuple[str, bytes]] | None) -> bool:
    """True for a G_open / G_check message (readers skip them unless asked)."""
    for k, v in headers or ():
        if k == KIND_HEADER:
            return v.decode() in CONTROL_KINDS
    return False
