"""Parked input records: positions the source must not deliver again, each with the reason.

A poison record (one that makes the job's code raise on every attempt) would fail its batch
forever: Spark re-runs a failed batch with the same offsets after every restart. Once found
(job/poison.py bisects the batch's input range), the record is parked: its position goes into
the job's parked file (beside its checkpoint), and the source sends it to the dead-letter topic
with the reason and its position instead of to the query. The file only grows and is rewritten
whole (temp file + rename), so a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from recovery_lib.io.exceptions import InvalidSourceOption

PARKED_OPTION = "parkedRecords"  # the source option naming the file
# Set by a supervisor for the restart after the same batch failed poison_attempts times: the
# job looks for the poison record of that batch (job/poison.py) before its query starts.
POISON_BATCH_ENV = "RECOVERY_POISON_BATCH"


@dataclass(frozen=True)
class ParkedRecord:
    topic: str
    partition: int
    offset: int
    reason: str

    @property
    def position(self) -> str:
        return f"{self.topic}/{self.partition}@{self.offset}"


def read_parked(path: str | os.PathLike[str] | None) -> list[ParkedRecord]:
    """The parked records of a job ([] when there is no file)."""
    if not path:
        return []
    try:
        rows = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return []
    except ValueError as exc:
        raise InvalidSourceOption(
            f"the parked-records file {path} is not JSON ({exc}); restore it from the dead-letter "
            "topic (each parked record is there with its position) or delete it"
        ) from exc
    return [ParkedRecord(**row) for row in rows]


def parked_in(
    path: str | os.PathLike[str] | None, topic: str, partition: int, start: int, end: int
) -> dict[int, str]:
    """Offset -> reason of the parked records in ``[start, end)`` of one partition."""
    return {
        r.offset: r.reason
        for r in read_parked(path)
        if r.topic == topic and r.partition == partition and start <= r.offset < end
    }


def park(path: str | os.PathLike[str], records: Iterable[ParkedRecord]) -> list[ParkedRecord]:
    """Add ``records`` to the parked file (a position parked twice is kept once); all of them."""
    kept = {r.position: r for r in read_parked(path)}
    for record in records:
        kept.setdefault(record.position, record)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps([asdict(r) for r in kept.values()], indent=1))
    os.replace(tmp, target)
    return list(kept.values())
