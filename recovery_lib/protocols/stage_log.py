"""What a pipeline's protocol keeps on disk, under its protocol directory (shared storage, like
the fencing epoch store):

    <protocol_dir>/stages/<stage>/<batch>.json   one per committed batch: the stage's checkpoint
                                                 (sent positions, time, epoch, forced, clocks)
    <protocol_dir>/markers/<topic>.jsonl         coordinated epochs: marker e of a topic as
                                                 the position it stands for per partition
    <protocol_dir>/epochs.jsonl                  coordinated epochs: when marker e was injected

Received positions are not copied: they are the batch's end offsets in Spark's offset log.
A record is rewritten when a batch is re-run (the commit hook runs again), and only batches
in the stage's commit log count as checkpoints.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from recovery_lib.protocols.checkpoints import Positions, Stage, StageCheckpoint
from recovery_lib.runtime.checkpoint import batch_ids, source_offsets


@dataclass
class CheckpointRecord:
    batch: int
    sent: dict[str, dict[str, int]]
    taken_ms: int
    epochs: list[int] = field(default_factory=list)  # coordinated: epochs this batch completed
    checkpoint: bool = True  # kept as a checkpoint (every batch, or one per interval)
    forced: bool = False  # communication-induced: a forced checkpoint
    clocks: dict[str, Any] = field(default_factory=dict)  # communication-induced state


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def append_line(path: Path, record: Mapping[str, Any]) -> None:
    """One JSON line; O_APPEND keeps concurrent small writes whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line being written
    return out


class StageLog:
    def __init__(self, protocol_dir: str | Path, stage: str) -> None:
        self.dir = Path(protocol_dir) / "stages" / stage
        self.stage = stage

    def write(self, record: CheckpointRecord) -> None:
        write_atomic(self.dir / f"{record.batch}.json", json.dumps(asdict(record)))

    def read(self, batch: int) -> CheckpointRecord | None:
        try:
            return CheckpointRecord(**json.loads((self.dir / f"{batch}.json").read_text()))
        except FileNotFoundError:
            return None

    def records(self) -> list[CheckpointRecord]:
        if not self.dir.exists():
            return []
        out = []
        for path in self.dir.glob("*.json"):
            if path.stem.isdigit():
                out.append(CheckpointRecord(**json.loads(path.read_text())))
        return sorted(out, key=lambda r: r.batch)


def _positions(raw: Mapping[str, Mapping[str, int]]) -> Positions:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}


def stage_checkpoints(
    protocol_dir: str | Path, stage: str, checkpoint: str | Path
) -> list[StageCheckpoint]:
    """The stage's checkpoints: batches in its commit log that have a protocol record."""
    committed = set(batch_ids(Path(checkpoint) / "commits"))
    out = []
    for record in StageLog(protocol_dir, stage).records():
        if record.batch not in committed or not record.checkpoint:
            continue
        try:
            received = _positions(source_offsets(checkpoint, record.batch))
        except FileNotFoundError:  # collected (GC) between the two reads
            continue
        out.append(
            StageCheckpoint(
                stage,
                record.batch,
                received=received,
                sent=_positions(record.sent),
                taken_ms=record.taken_ms,
                forced=record.forced,
            )
        )
    return out


def volatile_state(
    stage: Stage, checkpoint: str | Path, sent: Mapping[str, Mapping[int, int]]
) -> StageCheckpoint:
    """A live stage's present position: what its newest planned batch reads (offset log) and
    what its output topics hold now (``sent``, their end offsets)."""
    planned = batch_ids(Path(checkpoint) / "offsets")
    received = _positions(source_offsets(checkpoint, planned[-1])) if planned else {}
    return StageCheckpoint(
        stage.name,
        planned[-1] if planned else -1,
        received=received,
        sent={t: dict(parts) for t, parts in sent.items()},
        taken_ms=int(time.time() * 1000),
        volatile=True,
    )


def epoch_positions(protocol_dir: str | Path, topic: str) -> dict[int, dict[int, int]]:
    """Coordinated epochs of ``topic``: epoch -> partition -> position (the first offset after
    the epoch). The first registration of an epoch stands (a re-run batch registers again)."""
    out: dict[int, dict[int, int]] = {}
    for line in read_lines(Path(protocol_dir) / "markers" / f"{topic}.jsonl"):
        out.setdefault(int(line["epoch"]), {int(p): int(o) for p, o in line["offsets"].items()})
    return out


def register_epoch(
    protocol_dir: str | Path, topic: str, epoch: int, offsets: Mapping[int, int]
) -> None:
    """One line per topic and epoch: every partition at once, so a reader never sees an epoch
    on some partitions only."""
    append_line(
        Path(protocol_dir) / "markers" / f"{topic}.jsonl",
        {"epoch": epoch, "offsets": {str(p): o for p, o in offsets.items()}},
    )
