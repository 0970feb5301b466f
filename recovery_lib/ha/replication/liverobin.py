"""LiveRobin (leaderless active replication), as the cut policy ``liverobin``.

A batch that starts at ``start`` ends right after the first indexed heartbeat that lies at or
after ``start`` in every partition of the source (heartbeats.py), or after the k-th such
heartbeat with ``heartbeatsPerBatch`` k. Both replicas read the same input and the same
index, so they cut the same batches without exchanging anything; a replica whose next
heartbeat is not indexed yet waits for it inside the cut.

The rule is a function of ``start`` and the index only, so a restarted or replacement replica
(whose checkpoint's next batch starts right after a heartbeat) continues on the same cuts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from recovery_lib.ha.replication.heartbeats import HeartbeatEntry, HeartbeatIndex
from recovery_lib.io.cut_policies import CutPolicy
from recovery_lib.io.exceptions import InvalidSourceOption
from recovery_lib.io.offsets import Offsets
from recovery_lib.kafka.control_topic import ControlTopic

log = logging.getLogger(__name__)

POLL_S = 0.02  # how often a waiting replica looks at the index
WAIT_WARNING_S = 30.0


def at_or_after(entry: HeartbeatEntry, start: Offsets) -> bool:
    """Whether heartbeat ``entry`` lies at or after ``start`` in every partition it names."""
    return all(
        entry.at.get(t, {}).get(p, off) >= off
        for t, parts in start.items()
        for p, off in parts.items()
    )


def heartbeat_cut(
    start: Offsets, entries: Sequence[HeartbeatEntry], per_batch: int = 1
) -> Offsets | None:
    """The end of the batch that starts at ``start``, or None when its heartbeat is not
    indexed yet. Partitions an entry does not name stay where they are."""
    usable = [e for e in entries if at_or_after(e, start)]
    if len(usable) < per_batch:
        return None
    at = usable[per_batch - 1].at
    return {
        t: {p: at[t][p] + 1 if p in at.get(t, {}) else off for p, off in parts.items()}
        for t, parts in start.items()
    }


class HeartbeatCut(CutPolicy):
    name = "liverobin"

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        opts = {k.lower(): v for k, v in options.items()}
        try:
            topic = opts["heartbeatindex"]
        except KeyError:
            raise InvalidSourceOption(
                "cutPolicy liverobin needs heartbeatIndex (the heartbeat generator's index "
                "topic; `recovery replicate` sets it)"
            ) from None
        self.per_batch = int(opts.get("heartbeatsperbatch", "1"))
        if self.per_batch < 1:
            raise InvalidSourceOption("heartbeatsPerBatch must be at least 1")
        kafka = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
        self.index_topic = ControlTopic(topic, kafka)
        self.index = HeartbeatIndex()

    def cut(self, start: Offsets, available: Offsets, max_rows: int | None) -> Offsets:
        """Waits until the batch's heartbeat is indexed: with several sources, one answering
        "no batch yet" while the next one already sees the heartbeat would make this
        replica's batch differ from the other's."""
        waited_since = time.monotonic()
        while True:
            self.index_topic.fold(self.index.apply)
            self._forget_before(start)
            end = heartbeat_cut(start, self.index.entries, self.per_batch)
            if end is not None:
                return end
            if time.monotonic() - waited_since > WAIT_WARNING_S:
                log.warning(
                    "liverobin: no heartbeat indexed in %s for %.0f s; is the heartbeat "
                    "generator running?",
                    self.index_topic.topic,
                    WAIT_WARNING_S,
                )
                waited_since = time.monotonic()
            time.sleep(POLL_S)

    def _forget_before(self, start: Offsets) -> None:
        """Entries not wholly at or after ``start`` can never end a later batch (offsets grow
        with the heartbeat's number in every partition)."""
        entries = self.index.entries
        keep = next((i for i, e in enumerate(entries) if at_or_after(e, start)), len(entries))
        del entries[:keep]


LIVEROBIN_POLICY = f"{__name__}:HeartbeatCut"
