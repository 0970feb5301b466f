"""Checkpoint garbage collection of a configured job: what its recovery mode needs kept (a
standby's shipped copies, a replica's checkpoint, a CEC job's replay start, the causal log),
applied to each of its checkpoints by ``recovery_lib.runtime.checkpoint_gc``, reported to the
metrics store (table gc_runs)."""

from __future__ import annotations

import json
from typing import Any

from recovery_lib.runtime.checkpoint_gc import GcResult, common_input_floor, run_gc, shipped_batch


def record(store: Any, job: str, result: GcResult) -> None:
    from recovery_lib.metrics.store import now_ms

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
) -> dict[str, Any]:
    """GC of one configured job, reported to the metrics store; returns the result as a dict."""
    from recovery_lib.metrics.store import MetricsStore
    from recovery_lib.ops.config import get_job
    from recovery_lib.settings import get_settings

    job = get_job(name)
    causal = job.causal_config() if job.mode == "causal" else None
    truncate = None
    if causal is not None:
        from recovery_lib.causal.driver import truncate as truncate_log

        def truncate(batch: int) -> int | None:
            return truncate_log(causal, batch)

    floor = None
    if job.mode == "cec" and delete_input_records:
        from recovery_lib.cec.aggregate import replay_floor
        from recovery_lib.cec.log import OutputLog
        from recovery_lib.job.options import input_topic
        from recovery_lib.kafka.clients import client_config

        # The CEC job's single input: below T nothing is replayed again.
        (input_name,) = job.spec.inputs
        topic = input_topic(input_name, job.input_prefix, job.inputs)
        floor = {topic: replay_floor(OutputLog(job.out_topic, client_config()))}
    # A replicated job: each replica's checkpoint alone, and input records only below what
    # both replicas' oldest kept batches start at (a replacement restarts from either).
    checkpoints = [root / job.query for root in job.replica_checkpoint_dirs] or [job.checkpoint]
    keep = keep_batches or job.keep_batches
    if delete_input_records and len(checkpoints) > 1:
        floor = common_input_floor(checkpoints, keep)
        delete_input_records = floor is not None
    results = [
        run_gc(
            checkpoint,
            keep,
            dry_run=dry_run,
            shipped=shipped_batch(job.standby_dir),
            truncate_determinants=truncate,
            delete_input_records=delete_input_records,
            input_floor=floor,
        )
        for checkpoint in checkpoints
    ]
    with MetricsStore(get_settings().home / "metrics.duckdb") as store:
        for result in results:
            record(store, name, result)
    summary = results[0].to_dict()
    summary["planned_files"] = [path for r in results for path, _ in r.plan.files][:200]
    if len(results) > 1:
        summary["replicas"] = [r.to_dict() for r in results]
    return summary
