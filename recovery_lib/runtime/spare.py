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

import os
import time
from pathlib import Path

# Set in a spare's environment: the file whose creation tells it to start its query.
SPARE_GO_ENV = "RECOVERY_SPARE_GO_FILE"
POLL_S = 0.02  # the go file's poll: a handover waits at most this long for the spare


def wait_for_go(go_file: Path, poll_s: float = POLL_S) -> bool:
    """Block until ``go_file`` exists.

    Args:
        go_file: The file the supervisor creates at the handover.
        poll_s: How often to look.

    Returns:
        True at the go; False if the supervisor (this process's parent) is gone first.
    """
    parent = os.getppid()
    while not go_file.exists():
        if os.getppid() != parent:
            return False
        time.sleep(poll_s)
    return True
