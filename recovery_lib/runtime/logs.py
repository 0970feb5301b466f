"""Library code reports through ``logging`` (the CLI alone prints); each process's entry point
(a job, a daemon, the CLI) calls ``configure_logging`` once: the project's loggers at INFO,
everyone else's at WARNING, one format, to stderr (a supervised job's stderr is its job.log).

A process that never configures logging (a Spark Python worker) still shows warnings and
errors: ``logging`` writes them to stderr by its last-resort handler."""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
PROGRESS_EVERY_S = 10.0  # a long command's progress: at most a line this often per phase
_NUMBERS = re.compile(r"\d[\d.,]*")
_MARK = "_recovery_lib_handler"


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes (a test runner or a CLI
    harness swaps it, and closes the one it swapped in)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):  # noqa: ANN201
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        return None


def _ours_or_a_warning(record: logging.LogRecord) -> bool:
    """Our loggers at their level; another library's (py4j says INFO on every connection it
    closes) only from WARNING up."""
    return record.name.startswith("recovery_lib") or record.levelno >= logging.WARNING


def configure_logging(level: int = logging.INFO) -> None:
    root = logging.getLogger()
    if not any(getattr(h, _MARK, False) for h in root.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.addFilter(_ours_or_a_warning)
        setattr(handler, _MARK, True)
        root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    logging.getLogger("recovery_lib").setLevel(level)


class ProgressThrottle:
    """Passes a progress line on when its phase changed (the line with its numbers blanked
    differs from the last one passed) or ``every_s`` passed since the last one; drops the rest.
    A task log then reads one line per phase and one per ``every_s``, not one per poll."""

    def __init__(
        self,
        emit: Callable[[str], object],
        every_s: float = PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emit, self.every_s, self.clock = emit, every_s, clock
        self._phase: str | None = None
        self._at = float("-inf")

    def __call__(self, line: str) -> None:
        phase = _NUMBERS.sub("#", line)
        now = self.clock()
        if phase != self._phase or now - self._at >= self.every_s:
            self._phase, self._at = phase, now
            self.emit(line)


class WarnOnChange:
    """A warning a loop may hit on every check (a metric that cannot be read while the
    broker is down): logged when it differs from the last one, at DEBUG while it repeats."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._last: str | None = None

    def __call__(self, message: str) -> None:
        level = logging.DEBUG if message == self._last else logging.WARNING
        self._last = message
        self.logger.log(level, "%s", message)

    def clear(self) -> None:
        """The condition is over: the next warning is logged again."""
        self._last = None
