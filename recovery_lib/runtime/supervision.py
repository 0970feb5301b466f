"""What every supervisor of a recovery mode offers (``Supervisor`` for native and causal
recovery, ``StandbyPair`` for standby jobs, and the modes to come): the experiment runner and
the job daemon drive a job through this interface only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from recovery_lib.runtime.supervisor import Restart


@runtime_checkable
class JobSupervisor(Protocol):
    """Called from one thread (the runner's or the daemon's loop).

    ``start`` launches the job's process(es) and returns at once; ``wait_ready`` blocks until
    the job's query is active (raises ``RuntimeError`` naming the log when it dies or times
    out). ``tick`` is called about every 0.5 s: it detects failures and restarts or fails over
    (raises ``RuntimeError`` when the restart budget is spent). ``restarts`` lists every
    recovery with its detection and ready times (ms); ``takeovers`` the fail-overs to another
    process (empty where the mode has none). ``stop`` ends every process it started, by PID,
    and must be safe to call twice."""

    restarts: list[Restart]
    takeovers: list[dict[str, Any]]

    def start(self) -> None: ...

    def wait_ready(self, timeout_s: float = 180.0) -> None: ...

    def tick(self) -> None: ...

    def is_ready(self) -> bool: ...

    def ready_for_next_failure(self) -> bool: ...

    def kill_group(self, sig: int = ...) -> None: ...

    def pause(self, seconds: float) -> None: ...

    def stop(self, timeout_s: float = 30.0) -> Any: ...

    def fault_dir(self, base: Path) -> Path:
        """Where to arm a fault hook (runtime/faults.py) so that it fires in the process a
        failure is meant to hit: ``base`` (the job's arm directory) for one process; a
        replica set's victim replica's own directory below it."""
        ...

    @property
    def live_checkpoints(self) -> Path:
        """The checkpoint root the job uses now (after a takeover, the new primary's)."""
        ...
