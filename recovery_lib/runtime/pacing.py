"""Sending at a rate: every input generator of the toolkit (NexMark, keyed and replayed input,
the reachability graph, the latency probe) spaces its records the same way.

``Pacer(rate).wait(sent)`` sleeps until record number ``sent`` is due, counted from the pacer's
start, so a late sender catches up at full speed instead of drifting behind the rate (a sleep
per record after each send would add every send's own time to the spacing).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Pacer:
    """Records at ``rate`` per second from when the pacer was made (None: as fast as possible).

    Args:
        rate: records per second; None or 0 never waits.
        clock: seconds, monotonic (injected by tests).
        sleep: how to wait (injected by tests).
    """

    def __init__(
        self,
        rate: float | None,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate or None
        self._clock = clock
        self._sleep = sleep
        self.started = clock()

    def ahead_s(self, sent: int) -> float:
        """How long until record number ``sent`` is due (negative: the sender is behind)."""
        if self.rate is None:
            return 0.0
        return self.started + sent / self.rate - self._clock()

    def wait(self, sent: int) -> None:
        """Sleep until record number ``sent`` is due; return at once when it is due already."""
        ahead = self.ahead_s(sent)
        if ahead > 0:
            self._sleep(ahead)

    def elapsed_s(self) -> float:
        return self._clock() - self.started
