"""The resource sampler on real child processes: counted, their memory, their CPU seconds
(a busy child's at least what it burned), the broker's name left out, and nothing of the
processes outside its root (a test session's own Spark JVM, say)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

from recovery_lib.metrics.resources import ResourceSampler

# Each child says when it runs ("idle", "busy") and the busy one when it burned its second
# of CPU ("burned"), so a test waits for that rather than for a guessed time. One os.write per
# line: the children share a pipe, and print() may write a word and its newline apart (seen:
# "idlebusy\n\n").
IDLE = "import os, time\nos.write(1, b'idle\\n')\ntime.sleep(120)\n"
BUSY = (
    "import os, time\nos.write(1, b'busy\\n')\nend = time.process_time() + 1.0\n"
    "while time.process_time() < end: pass\nos.write(1, b'burned\\n')\ntime.sleep(120)\n"
)

# A parent that starts an idle and a busy child once told to (a line on its stdin), so the
# sampler can start before any CPU is burned, then waits; its children share its stdout. A
# SIGTERM ends it through its finally, which kills the children.
PARENT = f"""
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
sys.stdin.readline()
kids = [subprocess.Popen([sys.executable, "-c", {IDLE!r}]),
        subprocess.Popen([sys.executable, "-c", {BUSY!r}])]
try:
    time.sleep(120)
finally:
    for kid in kids:
        kid.kill()
"""


def _parent() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _go(parent: subprocess.Popen) -> None:
    """Tell the parent to start its children."""
    parent.stdin.write("go\n")
    parent.stdin.flush()


def _until_said(parent: subprocess.Popen, *words: str, timeout_s: float = 30) -> None:
    """Read the children's lines until each of ``words`` came (raw reads: a buffered reader
    could hold a line select() no longer sees)."""
    missing, pending = set(words), b""
    fd = parent.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    while missing:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"the children did not say {sorted(missing)} within {timeout_s:.0f} s"
        chunk = os.read(fd, 4096)
        assert chunk, f"the parent's output ended before {sorted(missing)}"
        *lines, pending = (pending + chunk).split(b"\n")
        missing -= {line.decode().strip() for line in lines}


def _stop(parent: subprocess.Popen) -> None:
    parent.terminate()
    parent.wait()


def test_children_are_counted_with_their_memory_and_cpu():
    parent = _parent()
    try:
        with ResourceSampler(period_s=0.1, root=parent.pid) as sampler:
            _go(parent)
            _until_said(parent, "idle", "burned")  # the busy child burned its second of CPU
        figures = sampler.figures
        assert figures["peak_processes"] == 2
        assert figures["peak_rss_mb"] >= 2
        assert 0.9 <= figures["cpu_s"] < 10
    finally:
        _stop(parent)


def test_cpu_spent_before_the_start_is_not_counted():
    parent = _parent()
    try:
        _go(parent)
        _until_said(parent, "idle", "burned")  # its second is burned before the sampler starts
        with ResourceSampler(period_s=0.1, root=parent.pid) as sampler:
            time.sleep(0.5)
        assert sampler.figures["peak_processes"] == 2
        assert sampler.figures["cpu_s"] < 0.5
    finally:
        _stop(parent)


def test_skipped_names_and_a_sampler_never_started():
    parent = _parent()
    try:
        _go(parent)
        _until_said(parent, "idle", "busy")
        sampler = ResourceSampler(skip=("python",), root=parent.pid)
        assert sampler.sample() == (0, 0.0)
        sampler.stop()  # never started: nothing to stop, no error
        assert sampler.figures == {"peak_processes": 0, "peak_rss_mb": 0, "cpu_s": 0.0}
        assert ResourceSampler(root=parent.pid).sample()[0] == 2
    finally:
        _stop(parent)
