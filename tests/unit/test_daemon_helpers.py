"""The detached start, liveness and stop shared by the job and pipeline daemons, on real
processes (a tiny stand-in module instead of a daemon)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recovery_lib.runtime.daemon import DaemonStatus, seen_alive, start_detached, stop_daemon

# Writes a running status naming its own pid, then sleeps until killed (or exits at once).
STAND_IN = """
import json, os, sys, time
from pathlib import Path
if sys.argv[1] == "crash":
    print("bad configuration"); sys.exit(3)
Path(os.environ["STATUS_FILE"]).write_text(json.dumps(
    {"job": sys.argv[1], "status": "running", "supervisor_pid": os.getpid(), "ts_ms": 0}))
time.sleep(120)
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    (tmp_path / "stand_in_daemon.py").write_text(STAND_IN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("STATUS_FILE", str(tmp_path / "daemon.json"))
    return tmp_path


def read(path: Path) -> DaemonStatus | None:
    try:
        return DaemonStatus(**json.loads(path.read_text()))
    except OSError:
        return None


def test_a_detached_daemon_starts_reports_and_stops(stand_in):
    status = start_detached(
        "stand_in_daemon", "q1", stand_in, lambda: read(stand_in / "daemon.json"), "job q1"
    )
    try:
        assert status.status == "running" and status.alive
        assert os.getsid(status.supervisor_pid) == status.supervisor_pid  # its own session
        assert seen_alive(status, stand_in / "daemon.log", "never").status == "running"
    finally:
        stop_daemon(status, timeout_s=10)
    deadline = time.monotonic() + 10
    while status.alive and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not status.alive
    gone = seen_alive(read(stand_in / "daemon.json"), stand_in / "daemon.log", "never")
    assert gone.status == "failed" and "daemon.log" in gone.message


def test_a_daemon_that_exits_at_start_names_its_log(stand_in):
    with pytest.raises(RuntimeError, match=r"exited with 3 at start; see .*daemon\.log"):
        start_detached("stand_in_daemon", "crash", stand_in, lambda: None, "job crash")
    assert "bad configuration" in (stand_in / "daemon.log").read_text()


def test_never_started_says_so():
    with pytest.raises(RuntimeError, match="never started"):
        seen_alive(None, Path("daemon.log"), "job x was never started here")


def test_stop_kills_the_group_of_a_daemon_that_ignores_sigterm(tmp_path):
    ignoring = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", ignoring], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout.readline() == "ready\n"  # SIGTERM is ignored from here on
    status = DaemonStatus("x", "running", proc.pid, 0)
    stop_daemon(status, timeout_s=1)
    assert proc.wait(10) == -signal.SIGKILL
