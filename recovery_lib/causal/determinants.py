"""Determinants: the outcomes of nondeterministic steps, recorded so a re-execution repeats them.

A determinant belongs to one place in the job: (job, micro-batch, scope, partition) names the
stream of calls one task makes through one causal context; ``seq`` numbers the determinants in
that stream. Kinds (Clonos 3.3): ``clock`` (a changed millisecond, with the call index where it
changed), ``seed`` (the random seed of the stream), ``call`` (an external response).

On the wire one flushed record carries a run of determinants of one stream, JSON encoded, with a
CRC-32 so a torn or corrupted record is detected instead of replayed.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from recovery_lib.errors import ProtocolError

CLOCK, SEED, CALL = "clock", "seed", "call"
KINDS = frozenset({CLOCK, SEED, CALL})


class DeterminantError(ProtocolError):
    """Base of the causal layer's errors."""


class CorruptDeterminants(DeterminantError):
    """A logged record fails its checksum or cannot be decoded."""


class MissingDeterminants(DeterminantError):
    """A replayed stream's determinants are gone (log truncated past it, or unreadable)."""


class DeterminantMismatch(DeterminantError):
    """The re-execution asked for a different kind of determinant than was logged at this
    position: the function's calls are not in the same order as in the first run."""


@dataclass(frozen=True, order=True)
class StreamKey:
    job: str
    batch: int
    scope: str
    partition: int

    def encode(self) -> bytes:
        return f"{self.job}/{self.batch}/{self.scope}/{self.partition}".encode()

    @classmethod
    def decode(cls, raw: bytes) -> StreamKey:
        try:
            job, batch, scope, partition = raw.decode().rsplit("/", 3)
            return cls(job, int(batch), scope, int(partition))
        except (UnicodeDecodeError, ValueError) as exc:
            raise CorruptDeterminants(f"bad determinant key {raw[:80]!r}") from exc


@dataclass(frozen=True)
class Determinant:
    kind: str
    value: Any

    def to_json(self) -> list[Any]:
        if isinstance(self.value, bytes):
            return [self.kind, {"b64": base64.b64encode(self.value).decode()}]
        return [self.kind, self.value]

    @classmethod
    def from_json(cls, item: list[Any]) -> Determinant:
        kind, value = item
        if kind not in KINDS:
            raise CorruptDeterminants(f"unknown determinant kind {kind!r}")
        if isinstance(value, dict) and set(value) == {"b64"}:
            value = base64.b64decode(value["b64"])
        return cls(kind, value)


@dataclass(frozen=True)
class DeterminantRun:
    """``determinants[i]`` has sequence number ``first_seq + i`` in its stream.

    Where two processes compute the same stream (active replication, recovery_lib/ha/
    replication/shared_determinants.py), ``writer`` names the process that logged the run and
    ``epoch`` its term as the stream's writer; a ``claim`` is a run without determinants by
    which a writer takes the stream over from ``first_seq`` on."""

    key: StreamKey
    first_seq: int
    determinants: tuple[Determinant, ...]
    attempt: int = 0
    epoch: int = 0
    writer: str = ""
    claim: bool = False

    def encode(self) -> tuple[bytes, bytes]:
        fields: dict[str, Any] = {
            "seq": self.first_seq,
            "attempt": self.attempt,
            "epoch": self.epoch,
            "det": [d.to_json() for d in self.determinants],
        }
        if self.writer:
            fields["w"] = self.writer
        if self.claim:
            fields["claim"] = True
        body = json.dumps(fields, separators=(",", ":")).encode()
        return self.key.encode(), zlib.crc32(body).to_bytes(4, "big") + body

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> DeterminantRun:
        if value is None or len(value) < 4:
            raise CorruptDeterminants(f"determinant record for {key!r} is truncated")
        crc, body = int.from_bytes(value[:4], "big"), value[4:]
        if zlib.crc32(body) != crc:
            raise CorruptDeterminants(f"determinant record for {key!r} fails its checksum")
        try:
            data = json.loads(body)
            dets = tuple(Determinant.from_json(item) for item in data["det"])
            return cls(
                StreamKey.decode(key),
                int(data["seq"]),
                dets,
                int(data.get("attempt", 0)),
                int(data.get("epoch", 0)),
                str(data.get("w", "")),
                bool(data.get("claim", False)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptDeterminants(f"determinant record for {key!r}: {exc}") from exc


_FRAME = struct.Struct(">II")  # key length, value length


def encode_runs(runs: list[DeterminantRun]) -> bytes:
    """Several runs in one blob, as they ride in an output record's header (piggybacking):
    per run, the key and value lengths, then the key and the (checksummed) value."""
    parts: list[bytes] = []
    for run in runs:
        key, value = run.encode()
        parts += [_FRAME.pack(len(key), len(value)), key, value]
    return b"".join(parts)


def decode_runs(blob: bytes) -> list[DeterminantRun]:
    runs: list[DeterminantRun] = []
    pos = 0
    while pos < len(blob):
        if pos + _FRAME.size > len(blob):
            raise CorruptDeterminants("piggybacked determinants are truncated (frame header)")
        key_len, value_len = _FRAME.unpack_from(blob, pos)
        pos += _FRAME.size
        end = pos + key_len + value_len
        if end > len(blob):
            raise CorruptDeterminants("piggybacked determinants are truncated (frame body)")
        runs.append(DeterminantRun.decode(blob[pos : pos + key_len], blob[pos + key_len : end]))
        pos = end
    return runs


def assemble(runs: list[DeterminantRun]) -> list[Determinant]:
    """The logged prefix of one stream: runs merged by sequence number (a later attempt that
    re-logged a position does not override the first), cut at the first gap."""
    by_seq: dict[int, Determinant] = {}
    for run in sorted(runs, key=lambda r: (r.epoch, r.attempt)):
        for i, det in enumerate(run.determinants):
            by_seq.setdefault(run.first_seq + i, det)
    prefix: list[Determinant] = []
    while len(prefix) in by_seq:
        prefix.append(by_seq[len(prefix)])
    return prefix
