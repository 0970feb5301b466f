"""What a run costs the machine: the processes under this one (jobs, supervisors, Spark's JVMs
and Python workers), sampled while the run goes on.

Peak process count and resident memory, and CPU seconds: each process's user + system time
at its last sample less its time at the sampler's start (a process already running then,
such as a shared Spark session, counts only what it spends during the run), summed over
every process seen (a process that ends between two samples loses at most one period of
CPU). The processes are the descendants of ``root`` (by default this process). Resident
memory is summed per process, so pages that forked Python workers share with their parent
count more than once: an upper bound, the same way for every mode compared. The broker (shared
by every run: tansu, or Kafka's JVMs) and processes named in ``skip`` are left out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psutil

from recovery_lib.kafka.broker import is_broker


class ResourceSampler:
    def __init__(
        self, period_s: float = 1.0, skip: tuple[str, ...] = (), root: int | None = None
    ) -> None:
        self.period_s = period_s
        self.skip = skip
        self.root = psutil.Process(root)
        self.peak_processes = 0
        self.peak_rss_mb = 0.0
        self._cpu_s: dict[tuple[int, float], float] = {}  # (pid, create time) -> CPU seconds
        self._cpu_at_start: dict[tuple[int, float], float] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="resources", daemon=True)

    def sample(self) -> tuple[int, float]:
        """One sample: the processes counted now and their resident memory (MB)."""
        count, rss = 0, 0
        for proc in self.root.children(recursive=True):
            try:
                if any(s in proc.name() for s in self.skip) or is_broker(proc.pid):
                    continue
                with proc.oneshot():
                    rss += proc.memory_info().rss
                    times = proc.cpu_times()
                    self._cpu_s[(proc.pid, proc.create_time())] = times.user + times.system
                count += 1
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue  # ended between the listing and the read
        self.peak_processes = max(self.peak_processes, count)
        self.peak_rss_mb = max(self.peak_rss_mb, rss / 2**20)
        return count, rss / 2**20

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - keep sampling; say it in the figures
                self.errors.append(repr(exc))

    def start(self) -> ResourceSampler:
        self.sample()
        self._cpu_at_start = dict(self._cpu_s)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(timeout=5)
            self.sample()

    def __enter__(self) -> ResourceSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def cpu_s(self) -> float:
        return sum(cpu - self._cpu_at_start.get(key, 0.0) for key, cpu in self._cpu_s.items())

    @property
    def figures(self) -> dict[str, Any]:
        figures: dict[str, Any] = {
            "peak_processes": self.peak_processes,
            "peak_rss_mb": round(self.peak_rss_mb),
            "cpu_s": round(self.cpu_s, 1),
        }
        if self.errors:
            figures["sample_errors"] = self.errors[:5]
        return figures


def during_run(sampler: ResourceSampler, run: str = "faulty") -> Callable[[str, str], None]:
    """An experiment's ``on_run`` hook that samples ``run`` only (not the reference run)."""

    def on_run(name: str, phase: str) -> None:
        if name == run and phase == "start":
            sampler.start()
        elif name == run:
            sampler.stop()

    return on_run
