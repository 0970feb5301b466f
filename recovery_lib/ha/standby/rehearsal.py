"""Rehearsal: an idle standby runs its query once, for one batch, on a scratch copy.

Measured (docs/standby.md): what a takeover waits for is not the JVM but the first batch of a
fresh query, ~18 s on 2 cores for 16k rows that take ~1.5 s once warm: code generation for the
query's stages, the Python workers importing the source and the UDFs and opening their Kafka
clients, the RocksDB native library. All of that is per JVM or per worker process, not per
query, so running the same query once ahead of time pays it before the failure. The rehearsal
restores the newest shipped copy into a scratch directory, runs one batch (the primary's next
batch, via the follow policy) into the ``noop`` sink, and deletes the scratch copy. Nothing
leaves it except dead letters, which carry deterministic ids (readers dedup them).

Not for causally logged jobs: the rehearsal's live services would log determinants for a
batch that the real takeover must replay from the primary's log.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recovery_lib.ha.standby.shipping import latest_complete, restore

REHEARSAL_QUERY_PREFIX = "rehearsal_"


def rehearse(
    spark: Any,
    build: Callable[[Any, Any], Any],
    opts: Any,
    standby_dir: str | Path,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    if opts.causal is not None:
        return {"skipped": "causal job: a rehearsal would log determinants"}
    manifest = latest_complete(standby_dir, verify=False)
    if manifest is None:
        return {"skipped": "no shipped copy yet"}
    scratch = Path(standby_dir) / "rehearsal"
    shutil.rmtree(scratch, ignore_errors=True)
    started = time.monotonic()
    try:
        restore(standby_dir, manifest, scratch)
        scratch_opts = dataclasses.replace(opts, checkpoint_dir=str(scratch))
        query = (
            build(spark, scratch_opts)
            .writeStream.format("noop")
            .outputMode(scratch_opts.output_mode)
            .option("checkpointLocation", scratch_opts.checkpoint_path)
            .queryName(f"{REHEARSAL_QUERY_PREFIX}{opts.query}")
            .trigger(once=True)
            .start()
        )
        finished = query.awaitTermination(timeout_s)
        if not finished:
            query.stop()
        return {
            "rehearsal_s": round(time.monotonic() - started, 2),
            "copy_batch": manifest.batch,
            "finished": bool(finished),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
