"""State shipping for configured jobs (``recovery standby ship``, the ``state_shipping`` DAG).

The standby's own shipper thread copies continuously; this is the on-demand round an operator
or the schedule triggers (after a GC pass, before maintenance, to bound the lag), recorded in
the metrics store (``standby_shipments``) with the lag it leaves.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from recovery_lib.errors import RecoveryError
from recovery_lib.ha.standby.shipping import Shipper, latest_complete
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.ops.config import StreamJob, get_job
from recovery_lib.settings import Settings


class NoStandby(RecoveryError, RuntimeError):
    pass


def shipper_for(name: str, settings: Settings | None = None) -> Shipper:
    """The shipper of a configured job's standby; ``settings``: the caller's (default: the
    process's)."""
    return _shipper(get_job(name, settings=settings))


def _shipper(job: StreamJob) -> Shipper:
    name = job.name
    if job.standby_dir is None:
        raise NoStandby(
            f"job {name} has no standby: set `mode: standby` for it in the jobs file "
            "(dags/streaming_jobs.yaml or RECOVERY_JOBS_FILE) and restart it"
        )
    if not job.standby_dir.parent.exists():
        raise NoStandby(
            f"job {name} has no standby running yet ({job.standby_dir.parent} is missing): "
            f"start the job (`recovery job start {name}`) and wait until its standby is warm"
        )
    return Shipper(job.checkpoint, job.standby_dir, job.settings.standby_keep_copies)


def ship_job(
    name: str, store: MetricsStore | None = None, settings: Settings | None = None
) -> dict[str, Any]:
    """One shipping round for a configured job; returns what was shipped and the lag."""
    job = get_job(name, settings=settings)
    shipper = _shipper(job)
    shipped = shipper.ship()
    lag = shipper.lag()
    newest = latest_complete(shipper.dir, verify=False)
    result = {
        "job": name,
        "shipped": asdict(shipped) if shipped is not None else None,
        "copy_seq": newest.seq if newest else None,
        "copy_batch": newest.batch if newest else None,
        "lag": asdict(lag),
    }
    own = store is None
    store = store or MetricsStore(job.settings.home / "metrics.duckdb")
    try:
        store.add(
            "standby_shipments",
            [
                (
                    name,
                    now_ms(),
                    result["copy_seq"],
                    result["copy_batch"],
                    shipped.bytes_total if shipped else (newest.bytes if newest else 0),
                    shipped.bytes_copied if shipped else 0,
                    lag.batches,
                    lag.bytes,
                    json.dumps(result, default=str),
                )
            ],
        )
        store.flush()
    finally:
        if own:
            store.close()
    return result
