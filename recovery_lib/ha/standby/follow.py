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
marker: until the marker exists it follows only batches the primary has committed (an entry in
the ``commits`` directory beside ``followLog``) and otherwise plans nothing, so its state
stays one batch behind the primary's at most and its sink (held by the same marker) writes
nothing the primary has not delivered. From the takeover on it follows the rest of the log,
then cuts as above.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from recovery_lib.io.cut_policies import CutPolicy, make_cut_policy
from recovery_lib.io.exceptions import InvalidSourceOption
from recovery_lib.io.offsets import Offsets
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

    def planning(self) -> int:
        ids = batch_ids(self.checkpoint / "offsets")
        return ids[-1] + 1 if ids else 0

    def holding(self) -> bool:
        """A hot standby before its takeover."""
        return self.hold_until is not None and not self.hold_until.exists()

    def cut(self, start: Offsets, available: Offsets, max_rows: int | None) -> Offsets:
        holding = self.holding()
        if holding or not self.done:
            batch = self.planning()
            committed = not holding or (self.commits / str(batch)).exists()
            ends = logged_ends(self.tail / str(batch), set(available)) if committed else None
            if ends is not None:
                self.followed.append(batch)
                # Partitions the entry does not name stay where they are.
                return {
                    t: {p: ends.get(t, {}).get(p, start[t][p]) for p in parts}
                    for t, parts in start.items()
                }
            if holding:
                return start  # the primary has not committed it (yet): plan nothing
            self.done = True  # past the primary's last batch: from here on, a normal source
        return self.then.cut(start, available, max_rows)


FOLLOW_POLICY = f"{__name__}:FollowLog"  # the source's cutPolicy option names it so
