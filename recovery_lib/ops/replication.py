"""The operations view of a replicated job: its newest ``ReplicationState`` as the replica set
in its daemon reported it to the metrics store (events ``replication_state``)."""

from __future__ import annotations

import json

from recovery_lib.ha.replication.replica_set import ReplicationState
from recovery_lib.metrics import views
from recovery_lib.ops.config import get_job
from recovery_lib.ops.daemon import read_status
from recovery_lib.settings import Settings


def newest_state(job_name: str, settings: Settings | None = None) -> ReplicationState | None:
    """The newest state of the job's current daemon run (None: none reported yet);
    ``settings``: the caller's (default: the process's)."""
    job = get_job(job_name, settings=settings)
    status = read_status(job)
    if status is None or status.run_id is None:
        return None
    path = job.settings.home / "metrics.duckdb"
    if not path.exists():
        return None
    states = views.replication_states(path)
    mine = states[states["run_id"] == status.run_id]
    if mine.empty:
        return None
    return ReplicationState.from_dict(json.loads(mine.iloc[0]["detail"]))
