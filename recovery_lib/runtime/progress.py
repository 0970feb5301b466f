"""Progress of a long command: rich's displays on a terminal, throttled plain lines in a pipe
(``| tee log``, an Airflow task, CI), where a Live display shows nothing until the end."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console

from recovery_lib.runtime.logs import ProgressThrottle


class LineProgress:
    """The part of ``rich.progress.Progress`` the commands use, printed as plain lines for a
    pipe (``| tee log``, an Airflow task, CI), where a Live display would show nothing until
    the end: a task's line when its description changes, else at most one per
    ``PROGRESS_EVERY_S`` (runtime/logs.py ``ProgressThrottle``), and each task's last state
    when the display stops."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.console, self.clock = console, clock
        self._tasks: dict[int, dict[str, Any]] = {}
        self._throttles: dict[int, ProgressThrottle] = {}
        self._stopped = False

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def add_task(self, description: str, total: float | None = None, **fields: Any) -> int:
        task = len(self._tasks)
        self._tasks[task] = {"description": description, "total": total, "completed": 0.0}
        self._tasks[task].update(fields)
        self._throttles[task] = ProgressThrottle(self._print, clock=self.clock)
        self._show(task)
        return task

    def update(
        self,
        task: int,
        *,
        description: str | None = None,
        completed: float | None = None,
        total: float | None = None,
        advance: float | None = None,
        **fields: Any,
    ) -> None:
        state = self._tasks[task]
        if description is not None:
            state["description"] = description
        if total is not None:
            state["total"] = total
        if completed is not None:
            state["completed"] = completed
        if advance is not None:
            state["completed"] += advance
        state.update(fields)
        self._show(task)

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for task in self._tasks:
            self._print(self._line(task))  # the last state, whatever the throttle held back

    def _print(self, line: str) -> None:
        self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def _line(self, task: int) -> str:
        state = self._tasks[task]
        step = f"{state['step']}: " if state.get("step") else ""
        done, total = state["completed"], state["total"]
        count = f"{done:,.0f}/{total:,.0f}" if total else f"{done:,.0f}"
        return f"{step}{state['description']} ({count})"

    def _show(self, task: int) -> None:
        self._throttles[task](self._line(task))


def progress_display(console: Console, *columns: Any, transient: bool = False) -> Any:
    """A rich ``Progress`` on a terminal, ``LineProgress`` in a pipe (same calls)."""
    if console.is_terminal:
        from rich.progress import Progress

        return Progress(*columns, console=console, transient=transient)
    return LineProgress(console)


@contextlib.contextmanager
def status_lines(
    console: Console, clock: Callable[[], float] = time.monotonic
) -> Iterator[Callable[[str], None]]:
    """Where a long command's one-line status goes (``show(message)``): a Live line on a
    terminal, throttled plain lines in a pipe; each prefixed with the seconds since it began."""
    started = clock()

    def stamped(message: str) -> str:
        return f"[{clock() - started:6.1f} s] {message}"

    if console.is_terminal:
        from rich.live import Live
        from rich.text import Text

        with Live(Text("starting ..."), console=console, refresh_per_second=4) as live:
            yield lambda message: live.update(Text(stamped(message)))
        return
    throttle = ProgressThrottle(
        lambda line: console.print(line, highlight=False, markup=False, soft_wrap=True),
        clock=clock,
    )
    yield lambda message: throttle(stamped(message))
