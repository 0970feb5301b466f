"""A spare job process: started and built ahead of a failure, it starts the query when told.

A native restart starts a process, imports the library, starts a JVM and a session and builds
the job before Spark recovers the query from its checkpoint (about 7 s of a 15 s output gap
at 10^4 keys, docs/standby.md). With a spare (setting ``RECOVERY_SUPERVISOR_SPARE``) the
supervisor keeps a second process of the job that did all that and waits; when the job dies
the supervisor creates the spare's go file and the spare starts the query on the same
checkpoint: Spark's own recovery, without the start-up. It costs a second idle driver (a JVM
heap, ``RECOVERY_SPARK_DRIVER_MEMORY``) for as long as the job runs.

A spare writes no heartbeat and starts no query before its go, so it never competes with the
job for the checkpoint; a supervisor that dies leaves no spare behind (it exits when its
parent is gone).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

# Set in a spare's environment: the file whose creation tells it to start its query.
SPARE_GO_ENV = "RECOVERY_SPARE_GO_FILE"
POLL_S = 0.02  # the go file's poll: a handover waits at most this long for the spare
# A new spare starts once the job has finished this many micro-batches since its (re)start:
# the first batch after a restart is the slow one, and a spare's JVM start beside it on 2 cores
# made its Spark jobs 1.7x longer (measured: 6.6 s against 3.9 s, docs/restart.md).
START_AFTER_BATCHES = 2


def wait_for_go(
    go_file: Path,
    poll_s: float = POLL_S,
    warm: Callable[[], None] | None = None,
    warm_every_s: float = 20.0,
) -> bool:
    """Block until ``go_file`` exists, keeping the process warm meanwhile.

    Args:
        go_file: The file the supervisor creates at the handover.
        poll_s: How often to look.
        warm: Run at once and then every ``warm_every_s`` while waiting (Spark stops Python
            workers idle for 60 s); its failures are logged, not raised.
        warm_every_s: The warm-up's period.

    Returns:
        True at the go; False if the supervisor (this process's parent) is gone first.
    """
    parent = os.getppid()
    next_warm = time.monotonic()
    while not go_file.exists():
        if os.getppid() != parent:
            return False
        if warm is not None and time.monotonic() >= next_warm:
            try:
                warm()
            except Exception as exc:  # noqa: BLE001 - warmth is best effort
                log.warning("spare: warm-up failed: %s", exc)
            next_warm = time.monotonic() + warm_every_s
            continue  # look for the go before sleeping
        time.sleep(poll_s)
    return True
