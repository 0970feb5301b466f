"""A primary job with a warm standby, supervised together (experiment mode ``standby``).

Same interface as ``runtime.supervisor.Supervisor`` (start, wait_ready, tick, is_ready,
kill_group, pause, stop, restarts), so the experiment runner injects failures into it as into
a natively restarted job. Recovery is not a restart here: the standby process detects the
expired lease and takes over by itself; the pair watches, records the takeover (failure
detected -> the new primary's query active = restart time) and starts a fresh standby for the
new primary. A fenced old primary (paused, then continued) is left to fail on its own and is
stopped at the end.

Layout under the run's workdir: ``epochs/`` (the epoch store), ``node-0/`` (the first
primary), ``node-1/``, ``node-2/`` ... (standbys in turn; each one's ``ship/`` holds its
shipped copies, ``ck/`` its live checkpoint root once it is primary).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recovery_lib.errors import JobFailed, NotStarted
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.runtime.heartbeat import Heartbeat
from recovery_lib.runtime.launch import JobLaunch, LaunchRefused, Role, StandbyRole
from recovery_lib.runtime.supervisor import ProcessSpec, Restart, Supervisor
from recovery_lib.settings import Settings, get_settings

log = logging.getLogger(__name__)

# What the pair records of a standby's heartbeat every 5 s (a hot standby's follower too).
LAG_KEYS = (
    "shipped_batch",
    "primary_batch",
    "lag_batches",
    "lag_bytes",
    "copy_bytes",
    "follower_lag_batches",
    "follower_lag_s",
    "ready",
)


# A node's launch, made by the mode that runs the pair (modes/standby.py): the job's launch,
# the node's checkpoint root, the pair's epoch store, and for a standby what it watches.
NodeLaunch = Callable[[JobLaunch, str, str, StandbyRole | None], JobLaunch]


class StandbyPair:
    def __init__(
        self,
        spec: ProcessSpec,
        workdir: str | Path,
        store: MetricsStore | None = None,
        run_id: str | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        query: str | None = None,
        restandby: bool = True,
        node_launch: NodeLaunch | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.spec = spec
        self.node_launch = node_launch
        self.settings = settings or get_settings()  # the caller's; read once
        self.workdir = Path(workdir)
        self.store = store
        self.run_id = run_id
        self.on_event = on_event
        self.query = query or _query_name(spec)
        self.restandby = restandby
        self.epochs = self.workdir / "epochs"
        self.restarts: list[Restart] = []
        self.takeovers: list[dict[str, Any]] = []
        self.zombies: list[Supervisor] = []
        self._nodes = 0
        self.primary: Supervisor | None = None
        self.standby: Supervisor | None = None
        self._awaiting: Restart | None = None
        self._native: Restart | None = None  # a native restart in progress (no standby)
        self._lag_logged = 0.0
        self._restandby_due = False
        self.restandby_after_batches = 2
        self.restandby_after_s = self.settings.standby_replace_after_s
        self.lease_timeout_s = self.settings.standby_lease_timeout_s

    # -- nodes -------------------------------------------------------------------------------

    def _node(self, role: Role, primary: Supervisor | None) -> Supervisor:
        node = self.workdir / f"node-{self._nodes}"
        self._nodes += 1
        launch = self.spec.launch
        if launch is None:
            raise LaunchRefused(
                "a standby pair runs a job through the launcher: build its spec with "
                "ProcessSpec.for_job"
            )
        if self.node_launch is None:
            raise LaunchRefused(
                "a standby pair's nodes are launched by its mode: make the pair with "
                "get_mode('standby').supervisor(...)"
            )
        watch = None
        if role is Role.STANDBY:
            assert primary is not None
            watch = StandbyRole(
                primary_checkpoint=str(self.checkpoint_of(primary)),
                primary_heartbeat=str(primary.heartbeat_path),
                standby_dir=str(node / "ship"),
            )
        launch = self.node_launch(launch, str(node / "ck"), str(self.epochs), watch)
        # Standby jobs ship RocksDB changelog checkpoints (one small file per batch and
        # partition) unless the state store was chosen explicitly.
        env = {**self.spec.env}
        if "RECOVERY_STATE_STORE" not in os.environ:
            env.setdefault("RECOVERY_STATE_STORE", "rocksdb")
        spec = self.spec.with_launch(launch, env=env, max_restarts=0)
        return Supervisor(
            spec, node, self.store, self.run_id, self.on_event, settings=self.settings
        )

    def checkpoint_of(self, sup: Supervisor) -> Path:
        return sup.workdir / "ck" / self.query

    @property
    def live_checkpoints(self) -> Path:
        """The current primary's checkpoint root (what the runner reads committed offsets of)."""
        assert self.primary is not None
        return self.primary.workdir / "ck"

    def event(self, kind: str, detail: dict[str, Any] | None = None, ts: int | None = None) -> None:
        if self.store is not None and self.run_id is not None:
            self.store.event(self.run_id, kind, detail or {}, ts)
        if self.on_event is not None:
            self.on_event(kind, detail or {})

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.primary = self._node(Role.PRIMARY, None)
        self.primary.start()
        self.standby = self._node(Role.STANDBY, self.primary)
        self.standby.start()
        self._link()

    def _link(self) -> None:
        """``primary`` and ``standby`` links to the current nodes, for the operations layer
        (checkpoint GC, consistency reports, state shipping find the live directories)."""
        for name, sup in (("primary", self.primary), ("standby", self.standby)):
            link = self.workdir / name
            tmp = self.workdir / f".{name}.link"
            tmp.unlink(missing_ok=True)
            if sup is None:
                link.unlink(missing_ok=True)
                continue
            tmp.symlink_to(sup.workdir.name)
            tmp.replace(link)

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        assert self.primary is not None
        self.primary.wait_ready(timeout_s)
        self.wait_standby(timeout_s)

    def wait_standby(self, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.standby_ready():
            if self.standby is None or self.standby.proc is None:
                raise NotStarted("no standby was started; call start() first")
            if self.standby.proc.poll() is not None:
                raise JobFailed(
                    f"the standby exited with {self.standby.proc.returncode} before it was warm; "
                    f"see {self.standby.workdir / 'job.log'}"
                )
            if time.monotonic() > deadline:
                raise JobFailed(
                    f"standby not warm within {timeout_s:.0f} s; see "
                    f"{self.standby.workdir / 'job.log'}"
                )
            time.sleep(0.2)

    def standby_beat(self) -> Heartbeat | None:
        if self.standby is None or self.standby.proc is None:
            return None
        beat = self.standby.heartbeat()
        return beat if beat is not None and beat.belongs_to(self.standby.proc.pid) else None

    def standby_ready(self) -> bool:
        """Warm and holding a complete shipped copy; hot: caught up with the primary's batches
        as they are now (a readiness checked before the primary's latest commit says nothing
        about the batch that commit ended)."""
        beat = self.standby_beat()
        ready = bool(
            beat is not None
            and beat.role == Role.STANDBY
            and beat.info
            and beat.info.get("ready", beat.info.get("warm"))
            and beat.info.get("shipped_batch") is not None
        )
        if not ready or not beat.info.get("hot"):
            return ready
        checked_at = beat.info.get("follower_lag_of")
        primary = self.heartbeat()
        newest = primary.last_batch if primary is not None else None
        return checked_at is not None and (newest is None or checked_at >= newest)

    def ready_for_next_failure(self) -> bool:
        """Back from the last failure: the primary serves, no takeover or restart is in
        progress, a standby that is up is ready (warm; hot: caught up), and (when the pair
        replaces standbys) one waits."""
        if not self.serving():
            return False
        standing_by = self.standby is not None and self.standby.proc is not None
        if standing_by and self.standby.proc.poll() is None and not self.standby_ready():
            return False  # still warming, or a hot standby still catching up
        if self.restandby and not self.standby_ready():
            self._maybe_restandby()
            return False
        return True

    @property
    def recovering(self) -> bool:
        """A takeover or a native restart is in progress (a standby still warming is not
        recovery: the primary serves meanwhile)."""
        return self._awaiting is not None or self._native is not None

    def serving(self) -> bool:
        """The primary serves and no takeover or native restart is in progress."""
        return self.is_ready() and not self.recovering

    def is_ready(self) -> bool:
        """The primary's query is active, its process alive and its lease fresh (a killed
        primary's last heartbeat still says "active" until the standby notices)."""
        if (
            self.primary is None
            or self.primary.proc is None
            or self.primary.proc.poll() is not None
        ):
            return False
        beat = self.primary.heartbeat()
        fresh = beat is not None and now_ms() - beat.ts_ms < self.lease_timeout_s * 1000
        return fresh and self.primary.is_ready()

    def heartbeat(self) -> Heartbeat | None:
        return self.primary.heartbeat() if self.primary is not None else None

    @property
    def pid(self) -> int | None:
        return self.primary.pid if self.primary is not None else None

    # -- watching ----------------------------------------------------------------------------

    def tick(self) -> None:
        assert self.primary is not None
        beat = self.standby_beat()
        taking_over = (
            beat is not None and beat.role == Role.PRIMARY and "takeover" in (beat.info or {})
        )
        if taking_over and self._awaiting is None:
            self._takeover_started(beat)
        if self._awaiting is not None and beat is not None and beat.query_active:
            self._takeover_done(beat)
        if self._native is not None and self.primary.is_ready():
            self._native.ready_ms = now_ms()
            self.restarts.append(self._native)
            self.event("ready", {"restart_time_s": self._native.restart_time_s, "native": True})
            self._native = None
        if self._awaiting is None and self._native is None and self.primary.proc is not None:
            cause = self.primary.check()
            if cause is not None and not self._standby_alive():
                self._restart_natively(cause)
        if self.standby is not None and self.standby.proc is not None:
            code = self.standby.proc.poll()
            if code is not None and self._awaiting is None and not taking_over:
                # A dead standby is replaced; the primary runs on meanwhile.
                self.event("standby_failed", {"exit": code, "log": str(self.standby.workdir)})
                self.standby = None
                self._restandby_due = self.restandby
        self._maybe_restandby()
        self._record_lag(beat)

    def _restart_natively(self, cause: str) -> None:
        """No standby process to fail over to (not started yet after a takeover, or dead):
        the policy falls back to native recovery, the same job on the same checkpoint."""
        assert self.primary is not None
        if len(self.restarts) >= self.spec.max_restarts + len(self.takeovers):
            self.event("gave_up", {"cause": cause, "standby": "none"})
            raise JobFailed(
                f"primary died ({cause}), no standby is running and the restart budget "
                f"({self.spec.max_restarts}) is spent; see {self.primary.workdir / 'job.log'}"
            )
        detected = now_ms()
        self.event(
            "failure_detected", {"cause": cause, "standby": "none: native restart"}, detected
        )
        self.primary.kill_group(signal.SIGKILL)
        self._native = Restart(f"{cause} (no standby running: native restart)", detected)
        self.primary.start()
        if self.standby is not None and not self._standby_alive():
            self.standby = None
        self._restandby_due = self.restandby

    def _standby_alive(self) -> bool:
        return (
            self.standby is not None
            and self.standby.proc is not None
            and (self.standby.proc.poll() is None)
        )

    def _takeover_started(self, beat: Heartbeat) -> None:
        info = (beat.info or {}).get("takeover", {})
        detected = int(info.get("detected_ms", now_ms()))
        self.event("failure_detected", {"cause": info.get("cause", "lease"), **info}, detected)
        self._awaiting = Restart(info.get("cause", "lease expired"), detected)

    def _takeover_done(self, beat: Heartbeat) -> None:
        assert self._awaiting is not None and self.standby is not None
        restart = self._awaiting
        restart.ready_ms = now_ms()
        self.restarts.append(restart)
        self._awaiting = None
        takeover = dict((beat.info or {}).get("takeover", {}))
        takeover["ready_ms"] = restart.ready_ms
        takeover["restart_time_s"] = restart.restart_time_s
        self.takeovers.append(takeover)
        self.event("ready", {"restart_time_s": restart.restart_time_s, "takeover": takeover})
        old = self.primary
        assert old is not None
        if old.proc is not None and old.proc.poll() is None:
            self.zombies.append(old)  # paused: it will be fenced when it continues
        else:
            old.stop()
        self.primary, self.standby = self.standby, None
        self._restandby_due = True
        self._link()

    def _maybe_restandby(self) -> None:
        """A new standby for the new primary, once that one has caught up: two JVMs starting
        at once on a small machine would slow the takeover down."""
        if not (self.restandby and self._restandby_due and self.primary is not None):
            return
        beat = self.primary.heartbeat()
        # Caught up: a few batches done, or nothing left to read (an idle query never
        # reaches the batch count).
        if beat is None or (beat.batches < self.restandby_after_batches and not beat.idle):
            return
        ready = self.restarts[-1].ready_ms if self.restarts else None
        if ready is not None and now_ms() - ready < self.restandby_after_s * 1000:
            return
        self._restandby_due = False
        self.standby = self._node(Role.STANDBY, self.primary)
        self.standby.start()
        self._link()

    def _record_lag(self, beat: Heartbeat | None) -> None:
        if beat is None or beat.role != Role.STANDBY or not beat.info:
            return
        if time.monotonic() - self._lag_logged < 5.0:
            return
        self._lag_logged = time.monotonic()
        self.event("standby_lag", {k: beat.info.get(k) for k in LAG_KEYS if k in beat.info})

    def supervise(self, until: Callable[[], bool], interval_s: float = 0.2) -> None:
        while not until():
            self.tick()
            time.sleep(interval_s)

    # -- signals -----------------------------------------------------------------------------

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        if self.primary is not None:
            self.primary.kill_group(sig)

    def fault_dir(self, base: Path) -> Path:
        """Primary and standby share the arm directory: a hook fires where a task reaches it
        (only the primary runs the query's tasks)."""
        return base

    def pause(self, seconds: float) -> None:
        if self.primary is not None:
            self.primary.pause(seconds)

    def stop(self, timeout_s: float = 30.0) -> list[str]:
        """Stop every node (zombies, the standby, the primary) and return what went wrong.

        A node whose stop raises, or whose process is still alive afterwards, does not keep
        the others running; each such failure is printed to stderr and recorded as a
        ``stop_failed`` event. It is not raised: the callers stop the pair in their
        ``finally``, where raising would skip the rest of their cleanup and could mask the
        run's own error.
        """
        failures: list[str] = []
        for sup in [*self.zombies, self.standby, self.primary]:
            if sup is None:
                continue
            try:
                sup.stop(timeout_s)
            except Exception as exc:  # noqa: BLE001 - reported below, after the other nodes
                failures.append(f"{sup.workdir.name}: stop failed: {exc!r}")
            if sup.proc is not None and sup.proc.poll() is None:
                failures.append(
                    f"{sup.workdir.name}: pid {sup.proc.pid} is still running after stop; "
                    f"see {sup.workdir / 'job.log'}"
                )
        for failure in failures:
            log.error("standby pair: %s", failure)
        for failure in failures:
            self.event("stop_failed", {"detail": failure})
        return failures


def _query_name(spec: ProcessSpec) -> str:
    """The checkpoint subdirectory the job uses: its name."""
    if not spec.name:
        raise LaunchRefused(
            f"process spec of {spec.module} has no job name; set its name (the checkpoint "
            "subdirectory)"
        )
    return spec.name
