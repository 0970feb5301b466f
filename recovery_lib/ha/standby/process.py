"""The standby process: the same job, started ahead of time, idle until its primary's lease
expires, then the primary.

While idle it keeps what a cold restart pays for ready: the JVM and SparkSession, the Python
workers (a tiny job every ``standby_warm_every_s``; Spark stops workers idle for 60 s) and the
query's DataFrame, built against its own live checkpoint directory. A shipper thread copies
the primary's checkpoint into the standby's storage (shipping.py) and reports the lag in the
standby's heartbeat. The lease is the primary's heartbeat file: older than
``standby_lease_timeout_s`` means the primary is dead or paused. Takeover, in this order:

1. take the next fencing epoch (only if the primary's is still current: one winner);
2. write fence records into the output (and determinant) topics: readers now drop anything
   the old primary still gets out, and its sink refuses to write on its next check;
3. sync the offset-log tail and causal markers once more when the primary's storage is
   readable, restore the newest complete copy whose checksums hold;
4. start the query: it replays the primary's batches after the copy with their exact
   boundaries (follow.py) and the logged determinants, then runs on.

Where the time goes (measured, see docs/standby.md): the JVM, session and workers are saved;
the query start (a new Python streaming-source runner per query, planning) and the state load
are not.

A **hot** standby (setting ``standby_hot``) saves those too: it restores the first shipped
copy and starts its query at once, following the primary's committed batches with their exact
boundaries (follow.py), its sink held (nothing written: the primary delivered those batches).
Its state stores are then loaded and current. The takeover is steps 1-2, then the takeover
marker: the query plans the primary's uncommitted batch with its boundaries, writes it under
the new epoch (``epoch_file``), and runs on. If the hot query failed before the takeover, the
standby falls back to the warm path above.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recovery_lib.ha.fencing import EPOCH_GUARD_HOOK, EpochStore, write_fences
from recovery_lib.ha.standby.rehearsal import JobOutput, rehearse, warm_workers
from recovery_lib.ha.standby.shipping import Shipper, latest_complete, restore
from recovery_lib.io.sinks.modes import HOLDABLE_MODES
from recovery_lib.metrics.store import now_ms
from recovery_lib.runtime.checkpoint import batch_metadata, last_committed
from recovery_lib.runtime.heartbeat import HeartbeatWriter, read_heartbeat
from recovery_lib.settings import get_settings


@dataclasses.dataclass
class StandbyConfig:
    primary_checkpoint: str  # the primary's query checkpoint directory (<root>/<query>)
    primary_heartbeat: str  # its lease
    standby_dir: str  # this standby's storage: shipped copies and the tail
    epoch_store: str
    lease_timeout_s: float = 3.0
    ship_interval_s: float = 2.0
    keep_copies: int = 3
    warm_every_s: float = 20.0

    @classmethod
    def from_settings(cls, **kwargs: Any) -> StandbyConfig:
        s = get_settings()
        return cls(
            lease_timeout_s=s.standby_lease_timeout_s,
            ship_interval_s=s.standby_ship_interval_s,
            keep_copies=s.standby_keep_copies,
            warm_every_s=s.standby_warm_every_s,
            **kwargs,
        )


class StandbyJob:
    def __init__(
        self,
        spark: Any,
        opts: Any,  # JobOptions, with checkpoint_dir = this standby's live root
        cfg: StandbyConfig,
        heartbeat: HeartbeatWriter | None,
        log: Callable[[str], None] = print,
        build: Callable[[Any, Any], Any] | None = None,
        inputs: int = 1,
        output: JobOutput | None = None,
        own_sink: bool = False,  # the job writes its output itself (JobSpec.own_sink)
    ) -> None:
        self.build = build  # for the rehearsal (rehearsal.py)
        self.output = output  # the job's output path, for the rehearsal and the warm loop
        self.spark = spark
        self.opts = opts
        self.cfg = cfg
        self.heartbeat = heartbeat
        self.log = log
        self.dir = Path(cfg.standby_dir)
        self.shipper = Shipper(cfg.primary_checkpoint, self.dir, cfg.keep_copies)
        self.epochs = EpochStore(cfg.epoch_store)
        self._stop = threading.Event()
        self.info: dict[str, Any] = {"warm": False}
        self.epoch_file = self.dir / "epoch"
        self.marker = self.dir / "taken_over"
        self.follower: Any = None  # a hot standby's running query
        self._shipper_thread: threading.Thread | None = None
        self.own_sink = own_sink
        if own_sink:  # its sink neither holds a hot query's output nor reads fence records
            self.hot_refused: str | None = "the job writes its output itself"
        else:
            self.hot_refused = (
                hot_problem(opts, inputs) if get_settings().standby_hot else "setting off"
            )
        self.hot = self.hot_refused is None
        opts.follow_log = str(self.dir / "tail")
        if self.hot:  # the primary's own logs: its committed batches, read as they appear
            opts.follow_log = str(Path(cfg.primary_checkpoint) / "offsets")
            opts.takeover_marker = str(self.marker)
            opts.epoch_file = str(self.epoch_file)
            self.marker.unlink(missing_ok=True)
        opts.epoch_store = cfg.epoch_store
        if opts.causal is not None:
            opts.causal = dataclasses.replace(
                opts.causal,
                epoch_store=cfg.epoch_store,
                write_guard=EPOCH_GUARD_HOOK,
                epoch_file=str(self.epoch_file),
            )
        if heartbeat is not None:
            heartbeat.role = "standby"
            heartbeat.info = self.info

    # -- idle --------------------------------------------------------------------------------

    def start_follower(self, df: Any, start_query: Callable[[], Any]) -> Any:
        """A hot standby: restore the first complete copy, then start the query (it follows
        the primary's committed batches, output held, until the takeover marker). None: it
        stays warm (the query has an event-time watermark, or the primary died first)."""
        if plan_has_watermark(df):
            self.hot, self.hot_refused = False, WATERMARK_REFUSAL
            self.info["hot_refused"] = WATERMARK_REFUSAL
            return None
        self._start_shipping()
        # Wait for a copy by its manifest (cheap); check checksums only once one is there.
        manifest = None
        while manifest is None and self._lease_holds():
            if latest_complete(self.dir, verify=False) is not None:
                manifest = latest_complete(self.dir, verify=True)
            if manifest is None:
                self._stop.wait(0.5)
        if manifest is None:  # the primary died before its first copy: take over warm
            self.info["hot_failed"] = "the primary's lease expired before its first copy"
            return None
        live_root = Path(self.opts.checkpoint_dir)
        shutil.rmtree(live_root, ignore_errors=True)
        restore(self.dir, manifest, live_root)
        self.info["ready"] = False  # until its query caught up with the primary
        self.follower = start_query()
        self.info.update(hot=True, follower_from_batch=manifest.batch)
        threading.Thread(target=self._follower_lag_loop, name="lag", daemon=True).start()
        return self.follower

    def _follower_lag_loop(self) -> None:
        """Hot: ready once its query caught up. A loop of its own, not the shipper's: a round
        of shipping can copy a large checkpoint for seconds, and a readiness that old would
        let a failure in right after the primary committed a long batch."""
        primary, live = Path(self.cfg.primary_checkpoint), Path(self.opts.checkpoint_path)
        while not self._stop.is_set() and self.follower is not None:
            try:
                lag = follower_lag(primary, live)
            except OSError:  # a log entry replaced while read: next round
                lag = None
            self.info.update(
                follower_lag_batches=lag.batches if lag else None,
                follower_lag_s=round(lag.work_s, 2) if lag else None,
                # the primary's newest committed batch at this check (pair.standby_ready)
                follower_lag_of=lag.primary_batch if lag else None,
                ready=lag is not None and lag.ready and self.follower_alive(),
            )
            self._stop.wait(FOLLOWER_LAG_CHECK_S)

    def _lease_holds(self) -> bool:
        """The primary has not started yet, or its heartbeat is younger than the lease."""
        beat = read_heartbeat(self.cfg.primary_heartbeat)
        return beat is None or now_ms() - beat.ts_ms <= self.cfg.lease_timeout_s * 1000

    def follower_alive(self) -> bool:
        return self.follower is not None and self.follower.isActive

    def _start_shipping(self) -> None:
        if self._shipper_thread is None:
            self._shipper_thread = threading.Thread(
                target=self._ship_loop, name="shipper", daemon=True
            )
            self._shipper_thread.start()

    def warm(self) -> None:
        """The Python workers up (and kept up): rehearsal.warm_workers."""
        warm_workers(self.spark, self.opts, self.dir, None if self.own_sink else self.output)

    def _warm_loop(self) -> None:
        """Off the lease loop: a warm-up job can take seconds on a loaded machine."""
        while not self._stop.wait(self.cfg.warm_every_s):
            try:
                self.warm()
            except Exception as exc:  # noqa: BLE001 - warmth is best effort
                self.info["warm_error"] = str(exc)[:200]

    def _ship_loop(self) -> None:
        while not self._stop.is_set():
            try:
                shipped = self.shipper.ship()
                lag = self.shipper.lag()
                self.info.update(
                    shipped_batch=lag.shipped_batch,
                    primary_batch=lag.primary_batch,
                    lag_batches=lag.batches,
                    lag_bytes=lag.bytes,
                )
                if shipped is not None:
                    self.info.update(
                        copy_seq=shipped.seq,
                        copy_bytes=shipped.bytes_total,
                        last_shipped_bytes=shipped.bytes_copied,
                        shipped_bytes_total=self.info.get("shipped_bytes_total", 0)
                        + shipped.bytes_copied,
                    )
            except Exception as exc:  # noqa: BLE001 - a failed round is retried next interval
                self.info["ship_error"] = str(exc)[:300]
            self._stop.wait(self.cfg.ship_interval_s)

    def _rehearse_when_shipped(self) -> None:
        """Once a copy exists, run the query once on a scratch copy (rehearsal.py); again on a
        newer copy while the rehearsals find no input to run a batch on."""

        while not self._stop.is_set() and latest_complete(self.dir, verify=False) is None:
            self._stop.wait(0.5)
        attempts = 0
        while not self._stop.is_set():
            attempts += 1
            try:
                result = rehearse(self.spark, self.build, self.opts, self.dir, self.output)
            except Exception as exc:  # noqa: BLE001 - a failed rehearsal costs only warmth
                result = {"error": str(exc)[:300]}
            self.info["rehearsal"] = {**result, "attempts": attempts}
            self.info["ready"] = True  # a takeover need not wait for warmth
            if "error" in result or result.get("skipped") or result.get("input_rows", 0) > 0:
                return
            self._stop.wait(self.cfg.warm_every_s)  # at the warm loop's pace

    def wait_for_takeover(self) -> str:
        """Block until the primary's lease expires; returns why."""
        self.warm()
        self.info["warm"] = True
        self._start_shipping()
        shipper = self._shipper_thread
        if self.follower is not None:  # hot: ready when caught up (the shipper says)
            pass
        elif self.build is not None and get_settings().standby_rehearse:
            threading.Thread(
                target=self._rehearse_when_shipped, name="rehearsal", daemon=True
            ).start()
        else:
            self.info["ready"] = True
        if self.follower is None:
            threading.Thread(target=self._warm_loop, name="warmth", daemon=True).start()
        seen = False
        while True:
            beat = read_heartbeat(self.cfg.primary_heartbeat)
            if beat is not None:
                seen = True
                self.info["primary_epoch"] = beat.epoch
                age_ms = now_ms() - beat.ts_ms
                if age_ms > self.cfg.lease_timeout_s * 1000:
                    self._stop.set()
                    shipper.join(timeout=30)
                    return f"primary lease expired ({age_ms / 1000:.1f} s without a heartbeat)"
            elif seen:
                self._stop.set()
                shipper.join(timeout=30)
                return "primary heartbeat file gone"
            time.sleep(0.1)

    # -- takeover ----------------------------------------------------------------------------

    def take_over(self, cause: str) -> dict[str, Any]:
        if self.follower_alive():
            return self._take_over_hot(cause)
        if self.follower is not None:  # the hot query failed: start it the warm way
            self.info["hot_failed"] = str(self.follower.exception())[:300]
            self.follower = None
        detected = now_ms()
        for query in self.spark.streams.active:  # a rehearsal still running gives way
            query.stop()
        expected = self.info.get("primary_epoch")
        epoch = self.epochs.advance(f"standby {self.dir}", expected=expected)
        self.epoch_file.write_text(str(epoch))
        # A table sink is fenced by the epoch store and the epochs its table's commits carry,
        # not by fence records in a topic.
        topics = [] if self.opts.table_sink or self.own_sink else [self.opts.out_topic]
        if self.opts.causal is not None and self.opts.causal.storage == "kafka":
            topics.append(self.opts.causal.topic)
        fences = write_fences(topics, epoch, self.opts.kafka)
        fenced_ms = now_ms()
        tail = 0
        primary_readable = Path(self.cfg.primary_checkpoint).is_dir()
        if primary_readable:  # shared storage: the primary's last word on batch boundaries
            tail = self.shipper.ship_tail()
        rejected: list[tuple[int, list[str]]] = []
        manifest = latest_complete(self.dir, verify=True, rejected=rejected)
        live_root = Path(self.opts.checkpoint_dir)
        if manifest is not None:
            restore(self.dir, manifest, live_root)
        live_root.mkdir(parents=True, exist_ok=True)
        markers = 0
        if primary_readable and self.opts.causal is not None:
            markers = _sync_causal(Path(self.cfg.primary_checkpoint), live_root)
        self.opts.epoch = epoch
        if self.hot:  # the query was built hot: its source and sink wait for the marker
            _write_atomically(self.marker, str(epoch))
        info = {
            "cause": cause,
            "detected_ms": detected,
            "epoch": epoch,
            "fence_records": fences,
            "fenced_ms": fenced_ms,
            "copy_batch": manifest.batch if manifest is not None else None,
            "copy_seq": manifest.seq if manifest is not None else None,
            "rejected_copies": [{"seq": s, "problems": p[:3]} for s, p in rejected],
            "tail_synced": tail,
            "causal_markers_synced": markers,
            "restored_ms": now_ms(),
        }
        return self._took_over(info, "standby")

    def _take_over_hot(self, cause: str) -> dict[str, Any]:
        """Epoch, fences, then the marker: the running query writes from its next batch on
        (the primary's uncommitted one, with its boundaries) under the new epoch."""
        detected = now_ms()
        expected = self.info.get("primary_epoch")
        epoch = self.epochs.advance(f"hot standby {self.dir}", expected=expected)
        _write_atomically(self.epoch_file, str(epoch))
        fences = write_fences([self.opts.out_topic], epoch, self.opts.kafka)
        fenced_ms = now_ms()
        self.opts.epoch = epoch
        # The primary commits no more: still held, the query catches up with its last
        # committed batch in one batch of its own; only its uncommitted one is replayed.
        primary, live = Path(self.cfg.primary_checkpoint), Path(self.opts.checkpoint_path)
        deadline = time.monotonic() + HOT_CATCH_UP_TIMEOUT_S
        behind = follower_behind(primary, live)
        while behind != 0 and self.follower_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
            behind = follower_behind(primary, live)
        caught_up_ms = now_ms()
        _write_atomically(self.marker, str(epoch))
        progress = self.follower.lastProgress or {}
        info = {
            "cause": cause,
            "hot": True,
            "detected_ms": detected,
            "epoch": epoch,
            "fence_records": fences,
            "fenced_ms": fenced_ms,
            "caught_up_ms": caught_up_ms,
            "behind_at_marker": behind,
            "follower_batch": progress.get("batchId"),
            "restored_ms": now_ms(),  # nothing to restore: the query has its state
        }
        return self._took_over(info, "hot standby")

    def _took_over(self, info: dict[str, Any], what: str) -> dict[str, Any]:
        """The takeover said: in the heartbeat (now a primary's), a file and the log."""
        self.info["takeover"] = info
        if self.heartbeat is not None:
            self.heartbeat.role = "primary"
            self.heartbeat.epoch = info["epoch"]
            self.heartbeat.beat()
        (self.dir / "takeover.json").write_text(json.dumps(info))
        self.log(f"{what} took over: {json.dumps(info)}")
        return info


def _sources(entry: Path) -> list[Any] | None:
    """The per-source offsets of an offset-log entry (None: not there or not readable)."""
    try:
        lines = entry.read_text().splitlines()[2:]
        return [json.loads(line) for line in lines]
    except (FileNotFoundError, ValueError):
        return None


@dataclasses.dataclass(frozen=True)
class FollowerLag:
    """What a hot standby's query has yet to follow of its primary's committed batches."""

    batches: int
    work_s: float  # the primary's processing time of those batches
    primary_batch: int  # the primary's newest committed batch

    @property
    def ready(self) -> bool:
        """A takeover now would catch up in about one ordinary batch. Counting batches alone
        is not enough: one batch of a large backlog (a warm-up) can take the primary minutes,
        and its follower as long again."""
        return self.batches <= HOT_READY_LAG_BATCHES and self.work_s <= HOT_READY_LAG_WORK_S


def follower_lag(primary: Path, follower: Path, look_back: int = 50) -> FollowerLag | None:
    """How far a hot standby's query is behind its primary: its batches may each cover several
    of the primary's, so they are matched by where they end, not by id. None: not found within
    the primary's last ``look_back`` committed batches (or nothing committed yet)."""
    mine = last_committed(follower)
    newest = last_committed(primary)
    if mine is None or newest is None:
        return None
    reached = _sources(follower / "offsets" / str(mine))
    if reached is None:
        return None
    work = 0.0  # of the primary's batches newer than the one being matched
    for batch in range(newest, max(-1, newest - look_back), -1):
        if _sources(primary / "offsets" / str(batch)) == reached:
            return FollowerLag(newest - batch, work, newest)
        work += _processing_s(primary, batch)
    return None


def follower_behind(primary: Path, follower: Path, look_back: int = 50) -> int | None:
    """How many committed batches of the primary a hot standby's query has yet to follow."""
    lag = follower_lag(primary, follower, look_back)
    return lag.batches if lag is not None else None


def _processing_s(checkpoint: Path, batch: int) -> float:
    """A committed batch's processing time: from its planning (the offset-log entry's
    ``batchTimestampMs``) to its commit-log entry's write. 0 when either is not readable."""
    try:
        planned_ms = int(batch_metadata(checkpoint, batch)["batchTimestampMs"])
        committed = (checkpoint / "commits" / str(batch)).stat().st_mtime
        return max(0.0, committed - planned_ms / 1000)
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        return 0.0


WATERMARK_REFUSAL = (
    "the query has an event-time watermark: where its batches end decides what its state "
    "keeps, and a hot standby's batches end elsewhere than its primary's"
)


def plan_has_watermark(df: Any) -> bool:
    """The query's plan holds an event-time watermark (so its state depends on where batches
    end). Unknown counts as yes."""
    try:
        return "EventTimeWatermark" in df._jdf.queryExecution().analyzed().toString()
    except Exception:  # noqa: BLE001 - a plan we cannot read: stay warm
        return True


def hot_problem(opts: Any, inputs: int = 1) -> str | None:
    """Why a standby of this job cannot be hot (None: it can)."""
    if inputs != 1:
        return (
            f"{inputs} inputs: each is cut in a source process of its own, and while the "
            "primary runs they could not agree on which of its batches to follow"
        )
    if opts.causal is not None:
        return "a causally logged job replays its determinants at the takeover"
    if opts.table_sink:
        return "a table sink commits per batch; a held batch would commit nothing"
    if opts.sink_mode not in HOLDABLE_MODES:
        return f"sink mode {opts.sink_mode}: a held batch writes nothing (dedup or release)"
    return None


# Ready for a failure: at most this many of the primary's committed batches not yet followed
# (a hot query catches up on them in one batch of its own).
HOT_READY_LAG_BATCHES = 5
# ... and at most this much of the primary's processing time in them.
HOT_READY_LAG_WORK_S = 30.0
FOLLOWER_LAG_CHECK_S = 0.5
# At the takeover, how long the hot query may take to catch up before the marker is written
# anyway (then it replays the rest one batch at a time, with the primary's boundaries).
HOT_CATCH_UP_TIMEOUT_S = 60.0


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _sync_causal(primary_checkpoint: Path, live_root: Path) -> int:
    """Stream markers of batches after the copy (written by the primary's last tasks) tell the
    re-executed tasks to replay instead of running live."""
    source = primary_checkpoint.with_name(f"{primary_checkpoint.name}.causal")
    if not source.is_dir():
        return 0
    target = live_root / source.name
    copied = 0
    for path in source.rglob("*"):
        if path.is_file() and not path.name.endswith(".tmp"):
            dst = target / path.relative_to(source)
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.sync")
            shutil.copyfile(path, tmp)
            tmp.replace(dst)
            copied += 1
    return copied
