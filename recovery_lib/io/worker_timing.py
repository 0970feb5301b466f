"""When a Spark Python worker of ours was forked, imported the library and got its first call.

Spark's event log times a task from the JVM's side only: a task that waits for a fresh Python
worker (the daemon's fork, PySpark's worker module, the library's imports, the reader or
writer unpickled) looks like one long run. With ``RECOVERY_SPARK_EVENT_LOG_DIR`` set, the
source's reads and the sink's writes and commits append one JSON line per Python process, at
its first call, to ``python_workers.jsonl`` beside the event log; metrics/event_log.py joins
them to the tasks by task attempt id. Off, this costs one settings lookup per call.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import recovery_lib
from recovery_lib.settings import get_settings

WORKERS_FILE = "python_workers.jsonl"
# When this module was imported: the library's imports were done by then (source.py and the
# sink import it), in this process or, with the pre-importing daemon, in the daemon.
_LIBRARY_IMPORTED_AT = time.time()
_recorded: set[str] = set()


def _started_at(pid: int | str) -> float | None:
    """A process's start time (epoch seconds, 10 ms resolution) from /proc; None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: starttime, in clock ticks
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def record_first_call(role: str, task: dict[str, Any] | None = None) -> None:
    """Append this process's timing once per role, if the event log is on.

    Args:
        role: What the call is: ``read`` (a source task), ``write`` (a sink task) or
            ``commit`` (the sink's commit, in a planner process on the driver).
        task: ``io.task.task_info()`` of the call (its ``attempt_id`` is the event log's task
            id); None outside a task.
    """
    if role in _recorded:
        return
    where = get_settings().spark_event_log_dir
    if where is None:
        return
    _recorded.add(role)
    now = time.time()
    line = {
        "pid": os.getpid(),
        "role": role,
        "task_id": (task or {}).get("attempt_id"),
        "stage": (task or {}).get("stage"),
        "forked_at": _started_at(os.getpid()),
        "daemon_started_at": _started_at(os.getppid()),
        "library_import_started_at": recovery_lib.IMPORT_STARTED_AT,
        "library_imported_at": _LIBRARY_IMPORTED_AT,
        "first_call_at": now,
    }
    Path(where).mkdir(parents=True, exist_ok=True)
    # O_APPEND keeps concurrent small writes of several workers whole.
    with open(Path(where) / WORKERS_FILE, "a") as out:
        out.write(json.dumps(line) + "\n")
