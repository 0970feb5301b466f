"""KaZoo (leader-based active replication): cut policy ``kazoo`` and its sink guard.

Both replicas run the same job. For batch b (Spark plans it as its own offset log's newest
entry + 1, as the standby's ``follow`` policy reads it), each source of a replica:

* follows the order log's accepted entry for b if there is one (on either replica: a new
  leader re-runs what its predecessor published);
* else, on the leader (the replica holding the newest epoch of the replicas' epoch store),
  cuts freely;
* else, on the follower, waits inside the cut until the entry appears, or until the leader's
  heartbeat is older than the lease: then it takes the next epoch (O_EXCL: one winner),
  appends a fence record and goes on as the leader, in the same process, without a restart.

A follower's source never answers "no batch yet": with several sources (q3 reads persons and
auctions) one source answering that while the next one already saw the entry would make the
follower's batch differ from the leader's.

Once Spark wrote the leader's offset-log entry b (all sources, one line each) and plans the
batch's read, the leader publishes that entry (``planned``). Every replica's sink tasks wait,
before writing anything of batch b, until the order log holds an accepted entry for b and
check that it is this replica's own batch b (``KazooGuard``): a zombie leader (paused past its
lease) that cut b differently is refused, and the refusal counts, so the test can show it
tried.

Leadership belongs to a replica's incarnation (``<replica>/<process group>``): every source of
one process shares the epoch, and a replica restarted by its supervisor is a new incarnation
that finds its former self's epoch expired.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from recovery_lib.ha.fencing import EpochStore, FencedError
from recovery_lib.ha.replication.leases import incarnation, lease_expired
from recovery_lib.ha.replication.order_log import OrderEntry, OrderFold, offset_log_sources
from recovery_lib.io.cut_policies import CutPolicy, FreeCut
from recovery_lib.io.exceptions import InvalidSinkOption, InvalidSourceOption
from recovery_lib.io.offsets import Offsets
from recovery_lib.io.sinks.fences import FENCE_HEADER
from recovery_lib.kafka.control_topic import ControlTopic
from recovery_lib.runtime.checkpoint import batch_ids
from recovery_lib.settings import get_settings

log = logging.getLogger(__name__)

# How often a waiting follower looks at the order log; the lease is checked as often.
FOLLOWER_POLL_S = 0.02


def role_path(lease_dir: str | Path, replica: str) -> Path:
    """What the replica's cut policy last decided (role, epoch, batch): for supervisors."""
    return Path(lease_dir) / replica / "role.json"


def _kafka(opts: Mapping[str, str]) -> dict[str, str]:
    return {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}


class LeaderCut(CutPolicy):
    name = "kazoo"

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        opts = {k.lower(): v for k, v in options.items()}
        try:
            self.replica = opts["replicaid"]
            self.store = EpochStore(opts["epochstore"])
            self.lease_dir = Path(opts["leasedir"])
            self.checkpoint = Path(opts["replicacheckpoint"])
            self.order = ControlTopic(opts["ordertopic"], _kafka(opts))
        except KeyError as missing:
            raise InvalidSourceOption(
                f"cutPolicy kazoo needs {missing} (replicaId, epochStore, leaseDir, "
                "replicaCheckpoint and orderTopic; the replica set sets them)"
            ) from None

        self.lease_timeout_s = float(
            opts.get("leasetimeouts", get_settings().replication_lease_timeout_s)
        )
        self.free = FreeCut(options)
        self.fold = OrderFold()
        self.epoch = 0  # the epoch this replica leads in (0: it follows)
        self.takeovers: list[dict] = []
        self.waited_s = 0.0  # as a follower, for the leader's entries

    # -- the cut ---------------------------------------------------------------------------

    def cut(self, start: Offsets, available: Offsets, max_rows: int | None) -> Offsets:
        batch = self.planning()
        self.fold.forget_before(batch)  # the policy is pickled to executors with the source
        began = time.monotonic()
        while True:
            self.order.fold(self.fold.apply)
            entry = self.fold.get(batch)
            if entry is not None:
                ends = entry.ends_for(start) or start
                self._still_leading()
                self._report(batch, "followed")
                # Partitions the entry does not name (appeared later) stay where they are.
                return {
                    t: {p: ends.get(t, {}).get(p, off) for p, off in parts.items()}
                    for t, parts in start.items()
                }
            if self.leading():
                self._report(batch, "cut")
                return self.free.cut(start, available, max_rows)
            self.waited_s += FOLLOWER_POLL_S
            if time.monotonic() - began > 1.0:  # say we wait, once a second
                self._report(batch, "waiting for the leader")
                began = time.monotonic()
            time.sleep(FOLLOWER_POLL_S)

    def planned(self, start: Offsets, end: Offsets) -> None:
        """Spark wrote the batch's offset-log entry and plans its read: the leader publishes
        the entry before any task of the batch can write (the tasks' guard waits for it)."""
        ids = batch_ids(self.checkpoint / "offsets")
        if not ids or not self.epoch:
            return
        batch = ids[-1]
        self.order.fold(self.fold.apply)
        if self.fold.get(batch) is not None:
            return  # published already (by this replica's other source, or a predecessor)
        sources = offset_log_sources(self.checkpoint / "offsets" / str(batch))
        if sources:
            self.order.append(OrderEntry(batch, sources, self.epoch).encode())

    def planning(self) -> int:
        ids = batch_ids(self.checkpoint / "offsets")
        return ids[-1] + 1 if ids else 0

    # -- leadership ------------------------------------------------------------------------

    def leading(self) -> bool:
        """Whether this replica leads now; takes the lease when nobody holds a live one."""
        me = incarnation(self.replica)
        current = self.store.current()
        if current and self.store.holder(current).get("holder") == me:
            self.epoch = current  # ours (maybe taken by another source of this process)
            return True
        self.epoch = 0
        if current and not self._expired(current):
            return False
        cause = "no leader yet" if not current else "leader's lease expired"
        try:
            epoch = self.store.advance(me, expected=current)
        except FencedError:
            return False  # the other replica won this epoch
        # Fence before cutting: any entry the old leader appends from now on is dropped.
        self.order.append(b"", [(FENCE_HEADER, str(epoch).encode())])
        self.epoch = epoch
        self.takeovers.append({"epoch": epoch, "cause": cause, "ts_ms": int(time.time() * 1000)})
        return True

    def _still_leading(self) -> None:
        """A replica that follows a published entry does not take the lease, but it must not
        go on calling itself leader of an epoch another replica has since taken (a resumed
        former leader did, in its role file)."""
        if self.epoch and self.store.current() != self.epoch:
            self.epoch = 0

    def _expired(self, epoch: int) -> bool:
        holder = self.store.holder(epoch)
        # Before its first heartbeat, the leader's sign of life is taking the epoch.
        return lease_expired(
            self.lease_dir,
            str(holder.get("holder", "")),
            incarnation(self.replica),
            self.lease_timeout_s,
            int(holder.get("ts_ms", 0)),
        )

    def _report(self, batch: int, decision: str) -> None:
        status = {
            "replica": self.replica,
            "role": "leader" if self.epoch else "follower",
            "epoch": self.epoch or self.store.current(),
            "batch": batch,
            "decision": decision,
            "waited_s": round(self.waited_s, 2),
            "zombie_entries_dropped": self.fold.dropped,
            "takeovers": self.takeovers,
            "ts_ms": int(time.time() * 1000),
        }
        path = role_path(self.lease_dir, self.replica)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(status))
        tmp.replace(path)


KAZOO_POLICY = f"{__name__}:LeaderCut"


# -- the sink side: write only the published batch ------------------------------------------

_folds: dict[str, tuple[ControlTopic, OrderFold]] = {}
_folds_lock = threading.Lock()


class KazooGuard:
    """Sink write guard: batch b is written only once the order log holds an accepted entry
    for b equal to this replica's own offset-log entry b."""

    def __init__(self, checkpoint: Path, order: ControlTopic, timeout_s: float) -> None:
        self.checkpoint = checkpoint
        self.order = order
        self.timeout_s = timeout_s
        self.admitted: set[int] = set()

    def check(self, what: str, batch_id: int | None = None) -> None:
        if batch_id is None or batch_id in self.admitted:
            return
        with _folds_lock:  # one fold per worker process and order topic, read incrementally
            topic, fold = _folds.setdefault(self.order.topic, (self.order, OrderFold()))
            own = offset_log_sources(self.checkpoint / "offsets" / str(batch_id))
            deadline = time.monotonic() + self.timeout_s
            topic.fold(fold.apply)
            if fold.get(batch_id) is None:
                self._publish_no_data_batch(topic, fold, batch_id, own)
            while (entry := fold.get(batch_id)) is None:
                if time.monotonic() > deadline:
                    raise FencedError(
                        f"{what} refused: the order log {topic.topic} has no batch {batch_id} "
                        f"after {self.timeout_s:.0f} s (the leader did not publish it)"
                    )
                topic.fold(fold.apply)
                if fold.get(batch_id) is None:
                    time.sleep(FOLLOWER_POLL_S)
            fold.forget_before(batch_id - 16)
        if own is None or not entry.same_batch(own):
            log.warning("kazoo guard: %s refused: not the published batch", what)
            raise FencedError(
                f"{what} refused: this replica's batch {batch_id} is not the one the leader "
                f"published in epoch {entry.epoch} (a zombie leader's batch)"
            )
        self.admitted.add(batch_id)

    @staticmethod
    def _publish_no_data_batch(
        topic: ControlTopic, fold: OrderFold, batch_id: int, own: list | None
    ) -> None:
        """A stateful query with a watermark runs batches without new input (to advance the
        watermark and close windows); Spark plans no source read for them, so the leader's
        ``planned`` never publishes them, and every replica's sink would wait for an entry
        that never comes (seen: q8's leader stuck 60 s, then failed). Such a batch ends where
        the agreed batch before it ended, so its entry is the same whichever replica writes
        it: publish it (first wins, in the newest epoch seen, so no fence drops it)."""
        previous = fold.get(batch_id - 1)
        if own is None or previous is None or not previous.same_batch(own):
            return  # new input: only the leader decides it
        topic.append(OrderEntry(batch_id, own, max(previous.epoch, fold.fence)).encode())
        topic.fold(fold.apply)


def kazoo_guard(options: Mapping[str, str]) -> KazooGuard:
    """Sink hook ``writeGuard`` for a KaZoo replica (options replicaCheckpoint, orderTopic)."""

    opts = {k.lower(): v for k, v in options.items()}
    try:
        checkpoint, topic = Path(opts["replicacheckpoint"]), opts["ordertopic"]
    except KeyError as missing:
        raise InvalidSinkOption(f"writeGuard kazoo needs sink option {missing}") from None
    timeout = float(opts.get("publishtimeouts", get_settings().replication_publish_timeout_s))
    return KazooGuard(checkpoint, ControlTopic(topic, _kafka(opts)), timeout)


KAZOO_GUARD = f"{__name__}:kazoo_guard"
