"""The resource sampler on real child processes: counted, their memory, their CPU seconds
(a busy child's at least what it burned), the broker's name left out."""

from __future__ import annotations

import subprocess
import sys
import time

from recovery_lib.metrics.resources import ResourceSampler

BUSY = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass\n"


def test_children_are_counted_with_their_memory_and_cpu():
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    busy = subprocess.Popen([sys.executable, "-c", BUSY + "time.sleep(30)"])
    try:
        with ResourceSampler(period_s=0.1) as sampler:
            time.sleep(2.0)  # the busy child burns its second of CPU
        figures = sampler.figures
        assert figures["peak_processes"] >= 2
        assert figures["peak_rss_mb"] >= 2
        assert 0.9 <= figures["cpu_s"] < 10
    finally:
        for child in (idle, busy):
            child.kill()
            child.wait()


def test_skipped_names_and_a_sampler_never_started():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        sampler = ResourceSampler(skip=("python",))
        assert sampler.sample() == (0, 0.0)
        sampler.stop()  # never started: nothing to stop, no error
        assert sampler.figures == {"peak_processes": 0, "peak_rss_mb": 0, "cpu_s": 0.0}
    finally:
        child.kill()
        child.wait()
