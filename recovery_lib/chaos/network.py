"""A broker the experiment can hurt: a private embedded broker that advertises a fault proxy's
address, so that every client (the job's source, sink and control topics, the experiment's own
producers) reaches it through the proxy, and that can be paused (SIGSTOP/SIGCONT) like a broker
that stalls in a leader election or a long GC.

It is private: not recorded as the machine's embedded broker, started and stopped by its owner
only. ``use()`` points this process's settings and its children's environment at it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from recovery_lib.chaos.proxy import FaultProxy, now_ms
from recovery_lib.kafka.broker import EmbeddedBroker, free_port, pid_alive
from recovery_lib.settings import environment, get_settings

log = logging.getLogger(__name__)


@dataclass
class BrokerPause:
    """One SIGSTOP of the broker and its SIGCONT."""

    stopped_ms: int
    seconds: float
    resumed_ms: int | None = None


class FaultyNetwork:
    def __init__(self, log_dir: Path | None = None, seed: int = 0) -> None:
        self.settings = get_settings()
        self.log_dir = log_dir or self.settings.home / "broker"
        self.seed = seed
        self.broker: EmbeddedBroker | None = None
        self.proxy: FaultProxy | None = None
        self.pauses: list[BrokerPause] = []
        self._resume: threading.Timer | None = None

    @property
    def bootstrap(self) -> str:
        if self.proxy is None:
            raise RuntimeError("the faulty network is not started")
        return f"{self.proxy.host}:{self.proxy.port}"

    def start(self) -> str:
        """The broker, then the proxy on the port the broker advertises; the bootstrap."""
        host = self.settings.broker_host
        proxy_port = free_port(host)
        self.broker = EmbeddedBroker(
            self.settings, log_dir=self.log_dir, advertised_port=proxy_port, private=True
        )
        state = self.broker.start()
        try:
            self.proxy = FaultProxy((host, state.port), port=proxy_port, seed=self.seed)
            self.proxy.start()
        except BaseException:
            self.broker.stop()
            raise
        log.info(
            "broker %s (pid %d) behind the fault proxy %s", state.bootstrap, state.pid,
            self.bootstrap,
        )  # fmt: skip
        return self.bootstrap

    def stop(self) -> None:
        """Resume a paused broker, stop the proxy and the broker; safe to call twice."""
        if self._resume is not None:
            self._resume.cancel()
        self._cont()
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        if self.broker is not None:
            self.broker.stop()
            self.broker = None

    def __enter__(self) -> FaultyNetwork:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextlib.contextmanager
    def use(self) -> Iterator[str]:
        """This process's settings and its children's environment on this broker (through the
        proxy) while inside; what was there before afterwards."""
        with environment({"KAFKA_BOOTSTRAP": self.bootstrap}):
            yield self.bootstrap

    # -- broker stalls ---------------------------------------------------------------------

    def pause_broker(self, seconds: float) -> BrokerPause:
        """SIGSTOP the broker now and SIGCONT it ``seconds`` later (from a timer thread)."""
        if self.broker is None or self.broker.state is None:
            raise RuntimeError("the faulty network is not started")
        os.kill(self.broker.state.pid, signal.SIGSTOP)
        pause = BrokerPause(now_ms(), seconds)
        self.pauses.append(pause)
        log.info("broker paused (SIGSTOP) for %.1f s", seconds)
        self._resume = threading.Timer(seconds, self._cont)
        self._resume.daemon = True
        self._resume.start()
        return pause

    def _cont(self) -> None:
        broker = self.broker
        if broker is None or broker.state is None or not self.pauses:
            return
        if self.pauses[-1].resumed_ms is None and pid_alive(broker.state.pid):
            os.kill(broker.state.pid, signal.SIGCONT)
            self.pauses[-1].resumed_ms = now_ms()
            log.info("broker resumed (SIGCONT)")

    def paused(self) -> bool:
        return bool(self.pauses) and self.pauses[-1].resumed_ms is None

    def wait_resumed(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.paused() and time.monotonic() < deadline:
            time.sleep(0.05)
        return not self.paused()
