"""Finding a poison record: the input record that makes a batch fail on every attempt.

Spark re-runs a failed micro-batch with the same offsets after each restart, so one record
that makes the job's code raise stops the job for good (in every engine we compare with).
When its supervisor saw the same batch fail ``poison_attempts`` times, it restarts the job
with ``RECOVERY_POISON_BATCH`` set; before its query starts, the job bisects that batch's input
range here and parks what it finds (io/parked.py): the source then sends the record to the
dead-letter topic with the exception and its position, and the batch goes through.

Each probe runs the job's own query over part of the batch's range from a scratch checkpoint
(fresh state), to a sink that writes nothing, in this process's Spark session: a partition's
range alone first, then halves of it, down to one record. A record that raises whatever the
state before it is found; a failure that needs earlier state, or that is not the input's
(a broker, a disk), is not: then nothing is parked and the supervisor's budget decides.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recovery_lib.errors import RecoveryError
from recovery_lib.io.parked import POISON_BATCH_ENV, ParkedRecord, park, read_parked
from recovery_lib.job.options import JobOptions
from recovery_lib.runtime.checkpoint import source_offsets

log = logging.getLogger(__name__)

__all__ = ["POISON_BATCH_ENV", "PoisonSearch", "batch_ranges", "find_and_park"]
PROBE_QUERY_PREFIX = "poison_probe_"  # a side query: not the job's progress (listener.py)
MAX_POISON_PER_BATCH = 10  # more than this many in one batch is not poison but a bug

Ranges = dict[tuple[str, int], tuple[int, int]]  # (topic, partition) -> [start, end)


def batch_ranges(checkpoint: str | Path, batch: int) -> Ranges:
    """The input ``batch`` reads: from the previous batch's end offsets to its own."""
    ends = source_offsets(checkpoint, batch)
    starts = source_offsets(checkpoint, batch - 1) if batch > 0 else {}
    return {
        (topic, int(part)): (int(starts.get(topic, {}).get(part, 0)), int(end))
        for topic, parts in ends.items()
        for part, end in parts.items()
    }


def _offsets_json(ranges: Ranges, pick: Callable[[tuple[int, int]], int]) -> str:
    out: dict[str, dict[str, int]] = {}
    for (topic, part), rng in ranges.items():
        out.setdefault(topic, {})[str(part)] = pick(rng)
    return json.dumps(out)


_RAISED = re.compile(r"^([A-Za-z_][\w.]*): \S")


def failure_reason(exc: BaseException) -> str:
    """The exception a query failed with, in one line: the last line of the Python traceback
    Spark quotes (before its dump of the query's plan), else the message's first line."""
    text = str(exc).split("=== Streaming Query ===")[0].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raised = [  # "module.Class: message", the way a Python traceback ends
        line
        for line in lines
        if (m := _RAISED.match(line)) is not None and m.group(1) != "SQLSTATE"
    ]
    chosen = raised[-1] if raised else (lines[0] if lines else repr(exc))
    return chosen[:500]


class PoisonSearchUnsupported(RecoveryError, RuntimeError):
    """The job cannot be probed (its build starts its own query, e.g. a CEC aggregate)."""


class PoisonSearch:
    """Bisects one batch's input with probes of the job's query (``build(spark, opts)``)."""

    def __init__(self, spark: Any, build: Callable[[Any, JobOptions], Any], opts: JobOptions):
        self.spark = spark
        self.build = build
        self.opts = opts
        self.probes = 0

    def probe(self, ranges: Ranges) -> str | None:
        """Run the query over ``ranges`` (every other partition empty); the error it raised,
        or None when it went through."""
        self.probes += 1
        scratch = tempfile.mkdtemp(prefix="poison-probe-")
        opts = dataclasses.replace(
            self.opts,
            checkpoint_dir=scratch,
            available_now=True,
            ending_offsets=_offsets_json(ranges, lambda r: r[1]),
            source_options={
                **self.opts.source_options,
                "startingOffsets": _offsets_json(ranges, lambda r: r[0]),
            },
            causal=None,  # a probe logs no determinants
            parked_file=self.opts.parked_path,  # skips what is parked already
        )
        try:
            df = self.build(self.spark, opts)
        except Exception as exc:  # the query itself, not a record: nothing to bisect
            shutil.rmtree(scratch, ignore_errors=True)
            raise PoisonSearchUnsupported(
                f"job {opts.query}'s query cannot be built for a probe: {exc}"
            ) from exc
        if not hasattr(df, "writeStream"):
            shutil.rmtree(scratch, ignore_errors=True)
            raise PoisonSearchUnsupported(f"job {opts.query} starts its own query: no probe")
        query = None
        try:
            query = (
                df.writeStream.queryName(f"{PROBE_QUERY_PREFIX}{self.probes}")
                .outputMode(opts.output_mode)
                .foreachBatch(lambda frame, _batch: frame.count())
                .option("checkpointLocation", str(Path(scratch) / opts.query))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            return None
        except Exception as exc:  # noqa: BLE001 - the probe's answer
            return failure_reason(exc)
        finally:
            if query is not None and query.isActive:
                query.stop()
            shutil.rmtree(scratch, ignore_errors=True)

    def find(self, ranges: Ranges) -> list[ParkedRecord]:
        """The poison records of ``ranges``, each parked as soon as it is found (so that the
        next probes skip it), until the whole range goes through."""
        found: list[ParkedRecord] = []
        live = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
        empty = {tp: (r[1], r[1]) for tp, r in ranges.items()}
        # A probe that fails on no input at all fails for its own reasons (the query cannot
        # run this way): bisecting would blame an innocent record.
        if (error := self.probe(empty)) is not None:
            raise PoisonSearchUnsupported(f"a probe over no input fails: {error}")
        while len(found) < MAX_POISON_PER_BATCH:
            error = self.probe({**empty, **live})
            if error is None:
                return found
            record = self._bisect(live, empty)
            if record is None:
                log.warning("the batch fails on all its input but on no single record: %s", error)
                return found
            park(self.opts.parked_path, [record])
            found.append(record)
            log.warning("parked poison record %s: %s", record.position, record.reason)
        return found

    def _bisect(self, live: Ranges, empty: Ranges) -> ParkedRecord | None:
        """The first record that fails on its own: the failing partition, then halves."""
        for tp, (start, end) in live.items():
            if self.probe({**empty, tp: (start, end)}) is None:
                continue
            lo, hi = start, end
            while hi - lo > 1:  # the poison is in [lo, hi)
                mid = (lo + hi) // 2
                if self.probe({**empty, tp: (lo, mid)}) is not None:
                    hi = mid
                else:
                    lo = mid
            if (last := self.probe({**empty, tp: (lo, lo + 1)})) is not None:
                return ParkedRecord(tp[0], tp[1], lo, last)
            return None
        return None


def find_and_park(
    spark: Any,
    build: Callable[[Any, JobOptions], Any],
    opts: JobOptions,
    batch: int,
    on_parked: Callable[[ParkedRecord], None] | None = None,
) -> list[ParkedRecord]:
    """What the job does before its query starts when ``RECOVERY_POISON_BATCH`` is set."""
    ranges = batch_ranges(opts.checkpoint_path, batch)
    if not ranges:
        log.warning("poison search: batch %d has no offsets in the checkpoint", batch)
        return []
    before = len(read_parked(opts.parked_path))
    search = PoisonSearch(spark, build, opts)
    log.warning(
        "batch %d failed on every attempt: looking for a poison record in %s",
        batch,
        {f"{t}/{p}": r for (t, p), r in ranges.items()},
    )
    try:
        found = search.find(ranges)
    except PoisonSearchUnsupported as exc:
        log.warning("no poison search: %s", exc)
        return []
    for record in found:
        if on_parked is not None:
            on_parked(record)
    log.warning(
        "poison search of batch %d: %d record(s) parked in %d probes (%d parked before)",
        batch,
        len(found),
        search.probes,
        before,
    )
    return found
