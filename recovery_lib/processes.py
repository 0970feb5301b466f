"""Processes and ports of this machine: is a pid alive, stop pids, a free port, a port that
answers. Below every package that starts processes (the broker, the cluster, the daemons, the
replica leases), so none of them imports another's module for them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["free_port", "pid_alive", "port_answers", "stop_pid", "stop_pids"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_answers(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); it is dead for our purposes.
    with contextlib.suppress(OSError):  # no /proc entry to read: kill(0) had the last word
        status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        if status == "Z":
            return False
    return True


def stop_pid(
    pid: int, timeout_s: float = 5.0, process: subprocess.Popen[bytes] | None = None
) -> None:
    stop_pids([pid], timeout_s, [process] if process is not None else None)


def stop_pids(
    pids: list[int],
    timeout_s: float = 5.0,
    processes: list[subprocess.Popen[bytes]] | None = None,
) -> None:
    """SIGTERM to every pid at once, SIGKILL to those alive after ``timeout_s``; returns when
    all are gone. ``processes``: the same pids as our children (reaped, not left zombies)."""
    children = {p.pid: p for p in processes or []}

    def alive(pid: int) -> bool:
        child = children.get(pid)
        return child.poll() is None if child is not None else pid_alive(pid)

    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile: what we wanted
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s  # not our child: wait until the kernel is done
    for pid in pids:
        child = children.get(pid)
        if child is not None:
            child.wait(timeout=timeout_s)
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
