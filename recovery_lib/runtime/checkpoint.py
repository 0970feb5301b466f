"""Reading a Spark streaming checkpoint: which batches are planned and committed, and the
source offsets they cover. (Rewinding and shipping checkpoints build on this later.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# State store files: HDFS-backed ``<v>.delta`` / ``<v>.snapshot``, RocksDB ``<v>.changelog`` /
# ``<v>.zip`` (and their ``.crc``); version v is a store's state after batch v - 1.
_STATE_FILE = re.compile(r"^\.?(\d+)\.(delta|snapshot|changelog|zip)(\.crc)?$")
SNAPSHOT_KINDS = frozenset({"snapshot", "zip"})


def batch_ids(directory: Path) -> list[int]:
    if not directory.exists():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def state_stores(state_root: Path) -> list[Path]:
    """Every state store directory (one per operator and partition) under ``state_root``."""
    if not state_root.exists():
        return []
    return sorted({p.parent for p in state_root.rglob("*") if _STATE_FILE.match(p.name)})


def store_versions(store: Path) -> dict[int, list[tuple[Path, str]]]:
    """A store's files by version: (path, kind), kind one of delta, snapshot, changelog, zip."""
    versions: dict[int, list[tuple[Path, str]]] = {}
    for path in store.iterdir():
        m = _STATE_FILE.match(path.name)
        if m:
            versions.setdefault(int(m.group(1)), []).append((path, m.group(2)))
    return versions


def last_committed(checkpoint: str | Path) -> int | None:
    ids = batch_ids(Path(checkpoint) / "commits")
    return ids[-1] if ids else None


def batch_metadata(checkpoint: str | Path, batch: int) -> dict[str, Any]:
    """The offset-log entry's batch metadata: ``batchWatermarkMs``, ``batchTimestampMs`` (when
    the batch was planned) and the query's SQL conf."""
    lines = (Path(checkpoint) / "offsets" / str(batch)).read_text().splitlines()
    return json.loads(lines[1])  # "v1", batch metadata, then one line per source


def source_offsets(checkpoint: str | Path, batch: int) -> dict[str, dict[str, int]]:
    """End offsets of ``batch``, merged over the query's sources: {topic: {partition: offset}}."""
    lines = (Path(checkpoint) / "offsets" / str(batch)).read_text().splitlines()
    merged: dict[str, dict[str, int]] = {}
    for line in lines[2:]:  # "v1", batch metadata, then one line per source
        try:
            offsets = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(offsets, dict):
            for topic, parts in offsets.items():
                if isinstance(parts, dict):
                    merged.setdefault(topic, {}).update({str(p): int(o) for p, o in parts.items()})
    return merged


def committed_offsets(checkpoint: str | Path) -> dict[str, dict[str, int]]:
    batch = last_committed(checkpoint)
    return {} if batch is None else source_offsets(checkpoint, batch)
