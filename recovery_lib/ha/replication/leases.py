"""A replica's lease: its driver's heartbeat file, and who holds a claim (an incarnation).

Used by KaZoo's leadership (kazoo.py) and by the writers of shared determinant streams
(shared_determinants.py). The files live where both replicas read them (one host here; shared
storage across hosts).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from recovery_lib.processes import pid_alive
from recovery_lib.runtime.faults import DRIVER_PGID_ENV
from recovery_lib.runtime.heartbeat import read_heartbeat


def lease_path(lease_dir: str | Path, replica: str) -> Path:
    """Where replica ``replica``'s driver writes its heartbeat (its lease): the heartbeat its
    supervisor watches (runtime/supervisor.py)."""
    return Path(lease_dir) / replica / "heartbeat.json"


def incarnation(replica: str) -> str:
    """This process's identity as a claimant: the replica and its driver's process group,
    the group its heartbeats carry. The driver marks it in the environment before Spark
    starts (``RECOVERY_DRIVER_PGID``), so the JVM's source runner and the Python workers,
    which PySpark's daemon puts in a process group of their own, name the same incarnation;
    a replacement is a new driver, so a new one."""
    return f"{replica}/{os.environ.get(DRIVER_PGID_ENV) or os.getpgid(0)}"


def lease_expired(
    lease_dir: str | Path, holder: str, me: str, timeout_s: float, since_ms: int = 0
) -> bool:
    """Whether ``holder`` (an incarnation) has lost its lease, seen from incarnation ``me``: a
    former incarnation of my own replica has (it was killed and replaced); another replica's
    has when its heartbeat, or ``since_ms`` (when it took the claim) if later, is older than
    ``timeout_s``, or at once when its heartbeat names this host and a driver process that is
    gone (a killed driver's lease need not run out; a frozen one's still must). Only the
    holder's own heartbeats count: the replacement of a dead holder writes the same file, and
    its beats must not keep the dead one's lease alive."""
    replica, _, group = holder.partition("/")
    if replica == me.partition("/")[0]:
        return holder != me
    beat = read_heartbeat(lease_path(lease_dir, replica))
    if beat is not None and str(beat.pgid) != group:
        beat = None  # a later incarnation's heartbeat: it says nothing of the holder
    if beat is not None and beat.host == socket.gethostname() and not pid_alive(beat.pid):
        return True
    last_ms = max(beat.ts_ms if beat is not None else 0, since_ms)
    return time.time() * 1000 - last_ms > timeout_s * 1000
