"""Long commands show their progress in a pipe too (``| tee log``, an Airflow task, CI): plain
lines, at most one per 10 s and one per phase, where a terminal gets rich's Live displays
(runtime/progress.py)."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

from rich.console import Console
from rich.progress import Progress

from recovery_lib.runtime.progress import LineProgress, progress_display, status_lines


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _pipe() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=200), out


def test_a_pipe_gets_a_line_per_phase_and_per_ten_seconds() -> None:
    console, out = _pipe()
    clock = Clock()
    with LineProgress(console, clock=clock) as progress:
        task = progress.add_task("producing to t", total=1000)
        for n in range(1, 500):
            progress.update(task, completed=n)  # same phase, within 10 s: held back
        clock.now = 10.5
        progress.update(task, completed=600)  # 10 s later: shown
        progress.update(task, description="flushing", completed=700)  # a new phase: shown
    lines = out.getvalue().splitlines()
    assert lines == [
        "producing to t (0/1,000)",
        "producing to t (600/1,000)",
        "flushing (700/1,000)",
        "flushing (700/1,000)",  # the last state when the display stops
    ]


def test_steps_and_open_ended_tasks_read_as_lines() -> None:
    console, out = _pipe()
    with progress_display(console) as progress:
        assert isinstance(progress, LineProgress)
        step = progress.add_task("starting the broker", total=1, step="broker")
        progress.update(step, description="broker up", completed=1)
        mutants = progress.add_task("mutants of q1", total=None)
        progress.advance(mutants)
    text = out.getvalue()
    assert "broker: starting the broker (0/1)" in text and "broker: broker up (1/1)" in text
    assert "mutants of q1 (1)" in text


def test_a_terminal_keeps_rich_s_display() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    assert isinstance(progress_display(console), Progress)
    with status_lines(console) as show:
        show("feeding input")
    assert "feeding input" in out.getvalue() and "\x1b[" in out.getvalue()  # a Live display


def test_a_status_in_a_pipe_is_stamped_and_throttled() -> None:
    console, out = _pipe()
    clock = Clock()
    with status_lines(console, clock=clock) as show:
        show("run faulty: 10 of 60 s fed")
        clock.now = 3
        show("run faulty: 13 of 60 s fed")  # same phase within 10 s
        clock.now = 4
        show("verdict consistent")
    assert out.getvalue().splitlines() == [
        "[   0.0 s] run faulty: 10 of 60 s fed",
        "[   4.0 s] verdict consistent",
    ]


def test_a_real_pipe_is_not_a_terminal() -> None:
    """What rich decides for a process whose stdout is a pipe, as `recovery ... | tee` has."""
    script = textwrap.dedent(
        """
        from rich.console import Console
        from recovery_lib.runtime.progress import status_lines
        with status_lines(Console()) as show:
            show("phase one")
            show("phase two")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and lines[0].endswith("phase one") and lines[1].endswith("phase two")
