"""Job heartbeats: the driver rewrites a small JSON file every interval; the supervisor reads it.

The file holds pid and process group (under spark-submit the Python driver is a child of the
SparkSubmit JVM, so a supervisor recognises its job by the group it started), time, whether a
streaming query is active and the last finished batch.
Written to a temp name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from recovery_lib.files import write_atomic
from recovery_lib.kafka.outage import read_outage
from recovery_lib.metrics.json_events import JsonEventsListener
from recovery_lib.metrics.side_queries import is_side_query
from recovery_lib.runtime.logs import WarnOnChange

log = logging.getLogger(__name__)


@dataclass
class Heartbeat:
    pid: int
    ts_ms: int
    query_active: bool
    last_batch: int | None
    batches: int
    input_rows: int
    pgid: int = -1
    # Standby jobs: "primary" or "standby"; the fencing epoch held; a standby's shipping state
    # (newest complete copy, lag behind the primary) and, once it took over, how.
    role: str = "primary"
    epoch: int = 0
    info: dict | None = None
    idle: bool = False  # the query ran out of input (caught up): Spark reported it idle
    host: str = ""  # where pid runs: a reader on the same host can see whether it still does

    def belongs_to(self, leader_pid: int) -> bool:
        """True if written by the job whose process-group leader is ``leader_pid``."""
        return leader_pid in (self.pid, self.pgid)


def read_heartbeat(path: str | os.PathLike[str]) -> Heartbeat | None:
    try:
        return Heartbeat(**json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError):
        return None


class HeartbeatWriter(JsonEventsListener):
    """Also a StreamingQueryListener, to report query start and progress."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        interval_s: float = 1.0,
        role: str = "primary",
        outage_path: str | os.PathLike[str] | None = None,
    ) -> None:
        """``outage_path``: where the job's Kafka clients note a wait for the broker
        (kafka/outage.py); each beat carries it as ``info["broker_outage"]``."""
        self.path = Path(path)
        self.outage_path = outage_path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.interval_s = interval_s
        self.query_active = False
        self.last_batch: int | None = None
        self.batches = 0
        self.input_rows = 0
        self.role = role
        self.epoch = 0
        self.info: dict | None = None
        self.idle = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._rehearsals: set[str] = set()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)

    def start(self) -> HeartbeatWriter:
        self.beat()
        self._thread.start()
        return self

    def beat(self) -> None:
        info = self.info
        outage = read_outage(self.outage_path)
        if outage is not None:
            info = {**(info or {}), "broker_outage": outage}
        beat = Heartbeat(
            os.getpid(),
            int(time.time() * 1000),
            self.query_active,
            self.last_batch,
            self.batches,
            self.input_rows,
            os.getpgid(0),
            self.role,
            self.epoch,
            info,
            self.idle,
            socket.gethostname(),
        )
        with self._lock:  # the timer thread, the listener and a takeover all beat
            write_atomic(self.path, json.dumps(asdict(beat)))

    def _loop(self) -> None:
        warn = WarnOnChange(log)  # a beat that keeps failing (a full disk): once, not per beat
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except Exception as exc:  # noqa: BLE001 - a lost beat must not end the lease
                warn(f"heartbeat: {exc}")
            else:
                warn.clear()

    def stop(self) -> None:
        """No more beats: returns after the last one (a host acknowledges a stopped stage in
        the same file next, pipeline/host.py)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def onQueryStarted(self, event) -> None:  # noqa: ANN001, N802
        if is_side_query(event.name):  # a standby's rehearsal, a poison probe: not the job
            self._rehearsals.add(str(event.runId))  # a rehearsal's id is the checkpoint's
            return
        self.query_active = True
        self.idle = False
        self.beat()

    def onQueryProgress(self, event) -> None:  # noqa: ANN001, N802
        if str(event.progress.runId) in self._rehearsals:
            return
        self.last_batch = event.progress.batchId
        self.batches += 1
        self.input_rows += int(event.progress.numInputRows)
        self.idle = False
        self.beat()

    def onQueryIdle(self, event) -> None:  # noqa: ANN001, N802
        if str(event.runId) in self._rehearsals:
            return
        self.idle = True

    def onQueryTerminated(self, event) -> None:  # noqa: ANN001, N802
        if str(event.runId) in self._rehearsals:
            return
        self.query_active = False
        self.beat()
