"""A spare job process takes the job at its death (runtime/spare.py, runtime/supervisor.py).

Real processes and a real SIGKILL; the job is a small Python program that keeps the spare's
contract (wait for the go file, then beat), so the supervisor's handover is tested without
Spark. The Spark side runs in tests/test_spare_e2e.py.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from recovery_lib.runtime.supervisor import ProcessSpec, Supervisor

FAKE_JOB = """
import json, os, sys, time
from pathlib import Path
from recovery_lib.runtime.spare import SPARE_GO_ENV, wait_for_go

heartbeat = Path(sys.argv[sys.argv.index("--heartbeat") + 1])
marks = Path(sys.argv[sys.argv.index("--marks") + 1])
go = os.environ.get(SPARE_GO_ENV)
with open(marks, "a") as out:
    out.write(f"{os.getpid()} built spare={go is not None}\\n")
if go is not None and not wait_for_go(Path(go)):
    sys.exit(3)
with open(marks, "a") as out:
    out.write(f"{os.getpid()} query started\\n")
# Batches done: a line each in the batches file when the test keeps one, else one per beat.
batches_file = marks.with_name("batches.txt")
beats = 0
while True:
    beats += 1
    batches = len(batches_file.read_text().splitlines()) if batches_file.exists() else beats
    beat = {"pid": os.getpid(), "ts_ms": int(time.time() * 1000), "query_active": True,
            "last_batch": 0, "batches": batches, "input_rows": 0, "pgid": os.getpgid(0)}
    tmp = heartbeat.with_suffix(".tmp")
    tmp.write_text(json.dumps(beat))
    tmp.replace(heartbeat)
    time.sleep(0.1)
"""


@pytest.fixture
def fake_job(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "fake_job.py").write_text(FAKE_JOB)
    return tmp_path / "fake_job.py", tmp_path / "marks.txt"


def _tick_until(sup: Supervisor, done, timeout_s: float = 30.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        sup.tick()
        time.sleep(0.05)


def _supervisor(tmp_path: Path, fake_job: tuple[Path, Path], spare: bool) -> Supervisor:
    script, marks = fake_job
    spec = ProcessSpec("fake_job", args=["--marks", str(marks)], name="fake", heartbeat_timeout_s=5)
    sup = Supervisor(spec, tmp_path / "sup", spare=spare)
    sup.command = lambda: [  # type: ignore[method-assign]
        sys.executable,
        str(script),
        *spec.argv(str(sup.heartbeat_path)),
    ]
    events: list[tuple[str, dict]] = []
    sup.on_event = lambda kind, detail: events.append((kind, detail))
    sup.events = events  # type: ignore[attr-defined]
    return sup


def test_the_spare_takes_the_job_at_a_kill_and_a_new_spare_waits(
    tmp_path: Path, fake_job: tuple[Path, Path]
) -> None:
    sup = _supervisor(tmp_path, fake_job, spare=True)
    pids: list[int] = []
    try:
        sup.start()
        first = sup.pid
        pids.append(first)
        _tick_until(sup, lambda: sup.spare is not None)
        spare = sup.spare.pid
        pids.append(spare)
        marks = fake_job[1]
        _tick_until(sup, lambda: f"{spare} built spare=True" in marks.read_text())
        assert f"{spare} query started" not in marks.read_text()  # it waits for its go

        os.kill(first, signal.SIGKILL)
        _tick_until(sup, lambda: sup.pid == spare and sup.serving())
        assert f"{spare} query started" in marks.read_text()
        restart = [d for k, d in sup.events if k == "restart"]
        assert restart == [{"pid": spare, "spare": True}]
        assert len(sup.restarts) == 1 and sup.restarts[0].ready_ms is not None

        _tick_until(sup, lambda: sup.spare is not None)  # the next failure has one too
        pids.append(sup.spare.pid)
        assert sup.spare.pid not in (first, spare)
    finally:
        sup.stop(timeout_s=5)
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]


def test_no_spare_starts_beside_the_jobs_first_batches(
    tmp_path: Path, fake_job: tuple[Path, Path]
) -> None:
    """The first batch after a (re)start is the slow one: a spare's start-up beside it on two
    cores would slow it down. The spare starts once START_AFTER_BATCHES are done."""
    from recovery_lib.runtime.spare import START_AFTER_BATCHES

    batches = fake_job[1].with_name("batches.txt")
    batches.write_text("done\n" * (START_AFTER_BATCHES - 1))
    sup = _supervisor(tmp_path, fake_job, spare=True)
    try:
        sup.start()
        _tick_until(sup, sup.serving)
        until = time.monotonic() + 1.0
        while time.monotonic() < until:
            sup.tick()
            time.sleep(0.05)
        assert sup.spare is None
        batches.write_text("done\n" * START_AFTER_BATCHES)
        _tick_until(sup, lambda: sup.spare is not None)
    finally:
        sup.stop(timeout_s=5)


def test_without_the_setting_a_kill_starts_a_new_process(
    tmp_path: Path, fake_job: tuple[Path, Path]
) -> None:
    sup = _supervisor(tmp_path, fake_job, spare=False)
    try:
        sup.start()
        first = sup.pid
        _tick_until(sup, sup.serving)
        time.sleep(0.5)
        sup.tick()
        assert sup.spare is None
        os.kill(first, signal.SIGKILL)
        _tick_until(sup, lambda: sup.pid != first and sup.serving())
        assert [d.get("spare") for k, d in sup.events if k == "restart"] == [None]
    finally:
        sup.stop(timeout_s=5)


def test_a_dead_spare_is_not_handed_the_job(tmp_path: Path, fake_job: tuple[Path, Path]) -> None:
    sup = _supervisor(tmp_path, fake_job, spare=True)
    try:
        sup.start()
        first = sup.pid
        _tick_until(sup, lambda: sup.spare is not None)
        dead = sup.spare.pid
        os.killpg(dead, signal.SIGKILL)
        sup.spare.wait(5)
        os.kill(first, signal.SIGKILL)
        _tick_until(sup, lambda: sup.pid not in (first, dead) and sup.serving())
        # Handed to a fresh start, or to a spare started after the dead one was seen.
        restarts = [d for k, d in sup.events if k == "restart"]
        assert len(restarts) == 1 and restarts[0]["pid"] == sup.pid != dead
        if restarts[0].get("spare"):
            assert ("spare_died", {"pid": dead, "exit": -signal.SIGKILL}) in sup.events
    finally:
        sup.stop(timeout_s=5)


def test_a_spare_whose_supervisor_is_gone_does_not_wait_forever(tmp_path: Path) -> None:
    """wait_for_go returns False once the parent is gone (here: a parent that exits)."""
    go = tmp_path / "go"
    child = tmp_path / "child.py"
    result = tmp_path / "result"
    child.write_text(
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from recovery_lib.runtime.spare import wait_for_go\n"
        "if os.fork():\n"
        "    time.sleep(0.3)\n"
        "    os._exit(0)\n"
        f"Path({str(result)!r}).write_text(str(wait_for_go(Path({str(go)!r}))))\n"
    )
    proc = psutil.Popen([sys.executable, str(child)])
    proc.wait(10)
    deadline = time.monotonic() + 10
    while not result.exists():
        assert time.monotonic() < deadline, "the orphaned spare still waits"
        time.sleep(0.05)
    assert result.read_text() == "False"
    assert not go.exists()
