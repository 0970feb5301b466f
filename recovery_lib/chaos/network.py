"""A broker the experiment can hurt: a private embedded broker that advertises a fault proxy's
address, so that every client (the job's source, sink and control topics, the experiment's own
producers) reaches it through the proxy, and that can be paused (SIGSTOP/SIGCONT) like a broker
that stalls in a leader election or a long GC, or killed (SIGKILL) and started again on its own
log dir like a broker that crashed (Apache Kafka keeps what it acknowledged; tansu loses all).

It is private: not recorded as the machine's embedded broker, started and stopped by its owner
only. ``use()`` points this process's settings and its children's environment at it.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from recovery_lib.chaos.cluster import ClusterNotStarted
from recovery_lib.chaos.private import PrivateKafka
from recovery_lib.chaos.proxy import FaultProxy, now_ms
from recovery_lib.kafka.broker import EmbeddedBroker
from recovery_lib.processes import free_port, pid_alive
from recovery_lib.settings import Settings, get_settings

log = logging.getLogger(__name__)


@dataclass
class BrokerRestart:
    """One SIGKILL of the broker and its start on the same log dir ``down_s`` later."""

    killed_ms: int
    down_s: float
    restarted_ms: int | None = None
    error: str | None = None


@dataclass
class BrokerPause:
    """One SIGSTOP of the broker and its SIGCONT."""

    stopped_ms: int
    seconds: float
    resumed_ms: int | None = None


class FaultyNetwork(PrivateKafka):
    def __init__(
        self, log_dir: Path | None = None, seed: int = 0, settings: Settings | None = None
    ) -> None:
        self.settings = settings or get_settings()
        self.log_dir = log_dir or self.settings.home / "broker"
        self.seed = seed
        self.broker: EmbeddedBroker | None = None
        self.proxy: FaultProxy | None = None
        self.pauses: list[BrokerPause] = []
        self.restarts: list[BrokerRestart] = []
        self._resume: threading.Timer | None = None
        self._keeper: threading.Thread | None = None
        self._due: queue.Queue[tuple[float, BrokerRestart] | None] = queue.Queue()
        self._stopping = threading.Event()
        self._data_dir: Path | None = None  # this network's own broker data, gone at stop
        self._proxy_port: int | None = None
        self._lock = threading.Lock()  # the keeper's restart and stop() swap the broker

    @property
    def bootstrap(self) -> str:
        if self.proxy is None:
            raise ClusterNotStarted("the faulty network is not started: start() it first")
        return f"{self.proxy.host}:{self.proxy.port}"

    def start(self) -> str:
        """The broker, then the proxy on the port the broker advertises; the bootstrap."""
        host = self.settings.broker_host
        self._proxy_port = proxy_port = free_port(host)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._data_dir = Path(tempfile.mkdtemp(prefix="broker-", dir=self.log_dir))
        self.broker = self._broker()
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
        """Resume a paused broker, stop the proxy and the broker, remove the broker's data;
        safe to call twice."""
        if self._resume is not None:
            self._resume.cancel()
        self._stopping.set()  # no restart from now on; one under way finishes first (lock)
        self._cont()
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        with self._lock:
            if self.broker is not None:
                self.broker.stop()
                self.broker = None
        if self._keeper is not None:  # after the broker: it dies with the keeper thread
            self._due.put(None)
            self._keeper.join(timeout=10)
            self._keeper = None
        if self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    def _broker(self) -> EmbeddedBroker:
        """This network's broker: its own data dir, advertising the proxy, not recorded."""
        return EmbeddedBroker(
            self.settings, log_dir=self._data_dir, advertised_port=self._proxy_port, private=True
        )

    # -- broker stalls ---------------------------------------------------------------------

    def pause_broker(self, seconds: float) -> BrokerPause:
        """SIGSTOP the broker now and SIGCONT it ``seconds`` later (from a timer thread)."""
        if self.broker is None or self.broker.state is None:
            raise ClusterNotStarted("the faulty network is not started: start() it first")
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

    # -- broker crashes --------------------------------------------------------------------

    def restart_broker(self, down_s: float) -> BrokerRestart:
        """SIGKILL the broker now and start it again on the same log dir and ports ``down_s``
        later; clients reconnect through the proxy. The start runs on the network's keeper
        thread, which lives as long as the network: a broker dies with the thread that started
        it (PDEATHSIG), so a timer thread's start would end with the timer."""
        if self.broker is None or self.broker.state is None:
            raise ClusterNotStarted("the faulty network is not started: start() it first")
        restart = BrokerRestart(now_ms(), down_s)
        self.restarts.append(restart)
        os.kill(self.broker.state.pid, signal.SIGKILL)
        log.info("broker killed (SIGKILL); starting it again in %.1f s", down_s)
        if self._keeper is None:
            self._keeper = threading.Thread(target=self._keep, name="broker keeper", daemon=True)
            self._keeper.start()
        self._due.put((time.monotonic() + down_s, restart))
        return restart

    def _keep(self) -> None:
        """Start killed brokers again when due, until the network stops (a None)."""
        while (item := self._due.get()) is not None:
            due, restart = item
            if self._stopping.wait(max(0.0, due - time.monotonic())):
                return
            self._start_again(restart)

    def _start_again(self, restart: BrokerRestart) -> None:
        with self._lock:
            if self.broker is None:  # stopped meanwhile
                return
            self.broker.stop()  # reaps the killed process
            try:
                self.broker = self._broker()
                self.broker.start()
            except Exception as exc:  # noqa: BLE001 - the report says it; the run goes on
                restart.error = repr(exc)
                log.error("the killed broker did not start again: %s", exc)
                return
        restart.restarted_ms = now_ms()
        log.info("broker started again on its log dir")

    def restarting(self) -> bool:
        last = self.restarts[-1] if self.restarts else None
        return last is not None and last.restarted_ms is None and last.error is None
