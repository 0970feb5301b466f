"""Garbage collection of a pipeline, following its recovery line.

What a recovery can still need of stage s is bounded below by the oldest point any failure
could roll s back to:

* COOR: s's batch of the newest complete global checkpoint;
* UNC / CIC: s's point on the recovery line for the failure of every stage at once (rollback
  propagation is monotone: more failed stages never give a newer line), under the pipeline's
  rule (local or strict);
* none: s's own last commit (each query alone).

Each stage's Spark checkpoint is then collected as a job's is
(runtime/checkpoint_gc.py, ``keep_batches`` below that point), and the in-flight log (the
topic between two stages) is truncated below the input position of every reader's oldest
kept batch: never above what a downstream recovery line can re-read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recovery_lib.kafka.admin import delete_records_below
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.pipeline.runner import PipelineRun, needed_from
from recovery_lib.pipeline.spec import PipelineSpec
from recovery_lib.runtime.checkpoint import source_offsets
from recovery_lib.runtime.checkpoint_gc import run_gc
from recovery_lib.settings import Settings, get_settings


def pipeline_gc(
    spec: PipelineSpec,
    home: str | Path,
    keep_batches: int = 10,
    dry_run: bool = False,
    truncate_in_flight: bool = True,
    kafka: dict[str, str] | None = None,
) -> dict[str, Any]:
    run = PipelineRun(spec, home, kafka=kafka)
    view = run.view
    line = needed_from(run)
    report: dict[str, Any] = {"pipeline": spec.name, "needed_from": line, "stages": {}}
    oldest: dict[str, int | None] = {}
    for stage in view.stages:
        checkpoint = view.checkpoints[stage.name]
        if not checkpoint.exists():
            report["stages"][stage.name] = {"notes": ["no checkpoint yet"]}
            oldest[stage.name] = None
            continue
        result = run_gc(checkpoint, keep_batches, dry_run=dry_run, needed_from=line[stage.name])
        oldest[stage.name] = result.plan.oldest_kept_batch
        report["stages"][stage.name] = result.to_dict()
    # The in-flight log: below every reader's oldest kept batch's start.
    before: dict[str, dict[str, int]] = {}
    for topic in view.writers:
        readers = [s for s in view.stages if topic in s.reads]
        floors: list[dict[str, int]] = []
        for reader in readers:
            kept = oldest.get(reader.name)
            if not kept:  # nothing removed there: the topic is needed from its start
                floors = []
                break
            floors.append(source_offsets(view.checkpoints[reader.name], kept - 1).get(topic, {}))
        if floors and all(floors):
            parts = set().union(*floors)
            before[topic] = {p: min(f.get(p, 0) for f in floors) for p in parts}
    report["in_flight_before"] = before
    if truncate_in_flight and before and not dry_run:
        report["in_flight_deleted"] = delete_records_below(before, dict(run.kafka))
    return report


def record(report: dict[str, Any], dry_run: bool, settings: Settings | None = None) -> None:
    """One gc_runs row per stage, job = <pipeline>/<stage>."""

    rows = []
    for stage, result in report["stages"].items():
        plan = result.get("plan", {})
        rows.append(
            (
                f"{report['pipeline']}/{stage}",
                now_ms(),
                dry_run,
                report["needed_from"].get(stage),
                plan.get("oldest_kept_batch"),
                plan.get("files", 0) if dry_run else result.get("files_removed", 0),
                plan.get("bytes", 0) if dry_run else result.get("bytes_freed", 0),
                None,
                json.dumps({**result, "in_flight_before": report["in_flight_before"]}, default=str),
            )
        )
    with MetricsStore((settings or get_settings()).home / "metrics.duckdb") as store:
        store.add("gc_runs", rows)
