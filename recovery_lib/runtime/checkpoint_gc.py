"""Checkpoint garbage collection of one Spark query: remove what no recovery can need any more.

What a recovery can need is bounded below by the *oldest kept batch*:

    oldest_kept = min(recovery line, newest batch shipped to a standby) - keep_batches + 1

The recovery line of a Spark query is its last committed batch (Spark's checkpoint is a
coordinated one: every operator's state of batch b is committed together). A standby can only
resume from what was shipped to it, so GC never passes the newest complete shipped checkpoint
(``shipped.json`` in the job's standby directory, written by state shipping). Then:

- offsets/ and commits/ entries of batches before ``oldest_kept``;
- state store files (HDFS-backed ``<v>.delta``/``<v>.snapshot``, RocksDB ``<v>.changelog``/
  ``<v>.zip``; version v = state after batch v-1) below the newest snapshot at or before the
  oldest kept version: a kept version is rebuilt from that snapshot plus later deltas, so
  nothing older is read again. Without such a snapshot the delta chain is kept whole;
- determinants of batches before ``oldest_kept`` (the causal log's low-water mark);
- optionally (``delete_input_records``), input records before the oldest kept batch's start
  offsets, through Kafka's DeleteRecords (only when no other consumer reads those topics),
  and never at or above ``input_floor`` (a CEC job's replay start T, recovery_lib/cec).
  A CEC job's output topic is its checkpoint: GC never truncates it. A replicated job's
  replicas are collected each on its own, and input records only below what both keep.

``dry_run`` lists the same plan without touching anything. Each pass is reported to the
metrics store (table gc_runs). A query's lakehouse output table (Delta, Iceberg) is vacuumed
below the same oldest kept batch by ``vacuum_table`` (table_gc.py, apart: it loads deltalake
and pyiceberg, which the modes importing this module need not).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from recovery_lib.errors import ConfigurationError
from recovery_lib.kafka.admin import delete_records_below
from recovery_lib.runtime.checkpoint import (
    SNAPSHOT_KINDS,
    batch_ids,
    last_committed,
    source_offsets,
    state_stores,
    store_versions,
)


@dataclass
class GcPlan:
    checkpoint: str
    recovery_line: int | None
    shipped_batch: int | None
    oldest_kept_batch: int | None
    files: list[tuple[str, int]] = field(default_factory=list)  # (path, bytes)
    determinants_before: int | None = None
    input_records_before: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.files)


@dataclass
class GcResult:
    plan: GcPlan
    dry_run: bool
    files_removed: int = 0
    bytes_freed: int = 0
    determinant_low_water: int | None = None
    input_records_deleted: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["plan"]["bytes"] = self.plan.bytes
        data["plan"]["files"] = len(self.plan.files)
        return data


def shipped_batch(standby_dir: Path | None) -> int | None:
    """The newest batch a standby holds completely (None: no standby ships for this job)."""
    if standby_dir is None:
        return None
    try:
        return int(json.loads((standby_dir / "shipped.json").read_text())["batch"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _state_files(state_root: Path, oldest_kept_version: int) -> list[Path]:
    """Files of every state store directory that no kept version needs."""
    doomed: list[Path] = []
    for directory in state_stores(state_root):
        versions = store_versions(directory)
        bases = [
            v
            for v, files in versions.items()
            if v <= oldest_kept_version and any(kind in SNAPSHOT_KINDS for _, kind in files)
        ]
        if not bases:
            continue  # no snapshot to rebuild from: the whole delta chain is needed
        base = max(bases)
        doomed += [path for v, files in versions.items() if v < base for path, _ in files]
    return doomed


def plan_gc(
    checkpoint: str | Path,
    keep_batches: int,
    shipped: int | None = None,
    delete_input_records: bool = False,
    input_floor: dict[str, dict[int, int]] | None = None,
    needed_from: int | None = None,
) -> GcPlan:
    """``needed_from``: the oldest batch a recovery elsewhere can roll this query back to (a
    pipeline's recovery line, recovery_lib/pipeline/gc.py); nothing from it on is removed."""
    checkpoint = Path(checkpoint)
    if keep_batches < 1:
        raise ConfigurationError(
            "keep_batches must be >= 1: the recovery line itself is always kept"
        )
    line = last_committed(checkpoint)
    plan = GcPlan(str(checkpoint), line, shipped, None)
    if line is None:
        plan.notes.append("no committed batch yet: nothing can be removed")
        return plan
    bound = min(b for b in (line, shipped, needed_from) if b is not None)
    if needed_from is not None and needed_from < 0:
        plan.oldest_kept_batch = 0
        plan.notes.append("the recovery line starts from the beginning: all kept")
        return plan
    oldest = bound - keep_batches + 1
    plan.oldest_kept_batch = max(oldest, 0)
    if oldest <= 0:
        plan.notes.append(f"only {bound + 1} committed batches: all kept")
        return plan
    for sub in ("offsets", "commits"):
        for batch in batch_ids(checkpoint / sub):
            if batch < oldest:
                for path in (checkpoint / sub / str(batch), checkpoint / sub / f".{batch}.crc"):
                    if path.exists():
                        plan.files.append((str(path), path.stat().st_size))
    for path in _state_files(checkpoint / "state", oldest + 1):  # version = batch + 1
        plan.files.append((str(path), path.stat().st_size))
    plan.determinants_before = oldest
    if delete_input_records:
        try:
            plan.input_records_before = source_offsets(checkpoint, oldest - 1)
        except OSError:
            plan.notes.append(f"offsets of batch {oldest - 1} unreadable: input records kept")
        for topic, floor in (input_floor or {}).items():
            parts = plan.input_records_before.get(topic, {})
            for part, offset in list(parts.items()):
                parts[part] = min(offset, floor.get(int(part), 0))
            if parts:
                plan.notes.append(
                    f"{topic}: kept from {floor} (a CEC replay start or the other replica's need)"
                )
    return plan


def run_gc(
    checkpoint: str | Path,
    keep_batches: int,
    dry_run: bool = False,
    shipped: int | None = None,
    truncate_determinants: Callable[[int], int | None] | None = None,
    delete_input_records: bool = False,
    kafka: dict[str, str] | None = None,
    input_floor: dict[str, dict[int, int]] | None = None,
    needed_from: int | None = None,
) -> GcResult:
    """Plan and (unless ``dry_run``) execute. ``truncate_determinants(batch)``: what a recovery
    mode keeps beside the checkpoint and truncates with it (the causal log: determinants up to
    ``batch``), returning its new low-water mark."""
    plan = plan_gc(
        checkpoint, keep_batches, shipped, delete_input_records, input_floor, needed_from
    )
    result = GcResult(plan, dry_run)
    if dry_run:
        return result
    for path, size in plan.files:
        try:
            Path(path).unlink()
            result.files_removed += 1
            result.bytes_freed += size
        except FileNotFoundError:
            continue
        except OSError as exc:
            result.errors.append(f"{path}: {exc}")
    if truncate_determinants is not None and plan.determinants_before is not None:
        try:
            result.determinant_low_water = truncate_determinants(plan.determinants_before - 1)
        except Exception as exc:  # noqa: BLE001 - reported, GC of files already done
            result.errors.append(f"determinant log: {exc}")
    if plan.input_records_before:
        result.input_records_deleted = delete_records_below(plan.input_records_before, kafka)
    return result


def common_input_floor(
    checkpoints: list[Path], keep_batches: int
) -> dict[str, dict[int, int]] | None:
    """Per input partition, the lowest start offset any of ``checkpoints`` keeps (None: one
    of them keeps all its input, e.g. a replacement that has not committed yet)."""
    floor: dict[str, dict[int, int]] = {}
    for checkpoint in checkpoints:
        needed = plan_gc(checkpoint, keep_batches, delete_input_records=True).input_records_before
        if not needed:
            return None
        for topic, parts in needed.items():
            mine = floor.setdefault(topic, {})
            for part, offset in parts.items():
                mine[int(part)] = min(offset, mine.get(int(part), offset))
    return floor
