"""COOR: coordinated checkpoints by epoch markers (CheckMate's coordinated protocol, Flink's
aligned barriers) on a pipeline of Spark queries.

A marker here is a position: Kafka partitions are totally ordered logs, so "marker e in
partition p" is the offset where epoch e ends. Registering the position (one line per topic
and epoch, stage_log.register_epoch) instead of writing a marker record leaves no race
between a record landing and a reader learning what it is: every offset a reader saw before
the registration lies below the registered position.

* The coordinator (``inject_epoch``) takes the source topics' current ends as marker e at an
  interval.
* Every stage's source cuts with ``MarkerCut``: freely, but never past marker e+1 of a
  partition, where e is the newest epoch the stage completed. A partition that reached the
  marker waits there until every input partition of the stage did (alignment); the batch
  that ends at marker e+1 everywhere completes epoch e+1.
* When that batch's records are acknowledged, the stage's commit hook registers epoch e+1 of
  its output topic (its ends after the batch: "forwards the marker") and records the
  checkpoint with its epoch; downstream stages align on those.
* Global checkpoint e is complete when every stage committed a batch completing e; the time
  from injection to the last such commit is the checkpoint time. Recovery rolls every stage
  back to its batch of the newest complete epoch (``global_checkpoint``).

Spark's batches in between (cut freely before a marker) are commits too, but recovery never
uses them: only epoch batches form consistent global checkpoints.

On a cyclic pipeline a stage's epoch-e batch would wait for marker e on the feedback topic,
which arrives only after the stage itself completed e: aligned COOR deadlocks there (the
paper does not run it). ``markerTopics`` names the topics a stage aligns on; a pipeline with a
cycle leaves its feedback edge out, and then an epoch's checkpoint does not hold the feedback
channel's in-flight records consistently, which is why CheckMate runs UNC and CIC there.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from recovery_lib.io.cut_policies import CutPolicy, FreeCut
from recovery_lib.io.exceptions import InvalidSourceOption
from recovery_lib.io.offsets import Offsets
from recovery_lib.protocols.stage_log import (
    StageLog,
    append_line,
    epoch_positions,
    read_lines,
    register_epoch,
)
from recovery_lib.runtime.checkpoint import batch_ids, source_offsets


def completed_epochs(
    protocol_dir: str | Path, stage: str, checkpoint: str | Path
) -> dict[int, int]:
    """epoch -> batch for the stage's committed epoch batches."""
    committed = set(batch_ids(Path(checkpoint) / "commits"))
    return {
        epoch: r.batch
        for r in StageLog(protocol_dir, stage).records()
        if r.batch in committed
        for epoch in r.epochs
    }


def markers(
    protocol_dir: str | Path, topics: Iterable[str]
) -> dict[int, dict[str, dict[int, int]]]:
    """epoch -> topic -> partition -> position, for epochs registered on every topic given."""
    per_topic = {t: epoch_positions(protocol_dir, t) for t in topics}
    if not per_topic:
        return {}
    common = set.intersection(*(set(e) for e in per_topic.values()))
    return {e: {t: per_topic[t][e] for t in per_topic} for e in sorted(common)}


def at_marker(
    marker: Mapping[str, Mapping[int, int]], ends: Mapping[str, Mapping[str, int]]
) -> bool:
    return all(
        int(ends.get(t, {}).get(str(p), -1)) == o
        for t, parts in marker.items()
        for p, o in parts.items()
    )


def passed(marker: Mapping[str, Mapping[int, int]], ends: Mapping[str, Mapping[str, int]]) -> bool:
    return all(
        int(ends.get(t, {}).get(str(p), -1)) >= o
        for t, parts in marker.items()
        for p, o in parts.items()
    )


class MarkerCut(CutPolicy):
    """Cut freely up to the stage's next epoch marker on each aligned partition.

    The next epoch is the oldest one the stage has not passed on all its aligned topics (read
    from its offset log, so several sources of one stage align together): a source that
    reached it holds there until the others did."""

    name = "marker"

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        opts = {k.lower(): v for k, v in options.items()}
        try:
            self.protocol_dir = opts["protocoldir"]
            self.checkpoint = Path(opts["stagecheckpoint"])
            self.aligned = [t for t in opts["markertopics"].split(",") if t]
        except KeyError:
            raise InvalidSourceOption(
                "cutPolicy marker needs protocolDir, stageCheckpoint and markerTopics (the "
                "pipeline runner sets them)"
            ) from None
        self.free = FreeCut(options)

    def cut(self, start: Offsets, available: Offsets, max_rows: int | None) -> Offsets:
        # ``available`` was read before the registry: a marker registered after that lies at
        # or beyond it, so a free cut never passes an epoch it did not know of.
        end = self.free.cut(start, available, max_rows)
        planned = batch_ids(self.checkpoint / "offsets")
        position = source_offsets(self.checkpoint, planned[-1]) if planned else {}
        for topic, parts in start.items():  # this source's own start is the newest
            position[topic] = dict(parts)
        # Before the first batch the other sources' positions are unknown: align on the topics
        # known (a first batch may then miss an epoch; a later one completes the next).
        ahead = [
            marker
            for marker in markers(self.protocol_dir, self.aligned).values()
            if not passed({t: m for t, m in marker.items() if t in position}, position)
        ]
        if not ahead:
            return end
        target = ahead[0]
        for topic, parts in end.items():
            for part in parts:
                cap = target.get(topic, {}).get(int(part))
                if cap is not None:
                    parts[part] = max(start[topic][part], min(parts[part], cap))
        return end


def epochs_completed(
    protocol_dir: str | Path,
    aligned: Iterable[str],
    ends: Mapping[str, Mapping[str, int]],
    done: Iterable[int],
) -> list[int]:
    """Epochs not in ``done`` whose marker is exactly at ``ends`` (several, when no record
    arrived between their markers)."""
    known = set(done)
    return [
        e
        for e, marker in markers(protocol_dir, aligned).items()
        if e not in known and at_marker(marker, ends)
    ]


def inject_epoch(
    protocol_dir: str | Path, ends: Mapping[str, Mapping[int, int]], epoch: int
) -> None:
    """The coordinator's step: the source topics' ``ends`` (exact, read just now) are marker
    ``epoch``."""
    injected_ms = int(time.time() * 1000)
    for topic, parts in ends.items():
        register_epoch(protocol_dir, topic, epoch, parts)
    append_line(Path(protocol_dir) / "epochs.jsonl", {"epoch": epoch, "injected_ms": injected_ms})


def last_epoch(protocol_dir: str | Path) -> int:
    lines = read_lines(Path(protocol_dir) / "epochs.jsonl")
    return max((int(e["epoch"]) for e in lines), default=0)


def global_checkpoint(
    protocol_dir: str | Path, checkpoints: Mapping[str, str | Path]
) -> tuple[int, dict[str, int]] | None:
    """The newest epoch every stage committed: (epoch, stage -> batch); None if there is none
    yet (recovery then starts every stage from its beginning)."""
    per_stage = {
        stage: completed_epochs(protocol_dir, stage, checkpoint)
        for stage, checkpoint in checkpoints.items()
    }
    common = set.intersection(*(set(e) for e in per_stage.values())) if per_stage else set()
    if not common:
        return None
    epoch = max(common)
    return epoch, {stage: epochs[epoch] for stage, epochs in per_stage.items()}


def checkpoint_times(protocol_dir: str | Path, stages: Iterable[str]) -> dict[int, float]:
    """Per complete epoch: ms from marker injection to the last stage's commit of it."""
    injected = {
        int(e["epoch"]): int(e["injected_ms"])
        for e in read_lines(Path(protocol_dir) / "epochs.jsonl")
    }
    names = list(stages)
    done: dict[int, list[int]] = {}
    for stage in names:
        for record in StageLog(protocol_dir, stage).records():
            for epoch in record.epochs:
                done.setdefault(epoch, []).append(record.taken_ms)
    return {
        epoch: float(max(times) - injected[epoch])
        for epoch, times in sorted(done.items())
        if epoch in injected and len(times) == len(names)
    }
