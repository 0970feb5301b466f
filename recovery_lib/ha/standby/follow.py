"""Replaying the primary's batches with its exact boundaries (cut policy ``follow``).

A standby restores a copy of the primary's checkpoint at batch N, but the primary may have
run (and written outputs of) batches N+1..M before it died. The standby must run exactly those
batches again, with the same ids and the same input ranges, so that every output id means the
same record in both runs and readers can dedup. The primary's offset-log entries past N (the
*tail*, shipped continuously and synced once more at takeover) say where each batch ended.

Spark asks a source ``latestOffset(start)`` while planning batch b = (newest entry of the
query's own offset log) + 1, before writing entry b. This policy reads the query's offset log
to learn b, and returns the end recorded in the primary's entry b for this source's topics.
Past the tail it cuts as the primary would have: freely, or by the policy named in
``followThen`` (a pipeline stage's checkpoint protocol).

A hot standby (process.py) runs its query all along, on the primary's own offset log
(``followLog`` = the primary's ``offsets`` directory) with ``followHoldUntil`` = its takeover
marker: until the marker exists it plans nothing the primary has not committed (an entry in
the ``commits`` directory beside ``followLog``), and its sink (held by the same marker) writes
nothing. So that it catches up on a busy machine, one of its batches may cover several
committed batches of the primary (to the newest one: their outputs are held anyway). Its
batch ids then fall behind the primary's; at the takeover it records the difference in the
batch shift file of its checkpoint (``batch_shift``, which the sink adds to Spark's batch
id), follows the primary's uncommitted batch with its exact boundaries, whose outputs thus
get the ids the primary gave them, and then cuts as above.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from recovery_lib.io.cut_policies import CutPolicy, make_cut_policy
from recovery_lib.io.exceptions import InvalidSourceOption
from recovery_lib.io.offsets import Offsets
from recovery_lib.io.sinks.kafka_sink import BATCH_SHIFT_FILE
from recovery_lib.runtime.checkpoint import batch_ids


def logged_ends(entry: Path, topics: set[str]) -> Offsets | None:
    """This source's end offsets in an offset-log entry (the line naming its topics)."""
    try:
        lines = entry.read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:  # "v1", batch metadata, then one line per source
        try:
            offsets = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(offsets, dict) and offsets and set(offsets) <= topics:
            return {t: {str(p): int(o) for p, o in parts.items()} for t, parts in offsets.items()}
    return None


class FollowLog(CutPolicy):
    name = "follow"

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        opts = {k.lower(): v for k, v in options.items()}
        try:
            self.tail = Path(opts["followlog"])
            self.checkpoint = Path(opts["followcheckpoint"])
        except KeyError:
            raise InvalidSourceOption(
                "cutPolicy=follow needs followLog (the shipped tail of the primary's offset "
                "log) and followCheckpoint (this query's own checkpoint directory)"
            ) from None
        hold = opts.get("followholduntil")
        self.hold_until = Path(hold) if hold else None  # a hot standby's takeover marker
        self.commits = self.tail.parent / "commits"
        then = opts.get("followthen", "free")
        if then == FOLLOW_POLICY:
            raise InvalidSourceOption("followThen cannot be the follow policy itself")
        self.then = make_cut_policy(then, options)
        self.done = False
        self.followed: list[int] = []
        # Hot: the primary batch whose end this query has reached, and the one just cut to.
        self.reached: int | None = None
        self._cut_to: int | None = None
        self.shifted = False

    def planning(self) -> int:
        ids = batch_ids(self.checkpoint / "offsets")
        return ids[-1] + 1 if ids else 0

    def holding(self) -> bool:
        """A hot standby before its takeover."""
        return self.hold_until is not None and not self.hold_until.exists()

    def cut(self, start: Offsets, available: Offsets, max_rows: int | None) -> Offsets:
        if self.hold_until is not None:
            if self.reached is None:  # restored from a copy of the primary: ids coincide
                self.reached = self.planning() - 1
            if self.holding():
                return self._catch_up(start, available)
            if not self.shifted:  # the takeover: the primary's ids from here on
                self._record_shift()
        if not self.done:
            batch = self.planning() if self.reached is None else self.reached + 1
            ends = logged_ends(self.tail / str(batch), set(available))
            if ends is not None:
                self.followed.append(batch)
                self._cut_to = batch
                return _at(ends, start)
            self.done = True  # past the primary's last batch: from here on, a normal source
        return self.then.cut(start, available, max_rows)

    def _catch_up(self, start: Offsets, available: Offsets) -> Offsets:
        """Before the takeover: to the end of the primary's newest committed batch."""
        committed = batch_ids(self.commits)
        newest = committed[-1] if committed else None
        assert self.reached is not None
        if newest is None or newest <= self.reached:
            return start  # nothing new committed: plan nothing
        ends = logged_ends(self.tail / str(newest), set(available))
        if ends is None:
            return start
        self.followed.append(newest)
        self._cut_to = newest
        return _at(ends, start)

    def _record_shift(self) -> None:
        """Own batch ``planning()`` is the primary's ``reached + 1``: their difference, on
        top of any shift this checkpoint inherited, into the batch shift file. Each of the
        query's sources has a policy of its own: the first one records, the others find the
        record for this batch and leave it."""
        assert self.reached is not None
        path = self.checkpoint / BATCH_SHIFT_FILE
        planning = self.planning()
        try:
            recorded = json.loads(path.read_text())
        except FileNotFoundError:
            recorded = {"shift": 0, "from_batch": None}
        if recorded.get("from_batch") != planning:
            shift = int(recorded["shift"]) + (self.reached + 1 - planning)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"shift": shift, "from_batch": planning}))
            tmp.replace(path)
        self.shifted = True

    def planned(self, start: Offsets, end: Offsets) -> None:
        if self.hold_until is not None and self._cut_to is not None and end != start:
            self.reached = self._cut_to  # Spark planned the batch: its end is reached
        self._cut_to = None


def _at(ends: Offsets, start: Offsets) -> Offsets:
    """The logged ends; partitions the entry does not name stay where they are."""
    return {
        t: {p: ends.get(t, {}).get(p, start[t][p]) for p in parts} for t, parts in start.items()
    }


FOLLOW_POLICY = f"{__name__}:FollowLog"  # the source's cutPolicy option names it so
