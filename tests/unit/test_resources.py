"""The resource sampler on real child processes: counted, their memory, their CPU seconds
(a busy child's at least what it burned), the broker's name left out, and nothing of the
processes outside its root (a test session's own Spark JVM, say)."""

from __future__ import annotations

import subprocess
import sys
import time

from recovery_lib.metrics.resources import ResourceSampler

BUSY = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass\n"

# A parent that starts an idle and a busy child once told to (a line on its stdin), so the
# sampler can start before any CPU is burned, then waits.
PARENT = f"""
import subprocess, sys, time
sys.stdin.readline()
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]),
        subprocess.Popen([sys.executable, "-c", {BUSY + "time.sleep(30)"!r}])]
try:
    time.sleep(30)
finally:
    for kid in kids:
        kid.kill()
"""


def _parent() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, text=True)


def _go(parent: subprocess.Popen) -> None:
    """Tell the parent to start its children."""
    parent.stdin.write("go\n")
    parent.stdin.flush()


def _stop(parent: subprocess.Popen) -> None:
    parent.terminate()
    parent.wait()


def test_children_are_counted_with_their_memory_and_cpu():
    parent = _parent()
    try:
        with ResourceSampler(period_s=0.1, root=parent.pid) as sampler:
            _go(parent)
            time.sleep(2.5)  # the busy child burns its second of CPU
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
        time.sleep(2.5)  # the busy child burns its second before the sampler starts
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
        time.sleep(1.0)
        sampler = ResourceSampler(skip=("python",), root=parent.pid)
        assert sampler.sample() == (0, 0.0)
        sampler.stop()  # never started: nothing to stop, no error
        assert sampler.figures == {"peak_processes": 0, "peak_rss_mb": 0, "cpu_s": 0.0}
        assert ResourceSampler(root=parent.pid).sample()[0] == 2
    finally:
        _stop(parent)
