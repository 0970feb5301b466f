"""Scheduled consistency reports of a long-running job against a reference run.

A live job's output keeps growing, so the comparison is made *as of a snapshot*: the job's
last committed batch N. The reference run is the same query, failure-free, in a fresh
checkpoint, bounded to batch N's end offsets (``--ending-offsets``, ``--available-now``); it
is what the consistency DAG submits with the Spark provider's SparkSubmitOperator. Then:

- the job's outputs of batches <= N (output ids carry the batch) against all reference
  outputs, by the oracle (recovery_lib.verify);
- windowed queries: outputs of windows that end after the job's watermark at N are left out
  on both sides (the bounded reference closes them in its final batch, the job has not yet);
- the query's Great Expectations suite on the job's output.

The report goes to the metrics store (consistency_reports, expectation_results).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recovery_lib.errors import NotStarted
from recovery_lib.io.sinks.dedup_reader import SinkRecord, read_topic
from recovery_lib.io.sinks.ids import parse_output_id
from recovery_lib.io.sinks.modes import consumer_dedups, consumer_records
from recovery_lib.io.sinks.table_target import TableTarget
from recovery_lib.job.spec import resolve_job
from recovery_lib.runtime.checkpoint import batch_metadata, last_committed, source_offsets
from recovery_lib.settings import get_settings
from recovery_lib.verify.inputs import InputRecord, InputView
from recovery_lib.verify.oracle import judge
from recovery_lib.verify.schema import recorded_schema


def snapshot(checkpoint: str | Path) -> dict[str, Any]:
    """Batch N = last committed, its end offsets and watermark."""
    batch = last_committed(checkpoint)
    if batch is None:
        raise NotStarted(
            f"{checkpoint} has no committed batch yet: nothing to compare; run it again once "
            "the job committed one"
        )
    meta = batch_metadata(checkpoint, batch)
    return {
        "batch": batch,
        "offsets": source_offsets(checkpoint, batch),
        "watermark_ms": int(meta.get("batchWatermarkMs", 0)),
    }


def _batch_of(record: SinkRecord) -> int | None:
    try:
        return parse_output_id(record.id)[1] if record.id else None
    except ValueError:
        return None


def restrict(
    window_end: Callable[[dict], int] | None,
    run: list[SinkRecord],
    reference: list[SinkRecord],
    batch: int,
    watermark_ms: int,
) -> tuple[list[SinkRecord], list[SinkRecord], dict[str, int]]:
    """The comparable part of both sides (see the module docstring)."""
    run_part = [r for r in run if (b := _batch_of(r)) is None or b <= batch]
    dropped = {"run_after_snapshot": len(run) - len(run_part)}
    end_of = window_end
    if end_of is not None:

        def closed(record: SinkRecord) -> bool:
            try:
                return end_of(json.loads(record.value)) <= watermark_ms
            except (ValueError, KeyError, TypeError):
                return True

        before = (len(run_part), len(reference))
        run_part = [r for r in run_part if closed(r)]
        reference = [r for r in reference if closed(r)]
        dropped["run_open_windows"] = before[0] - len(run_part)
        dropped["reference_open_windows"] = before[1] - len(reference)
    return run_part, reference, dropped


def input_view(topics: dict[str, str], offsets: dict[str, dict[str, int]] | None) -> InputView:
    """The job's input topics as the oracle reads them, each partition up to ``offsets`` (the
    snapshot's end offsets: what the judged batches had read) when given."""

    def bounded(topic: str) -> list[InputRecord]:
        ends = (offsets or {}).get(topic)
        return [
            InputRecord(r.partition, r.offset, r.key, r.value)
            for r in read_topic(topic)
            if ends is None or r.offset < int(ends.get(str(r.partition), 0))
        ]

    return InputView(topics, reader=bounded)


def consistency_report(
    query: str,
    run_topic: str,
    reference_topic: str,
    snap: dict[str, Any] | None = None,
    sink_mode: str = "dedup",
    expectations: bool = True,
    store: Any = None,
    inputs: dict[str, str] | None = None,
    table: str | None = None,
    home: Path | None = None,
) -> dict[str, Any]:
    """The oracle (and GX) on the job's output; ``snap`` restricts to a snapshot. ``query`` is
    the job (module:attr or a name of jobs/). The job's output is read as a consumer of its
    ``sink_mode`` reads it (io/sinks/modes.py). ``inputs`` (input name -> topic): a job whose
    contract has no agreement with a reference (nondeterministic, judged by invariants alone)
    has its invariants read the input, up to the snapshot's offsets. ``table`` (a
    ``TableTarget`` spelled): the job writes that table, whose rows are judged instead, every
    copy counted (a table's reader sees them all). ``home``: where the runs recorded their
    output's schema (default: the process's RECOVERY_HOME)."""
    spec = resolve_job(query)
    if table:
        dedup, run = False, TableTarget.parse(table).read_outputs()
        run_topic = table
    else:
        dedup, run = consumer_dedups(sink_mode), list(consumer_records(run_topic, sink_mode))
    reference = list(read_topic(reference_topic))
    restricted: dict[str, int] = {}
    if snap is not None:
        run, reference, restricted = restrict(
            spec.contract.window_end, run, reference, snap["batch"], snap["watermark_ms"]
        )
    # Only a contract whose invariants judge what no agreement does reads the input: the
    # others are judged against the reference (their input-reading hooks, e.g. closed_by,
    # assume the whole input).
    needs_input = spec.contract.view is None or any(
        not inv.agreement_covers for inv in spec.contract.invariants
    )
    view = None
    if inputs and needs_input:
        view = input_view(inputs, snap["offsets"] if snap else None)
    # The output's Spark type, as the runs' writers recorded it (verify/schema.py).
    contract = spec.contract.with_schema(
        recorded_schema(home or get_settings().home, run_topic, reference_topic)
    )
    report = judge(spec.name, contract, run, reference, dedup, inputs=view).to_dict()
    report["snapshot"] = snap
    report["left_out"] = restricted
    gx = None
    if expectations:
        from recovery_lib.verify.expectations import validate_output

        gx = validate_output(spec.name, run, dedup, run_topic, lineage_ids=not spec.own_sink)
        report["expectations"] = gx.to_dict()
    report["ok"] = report["verdict"] == "consistent" and (gx is None or gx.success)
    if store is not None:
        store.add_consistency(f"job:{run_topic}", f"reference:{reference_topic}", report)
        if gx is not None:
            from recovery_lib.verify.expectations import record

            record(store, f"job:{run_topic}", gx)
        store.flush()
    return report
