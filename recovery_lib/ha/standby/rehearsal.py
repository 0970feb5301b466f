"""Rehearsal: an idle standby runs its query once, for one batch, on a scratch copy.

Measured (docs/standby.md): what a takeover waits for is not the JVM but the first batch of a
fresh query, ~18 s on 2 cores for 16k rows that take ~1.5 s once warm: code generation for the
query's stages, the Python workers importing the source and the UDFs and opening their Kafka
clients, the RocksDB native library. All of that is per JVM or per worker process, not per
query, so running the same query once ahead of time pays it before the failure. The rehearsal
restores the newest shipped copy into a scratch directory, runs one batch (the primary's next
batch, via the follow policy) and deletes the scratch copy. The batch goes through the job's
own output path with the sink held (``holdUntil`` a marker that never appears: the tasks
compute their rows and write nothing, as a hot standby's do), without the sink's hooks and
epoch store: a restart's first batch spends seconds on the sink's first batch write (the
Python planner workers that create and commit it, the writer's imports in the executors'
workers; docs/standby.md), which a ``noop`` sink would leave to the takeover. A job whose
output is a lakehouse table still rehearses into ``noop`` (its sink commits in the driver).
Nothing leaves a rehearsal except dead letters, which carry deterministic ids (readers dedup
them).

Not for causally logged jobs: the rehearsal's live services would log determinants for a
batch that the real takeover must replay from the primary's log.

Spark stops a Python worker idle for 60 s, the sink's planner workers too (measured: a held
batch write of two rows takes 3.0 s the first time, 0.24 s the next, 1.9 s again after 70 s
idle), so the standby's warm loop also writes two rows through the held sink
(``keep_sink_warm``) every ``RECOVERY_STANDBY_WARM_EVERY_S``. A rehearsal that found no
input after its copy ran no batch and warmed nothing (a copy can precede any input, or the
input be idle): the standby rehearses again on a newer copy until one batch with input rows
ran.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recovery_lib.ha.standby.shipping import latest_complete, restore
from recovery_lib.io.sinks.modes import HOLDABLE_MODES
from recovery_lib.io.source import SOURCE_NAME
from recovery_lib.settings import get_settings
from recovery_lib.spark.session import use_in_this_thread

REHEARSAL_QUERY_PREFIX = "rehearsal_"
# A sink mode a held writer does not take (io/sinks/modes.py HOLDABLE_MODES) rehearses as
# dedup: a held batch writes nothing, so the mode changes only which code stays cold.
# Sink options a rehearsal drops: a checkpoint protocol's commit record, fault injection.
DROPPED_SINK_OPTIONS = ("commithook", "writefault", "writeguard", "epochstore", "epochfile")
HELD_MARKER = "never-taken-over"  # in the scratch copy; nothing creates it


@dataclasses.dataclass(frozen=True)
class JobOutput:
    """How the job writes its output: the job layer's ``write_output`` and ``sink_options``
    (recovery_lib/job/frames.py ``OUTPUT``), handed down to the standby, which sits below it."""

    start: Callable[..., Any]  # (df, opts, once=True) -> StreamingQuery
    sink_options: Callable[[Any], dict[str, str]]  # opts -> the Kafka sink's options


def rehearsal_options(opts: Any, scratch: Path) -> Any:
    """The job's options for its rehearsal: the scratch checkpoint, a query name of its own,
    the sink held and without hooks or fencing (it writes nothing, so nothing can be fenced)."""
    sink_options = {
        k: v for k, v in opts.sink_options.items() if k.lower() not in DROPPED_SINK_OPTIONS
    }
    # The sink's hold only: a takeover marker would hold the source too (a hot standby's
    # follow policy plans only what the primary committed), and no batch would run.
    sink_options["holdUntil"] = str(scratch / HELD_MARKER)
    return dataclasses.replace(
        opts,
        checkpoint_dir=str(scratch),
        stream_name=f"{REHEARSAL_QUERY_PREFIX}{opts.query}",
        takeover_marker=None,
        epoch_store=None,
        epoch_file=None,
        sink_mode=opts.sink_mode if opts.sink_mode in HOLDABLE_MODES else "dedup",
        sink_options=sink_options,
    )


def held_sink(opts: Any, output: JobOutput | None) -> bool:
    """Whether the rehearsal and the warm loop go through the job's own sink, held (else the
    rehearsal writes into ``noop`` and the warm loop skips the sink): not without the job's
    output path, not for a lakehouse-table output, not with the setting off."""
    return output is not None and not opts.table_sink and get_settings().standby_rehearse_sink


def keep_sink_warm(
    spark: Any, opts: Any, standby_dir: str | Path, output: JobOutput | None
) -> bool:
    """A held batch write of two rows through the job's sink (nothing is written): keeps the
    sink's Python planner and writer workers up. False: not for this job (no output path
    given, a lakehouse-table output, or the setting off)."""
    if not held_sink(opts, output):
        return False
    use_in_this_thread(spark)  # the warm loop's own thread
    held = rehearsal_options(opts, Path(standby_dir) / "rehearsal")
    # Two plain rows: no determinant column to carry, whatever the job's causal storage.
    sink = {k: v for k, v in output.sink_options(held).items() if k != "causalCarrier"}
    rows = spark.range(0, 2, numPartitions=2).selectExpr(
        "CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value"
    )
    rows.write.format(SOURCE_NAME).options(**sink).option("batchId", "0").mode("append").save()
    return True


def warm_workers(spark: Any, opts: Any, scratch: str | Path, output: JobOutput | None) -> None:
    """A tiny Python job so that the worker pool is up (and stays up: Spark stops workers
    idle for 60 s), and a held write through the job's sink for its planner workers
    (``keep_sink_warm``; none without ``output``). A standby's warm loop and a spare process
    (runtime/spare.py) run it while they wait."""

    def identity(batches):  # noqa: ANN001, ANN202
        yield from batches

    df = spark.range(0, 8, numPartitions=2)
    df.mapInArrow(identity, df.schema).count()
    if output is not None:
        keep_sink_warm(spark, opts, scratch, output)


def rehearse(
    spark: Any,
    build: Callable[[Any, Any], Any],
    opts: Any,
    standby_dir: str | Path,
    output: JobOutput | None = None,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    if opts.causal is not None:
        return {"skipped": "causal job: a rehearsal would log determinants"}
    manifest = latest_complete(standby_dir, verify=False)
    if manifest is None:
        return {"skipped": "no shipped copy yet"}
    use_in_this_thread(spark)  # the rehearsal's own thread: its sink is looked up there
    scratch = Path(standby_dir) / "rehearsal"
    shutil.rmtree(scratch, ignore_errors=True)
    started = time.monotonic()
    try:
        restore(standby_dir, manifest, scratch)
        scratch_opts = rehearsal_options(opts, scratch)
        df = build(spark, scratch_opts)
        noop = not held_sink(scratch_opts, output)
        if noop:
            query = (
                df.writeStream.format("noop")
                .outputMode(scratch_opts.output_mode)
                .option("checkpointLocation", scratch_opts.checkpoint_path)
                .queryName(scratch_opts.query_name)
                .trigger(once=True)
                .start()
            )
        else:
            query = output.start(df, scratch_opts, once=True)
        finished = query.awaitTermination(timeout_s)
        if not finished:
            query.stop()
        return {
            "rehearsal_s": round(time.monotonic() - started, 2),
            "copy_batch": manifest.batch,
            "finished": bool(finished),
            "sink": "noop" if noop else "held",
            # 0: no batch ran (nothing after the copy yet); the standby rehearses again later
            "input_rows": sum(int(p.get("numInputRows", 0)) for p in query.recentProgress),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
