"""Chaos for a soak (ops/soak.py): a control endpoint on 127.0.0.1 through which the ``chaos``
DAG hurts the soak's job one fault at a time, chosen at random on its schedule.

The soak owns what can be hurt: its private broker behind the fault proxy (the network faults
of experiment/network_faults.py), its job's checkpoint directory (``checkpoint-unwritable``)
and the job's driver (``driver-kill``, recovered by the job's daemon). The endpoint's address
and kinds are in ``<RECOVERY_HOME>/soak/chaos.json`` while the soak runs; the DAG skips when
the file is missing (no soak here).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from recovery_lib.chaos.disk import UnwritableTree
from recovery_lib.errors import ConfigurationError
from recovery_lib.experiment.failures import FailureStatus, InjectedFailure
from recovery_lib.experiment.network_faults import NETWORK_KINDS, NetworkFaults
from recovery_lib.metrics.store import now_ms
from recovery_lib.settings import Settings, get_settings

log = logging.getLogger(__name__)

CHAOS_KINDS = (*NETWORK_KINDS, "checkpoint-unwritable", "driver-kill")


def control_file(settings: Settings | None = None) -> Path:
    """Where a running soak says how to reach its chaos endpoint (under ``settings``' home, the
    environment's if None)."""
    return (settings or get_settings()).home / "soak" / "chaos.json"


@dataclass
class ChaosEvent:
    """One fault the chaos DAG asked for, and what it did."""

    kind: str
    asked_ms: int
    fired: bool
    detail: dict[str, Any] = field(default_factory=dict)


class ChaosTarget:
    """The soak's job and network, and how each kind of fault hurts them."""

    def __init__(
        self,
        faults: NetworkFaults,
        checkpoint_dir: Callable[[], Path],
        driver_pid: Callable[[], int | None],
        settings: Settings | None = None,
    ) -> None:
        self.fault_s = (settings or get_settings()).chaos_fault_s  # a frozen disk's duration
        self.faults = faults
        self.checkpoint_dir = checkpoint_dir
        self.driver_pid = driver_pid
        self.disk = UnwritableTree()
        self.events: list[ChaosEvent] = []
        self._armed: list[tuple[ChaosEvent, InjectedFailure]] = []  # resets not fired yet
        self._lock = threading.Lock()

    def busy(self) -> str | None:
        """Why no new fault may start now (the last one still lasts), or None."""
        if not self.faults.over():
            return "the last network fault still lasts"
        if self.disk.frozen():
            return "the checkpoint still refuses writes"
        return None

    def settle(self) -> None:
        """Mark the armed resets that fired since (a run's summary counts only faults that
        fired: one still armed when the input stopped never hurt the job)."""
        with self._lock:
            waiting = []
            for event, failure in self._armed:
                fired_ms = failure.probe_fired_ms()
                if fired_ms is None:
                    waiting.append((event, failure))
                else:
                    event.fired = True
                    event.detail = {**event.detail, "fired_ms": fired_ms}
            self._armed = waiting

    def inject(self, kind: str) -> ChaosEvent:
        if kind not in CHAOS_KINDS:
            raise ConfigurationError(
                f"unknown chaos kind {kind!r}; choose one of {', '.join(CHAOS_KINDS)}"
            )
        with self._lock:
            event = ChaosEvent(kind, now_ms(), fired=False)
            why = self.busy()
            if why is not None:
                event.detail = {"skipped": why}
            elif kind == "driver-kill":
                pid = self.driver_pid()
                if pid is None:
                    event.detail = {"skipped": "the job's driver is not running"}
                else:
                    os.killpg(pid, signal.SIGKILL)
                    event.fired, event.detail = True, {"pid": pid}
            elif kind == "checkpoint-unwritable":
                seconds = self.fault_s
                frozen = self.disk.freeze(self.checkpoint_dir(), seconds)
                event.fired = True
                event.detail = {"seconds": seconds, "directories": frozen.directories}
            else:
                failure = InjectedFailure(kind, 0.0, FailureStatus.FIRED, event.asked_ms)
                self.faults.inject(kind, failure)
                # A reset is armed: it fires on its next request, if one comes (settle()).
                event.fired = failure.status is not FailureStatus.ARMED
                if not event.fired:
                    self._armed.append((event, failure))
                event.detail = {**(failure.detail or {}), "seconds": failure.pause_s}
            self.events.append(event)
        said = "fired" if event.fired else "skipped" if "skipped" in event.detail else "armed"
        log.info("chaos: %s %s %s", kind, said, event.detail)
        return event


class ChaosControl:
    """``POST /fault {"kind": ...}`` on 127.0.0.1 injects one fault on ``target``."""

    def __init__(self, target: ChaosTarget) -> None:
        self.target = target
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        target = self.target

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                try:
                    length = int(self.headers.get("Content-Length", 0))
                    asked = json.loads(self.rfile.read(length) or b"{}")
                    body, code = asdict(target.inject(str(asked.get("kind")))), 200
                except (ValueError, OSError) as exc:
                    body, code = {"error": str(exc)}, 400
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: Any) -> None:  # the soak logs each fault itself
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="chaos", daemon=True).start()
        url = f"http://127.0.0.1:{self._server.server_address[1]}"
        path = control_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"url": url, "kinds": list(CHAOS_KINDS), "pid": os.getpid()}))
        return url

    def stop(self) -> None:
        control_file().unlink(missing_ok=True)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
