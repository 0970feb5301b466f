"""Test helpers: produce known records, run and kill job processes, wait for conditions."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from confluent_kafka import Producer

from recovery_lib.kafka.clients import client_config

REPO = Path(__file__).resolve().parents[1]


def produce(
    topic: str,
    count: int,
    partitions: int,
    prefix: str = "v",
    start: int = 0,
    headers: bool = False,
) -> list[bytes]:
    """Values ``{prefix}{i}`` round-robin over partitions; returns the values written."""
    producer = Producer({**client_config(), "linger.ms": "5", "enable.idempotence": "true"})
    values = []
    for i in range(start, start + count):
        value = f"{prefix}{i}".encode()
        kwargs = {"headers": [("h", str(i).encode())]} if headers else {}
        while True:
            try:
                producer.produce(
                    topic,
                    value=value,
                    key=f"k{i % 17}".encode(),
                    partition=i % partitions,
                    **kwargs,
                )
                break
            except BufferError:
                producer.poll(0.05)
        values.append(value)
    assert producer.flush(30) == 0
    return values


def wait_for(
    condition: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


class JobProcess:
    """A job driver in its own process group, so one SIGKILL takes the JVM down with it."""

    def __init__(self, args: Sequence[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self._log_file = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=REPO,
            env={**os.environ, **(env or {})},
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def freeze(self) -> None:
        """SIGSTOP the driver's process group (its JVM included): nothing commits meanwhile."""
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"job did not finish in {timeout_s:.0f} s; log: {self.tail()}"
            ) from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        # Workers run in their own process group (pyspark daemon); they exit when the JVM is gone.
        self._log_file.close()

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def uncommit(checkpoint: Path, batch: int) -> None:
    """Forget that ``batch`` committed: a restart re-executes it (offset log entry kept), as
    after a query that died between planning and committing it."""
    for name in (str(batch), f".{batch}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)


def committed_batches(checkpoint: Path) -> list[int]:
    commits = checkpoint / "commits"
    if not commits.exists():
        return []
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())


def prices_job(
    tmp_path: Path,
    prefix: str,
    out: str,
    price_url: str,
    sink_mode: str,
    mode: str = "native",
    env: dict[str, str] | None = None,
):  # noqa: ANN201 - a Supervisor
    """The nondeterministic prices pipeline, supervised, fault hooks armed from tmp_path/arm."""
    from recovery_lib.runtime.faults import ARM_DIR_ENV
    from recovery_lib.runtime.launch import JobLaunch
    from recovery_lib.runtime.supervisor import ProcessSpec, Supervisor

    launch = JobLaunch(
        job="jobs.prices:JOB",
        name="prices",
        params={"price_url": price_url},
        prefix=prefix,
        checkpoints=str(tmp_path / "ck"),
        output_topic=out,
        sink_mode=sink_mode,
        max_records=1000,
    ).with_process_mode(mode)
    env = {ARM_DIR_ENV: str(tmp_path / "arm"), **(env or {})}
    spec = ProcessSpec.for_job(launch, env=env)
    return Supervisor(spec, tmp_path / "sup")
