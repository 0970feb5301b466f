"""The armed mid-write pause and the supervisor's pause on real processes: a sink task that
reached its row stops the job's process groups (a frozen job), the experiment's resumer
continues them later, and a descendant in a group of its own is frozen with the rest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from recovery_lib.runtime import supervisor
from recovery_lib.runtime.faults import MIDPAUSE_ARM, arm, resume_when_paused
from recovery_lib.runtime.supervisor import Supervisor


def state(pid: int) -> str:
    """The process's state letter from /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _stopped(pid: int, stopped: bool = True, timeout_s: float = 10) -> bool:
    """Whether the process is (or, with ``stopped`` False, is no longer) stopped within
    ``timeout_s``: a signal takes effect once the process is scheduled, later on a busy
    machine."""
    deadline = time.monotonic() + timeout_s
    while (state(pid) == "T") != stopped:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _writer_until_paused(arm_dir: Path, rows: int, env: str = "") -> subprocess.Popen:
    """A sink-like writer (its own session) printing rows 1..rows through the armed fault;
    returned once the fault fired (the caller waits for the stop to take effect)."""
    writer = textwrap.dedent(
        f"""
        import os
        os.environ["RECOVERY_FAULT_ARM_DIR"] = {str(arm_dir)!r}
        {env}
        from recovery_lib.runtime.faults import sink_write_fault
        fault = sink_write_fault()
        for row in range(1, {rows + 1}):
            print(row, flush=True)
            if fault.should_fire(7, row):
                fault.fire()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (arm_dir / "midpause.pgid").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError("the hook never fired")
        time.sleep(0.05)
    return proc


def test_an_armed_pause_stops_the_writer_mid_write_until_it_is_resumed(tmp_path):
    arm(tmp_path, MIDPAUSE_ARM, "rows=3")
    proc = _writer_until_paused(tmp_path, 5)
    try:
        assert _stopped(proc.pid), "the writer was not stopped"
        assert (tmp_path / "midpause.fired").exists()
        pgids = resume_when_paused(tmp_path, 0.5, 10)
        assert pgids == [proc.pid]  # its own group (a session leader here)
        out, _ = proc.communicate(timeout=30)
        assert out.split() == ["1", "2", "3", "4", "5"]  # it went on writing after the pause
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_nothing_resumes_a_pause_that_never_fired(tmp_path):
    started = time.monotonic()
    assert resume_when_paused(tmp_path, 5.0, 0.3) is None
    assert time.monotonic() - started < 3


def test_a_writer_outside_the_drivers_group_stops_with_the_driver(tmp_path):
    """PySpark's worker daemon gives its workers a process group of their own: the pause must
    stop that group as well as the driver's, or the writer goes on writing during the freeze
    (seen: a frozen KaZoo leader finished its batch at once and left no zombie)."""
    arm(tmp_path, MIDPAUSE_ARM, "rows=2")
    driver = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    proc = None
    try:
        proc = _writer_until_paused(
            tmp_path, 3, env=f'os.environ["RECOVERY_DRIVER_PGID"] = "{driver.pid}"'
        )
        assert _stopped(driver.pid), "the driver's group was not stopped"
        assert _stopped(proc.pid), "the writer went on during the pause"
        assert resume_when_paused(tmp_path, 0.2, 10) == [driver.pid, proc.pid]
        out, _ = proc.communicate(timeout=30)
        assert out.split() == ["1", "2", "3"]
        assert _stopped(driver.pid, stopped=False)
        assert (tmp_path / "midpause.where").exists()
    finally:
        for p in (proc, driver):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_a_paused_job_stops_its_descendants_in_other_groups_too(tmp_path, monkeypatch):
    """The supervisor's pause (a frozen job) reaches a descendant in a process group of its
    own, as PySpark's worker daemon is, and resumes it with the rest."""
    job = textwrap.dedent(
        """
        import subprocess, sys, time
        worker = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
        )
        print(worker.pid, flush=True)
        time.sleep(60)
        """
    )
    sup = Supervisor(SimpleNamespace(env={}, args=[]), tmp_path / "sup")
    sup.proc = subprocess.Popen(
        [sys.executable, "-c", job], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    worker = int(sup.proc.stdout.readline())
    # The pause lasts until the test ends it: no SIGCONT can come before the checks.
    paused, resume = threading.Event(), threading.Event()

    class PauseClock:
        def __getattr__(self, name: str) -> object:  # the rest of the time module
            return getattr(time, name)

        @staticmethod
        def sleep(_seconds: float) -> None:
            paused.set()
            resume.wait(30)

    monkeypatch.setattr(supervisor, "time", PauseClock())
    try:
        pausing = threading.Thread(target=sup.pause, args=(1.5,))
        pausing.start()
        assert paused.wait(30), "the supervisor never paused the job"
        assert _stopped(sup.proc.pid), "the job's own group ran through the pause"
        assert _stopped(worker), "the worker in its own group ran through the pause"
        resume.set()
        pausing.join(30)
        assert _stopped(sup.proc.pid, stopped=False) and _stopped(worker, stopped=False)
    finally:
        resume.set()
        os.kill(worker, signal.SIGKILL)
        sup.proc.kill()
        sup.proc.wait()
