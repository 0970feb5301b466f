"""What a spare job process (runtime/spare.py) does while it waits for its go.

It keeps its Python workers up and its sink's write path warm (``warm_workers``, as a standby
does), and every ``RECOVERY_SUPERVISOR_SPARE_REHEARSE_EVERY_S`` it rehearses the job's own
query: a consistent copy of the job's live checkpoint (the standby's ``Shipper``, from the
shared directory), one batch on it with the sink held (the standby's ``rehearse``). Measured
(docs/restart.md): without it, the spare's first batch after its go spent seconds in what a
fresh query pays once per process: the plan's code generation, the Python daemons of the
source's read planner and read tasks starting, their workers' imports. The rehearsal runs in
a thread of its own, so the go is seen at once; ``stop`` ends a rehearsal still running
before the job's query starts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["SpareWarmth"]


class SpareWarmth:
    """The warm-up a spare runs while it waits (``wait_for_go``'s ``warm``).

    Args:
        warm: The workers' and the sink's warm-up (``rehearsal.warm_workers`` bound to the job).
        rehearse: One rehearsal (ship a copy of the checkpoint, run one held batch on it);
            returns what ``rehearsal.rehearse`` says. None: no rehearsals.
        stop_rehearsal: Stops a rehearsal's query still running (at the go).
        every_s: Rehearse at most this often.
        clock: Monotonic seconds (tests).
    """

    def __init__(
        self,
        warm: Callable[[], None],
        rehearse: Callable[[], dict[str, Any]] | None,
        stop_rehearsal: Callable[[], None],
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._warm = warm
        self._rehearse = rehearse
        self._stop_rehearsal = stop_rehearsal
        self.every_s = every_s
        self._clock = clock
        self._last: float | None = None
        self._thread: threading.Thread | None = None
        self.rehearsals: list[dict[str, Any]] = []

    def __call__(self) -> None:
        self._warm()
        if self._rehearse is None or self.every_s <= 0 or self.rehearsing():
            return
        now = self._clock()
        if self._last is not None and now - self._last < self.every_s:
            return
        self._last = now
        self._thread = threading.Thread(target=self._run, name="spare-rehearsal", daemon=True)
        self._thread.start()

    def rehearsing(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        assert self._rehearse is not None
        try:
            result = self._rehearse()
        except Exception as exc:  # noqa: BLE001 - warmth is best effort; the go must not wait
            result = {"failed": str(exc)[:300]}
            log.warning("spare: rehearsal failed: %s", exc)
        self.rehearsals.append(result)
        log.info("spare: rehearsal %s", result)

    def stop(self, timeout_s: float = 30.0) -> None:
        """End a rehearsal still running (the job's query starts next)."""
        if not self.rehearsing():
            return
        self._stop_rehearsal()
        assert self._thread is not None
        self._thread.join(timeout_s)


def spare_rehearsal(
    spark: Any, build: Callable[[Any, Any], Any], opts: Any, scratch: Path, output: Any
) -> Callable[[], dict[str, Any]]:
    """One rehearsal of the job's query on a copy of its live checkpoint (job/runner.py)."""
    from recovery_lib.ha.standby.rehearsal import rehearse
    from recovery_lib.ha.standby.shipping import Shipper

    shipped = scratch / "shipped"  # the copies, as a standby keeps them
    shipper = Shipper(opts.checkpoint_path, shipped, keep=1)

    def once() -> dict[str, Any]:
        shipper.ship()  # None when nothing new was committed: the last copy is rehearsed
        return rehearse(spark, build, opts, shipped, output)

    return once


def stop_rehearsals(spark: Any) -> None:
    """Stop the session's rehearsal queries (their names carry the rehearsal prefix)."""
    from recovery_lib.ha.standby.rehearsal import REHEARSAL_QUERY_PREFIX

    for query in spark.streams.active:
        if (query.name or "").startswith(REHEARSAL_QUERY_PREFIX):
            query.stop()
