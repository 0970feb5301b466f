"""Checkpoint garbage collection of a configured job: what its recovery mode needs kept (a
standby's shipped copies, a replica's checkpoint, a CEC job's replay start, the causal log),
applied to each of its checkpoints by ``recovery_lib.runtime.checkpoint_gc``, reported to the
metrics store (table gc_runs)."""

from __future__ import annotations

import json
from typing import Any

from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.ops.config import get_job
from recovery_lib.runtime.checkpoint_gc import GcResult, run_gc
from recovery_lib.runtime.table_gc import vacuum_table
from recovery_lib.settings import Settings


def record(store: Any, job: str, result: GcResult) -> None:
    store.add(
        "gc_runs",
        [
            (
                job,
                now_ms(),
                result.dry_run,
                result.plan.recovery_line,
                result.plan.oldest_kept_batch,
                result.files_removed if not result.dry_run else len(result.plan.files),
                result.bytes_freed if not result.dry_run else result.plan.bytes,
                result.determinant_low_water,
                json.dumps(result.to_dict(), default=str),
            )
        ],
    )
    store.flush()


def gc_job(
    name: str,
    dry_run: bool = False,
    keep_batches: int | None = None,
    delete_input_records: bool = False,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """GC of one configured job, reported to its metrics store; returns the result as a dict.
    ``settings``: the caller's (default: the process's); the job's files are found with them."""

    job = get_job(name, settings=settings)
    causal = job.causal_config() if job.process_mode.causal else None
    truncate = None
    if causal is not None:
        from recovery_lib.causal.driver import truncate as truncate_log

        def truncate(batch: int) -> int | None:
            return truncate_log(causal, batch)

    keep = keep_batches or job.keep_batches
    # What the job's recovery mode keeps: a standby's shipped copies, a replica's checkpoint
    # each on its own, a CEC job's replay start (recovery_lib/modes).
    needs = job.recovery_mode.gc_needs(job.place, keep, delete_input_records)
    results = [
        run_gc(
            checkpoint,
            keep,
            dry_run=dry_run,
            shipped=needs.shipped,
            truncate_determinants=truncate,
            delete_input_records=delete_input_records and needs.input_deletable,
            input_floor=needs.input_floor,
        )
        for checkpoint in needs.checkpoints
    ]
    with MetricsStore(job.settings.home / "metrics.duckdb") as store:
        for result in results:
            record(store, name, result)
    summary = results[0].to_dict()
    target = job.table_target
    kept = [r.plan.oldest_kept_batch for r in results]
    if target is not None and target.exists() and None not in kept:
        # Table versions go only below the job's recovery point: the oldest batch any of its
        # checkpoints may re-run must still find its commit (or a re-run would land again).
        recovery_point = min(b for b in kept if b is not None)
        summary["table_vacuum"] = vacuum_table(
            target.kind,
            target.location,
            job.table_app_id,
            recovery_point,
            dry_run,
            identifier=target.identifier,
        )
    summary["planned_files"] = [path for r in results for path, _ in r.plan.files][:200]
    if len(results) > 1:
        summary["replicas"] = [r.to_dict() for r in results]
    return summary
