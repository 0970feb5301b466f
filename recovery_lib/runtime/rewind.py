"""Rewinding a Spark streaming checkpoint to batch b (Spark has no API for it; people delete
checkpoint files by hand). Afterwards the query's last committed batch is b: a restart runs
b + 1 next, from b's end offsets, on the state after b.

``rewind(checkpoint, b)``:
  Step 1. Check: b is committed, and every state store can rebuild its version b + 1 (state
          after batch b) from the files that stay: a snapshot (HDFS ``.snapshot``, RocksDB
          ``.zip``) at or before it and every delta / changelog after that snapshot. GC may
          have removed what b needs; then nothing is touched.
  Step 2. Plan: offset- and commit-log entries of batches after b; state files of versions
          after b + 1. ``dry_run`` stops here.
  Step 3. Move the planned files (never delete) under ``<checkpoint>.rewound/<stamp>/`` with
          their relative paths: undoing is moving them back. The moved offset log is the
          tail a restart can follow (``--follow-log <stamp>/offsets``, the cut policy
          ``follow``) to re-run the rewound batches with their first boundaries, so that every
          output id means the same record as before (dedup and release sinks need that).
  Step 4. Verify: the last committed batch is b, no offset-log entry is past b, every state
          store still rebuilds version b + 1.

Outputs already written by the rewound batches stay where they are: the sinks' ids make the
re-run's copies recognisable (dedup readers, the release barrier), and causal logs keep the
determinants those batches logged, so a re-run repeats them.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from recovery_lib.errors import RecoveryError
from recovery_lib.runtime.checkpoint import (
    SNAPSHOT_KINDS,
    batch_ids,
    last_committed,
    state_stores,
    store_versions,
)


class RewindRefused(RecoveryError, RuntimeError):
    """The checkpoint cannot be rewound to that batch (the message says why and what to do)."""


@dataclass
class RewindPlan:
    checkpoint: str
    to_batch: int
    last_committed: int | None
    files: list[str] = field(default_factory=list)  # relative to the checkpoint
    stores: int = 0
    moved_to: str | None = None
    dry_run: bool = True

    @property
    def batches_rewound(self) -> int:
        return (self.last_committed or 0) - self.to_batch


def rebuilds(store: Path, version: int) -> bool:
    """Can ``store`` load ``version`` from its files? A snapshot at or before it (or none
    needed: version 0 is empty) plus every delta/changelog after the snapshot."""
    if version == 0:
        return True
    kinds = {v: {kind for _, kind in files} for v, files in store_versions(store).items()}
    bases = [v for v, k in kinds.items() if v <= version and k & SNAPSHOT_KINDS]
    base = max(bases, default=0)
    return all(kinds.get(v, set()) - SNAPSHOT_KINDS for v in range(base + 1, version + 1))


def plan_rewind(checkpoint: str | Path, to_batch: int) -> RewindPlan:
    """Steps 1 and 2."""
    ck = Path(checkpoint)
    if not (ck / "offsets").exists():
        raise RewindRefused(f"{ck} is not a Spark streaming checkpoint (no offsets/ directory)")
    committed = last_committed(ck)
    plan = RewindPlan(str(ck), to_batch, committed)
    if committed is None or to_batch < 0 or to_batch > committed:
        raise RewindRefused(
            f"batch {to_batch} is not committed in {ck} (committed: "
            f"{'none' if committed is None else f'0..{committed}'}); rewind to a committed batch"
        )
    if (
        not (ck / "commits" / str(to_batch)).exists()
        or not (ck / "offsets" / str(to_batch)).exists()
    ):
        raise RewindRefused(
            f"the offset or commit log of batch {to_batch} was removed (checkpoint GC keeps "
            f"only the newest batches); the oldest batch left is {min(batch_ids(ck / 'commits'))}"
        )
    version = to_batch + 1  # a store's version v is its state after batch v - 1
    stores = state_stores(ck / "state")
    plan.stores = len(stores)
    for store in stores:
        if not rebuilds(store, version):
            raise RewindRefused(
                f"state store {store.relative_to(ck)} cannot rebuild version {version} (state "
                f"after batch {to_batch}): its snapshot or deltas were removed, probably by "
                "checkpoint GC. Rewind to a newer batch"
            )
        for v, files in sorted(store_versions(store).items()):
            if v > version:
                plan.files += sorted(str(path.relative_to(ck)) for path, _ in files)
    for log in ("offsets", "commits"):
        for batch in batch_ids(ck / log):
            if batch > to_batch:
                for name in (str(batch), f".{batch}.crc"):
                    if (ck / log / name).exists():
                        plan.files.append(f"{log}/{name}")
    return plan


def rewind(checkpoint: str | Path, to_batch: int, dry_run: bool = False) -> RewindPlan:
    """Rewind ``checkpoint`` to ``to_batch`` (module docstring); the query must be stopped."""
    plan = plan_rewind(checkpoint, to_batch)
    plan.dry_run = dry_run
    if dry_run or not plan.files:
        return plan
    ck = Path(checkpoint)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = Path(f"{ck}.rewound") / f"{stamp}-to-{to_batch}"
    for rel in plan.files:  # Step 3.
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(ck / rel), str(target / rel))
    plan.moved_to = str(target)
    committed = last_committed(ck)  # Step 4.
    offsets = batch_ids(ck / "offsets")
    broken = [s for s in state_stores(ck / "state") if not rebuilds(s, to_batch + 1)]
    if committed != to_batch or (offsets and offsets[-1] != to_batch) or broken:
        raise RewindRefused(
            f"after moving {len(plan.files)} files to {target} the checkpoint does not verify "
            f"(last committed {committed}, newest offsets {offsets[-1] if offsets else None}, "
            f"stores that cannot rebuild: {broken}); move them back to undo"
        )
    return plan
