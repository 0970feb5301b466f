"""A native restart into a spare process (runtime/spare.py), with a real SIGKILL, judged by the
oracle; and the restart's first micro-batch taken apart from Spark's event log
(metrics/event_log.py)."""

from __future__ import annotations

import json

import psutil
import pytest

from recovery_lib.experiment.runner import Experiment, ExperimentConfig
from recovery_lib.io.worker_timing import WORKERS_FILE
from recovery_lib.metrics.event_log import first_batch
from recovery_lib.metrics.store import read_frame
from recovery_lib.settings import environment, get_settings

pytestmark = [pytest.mark.slow, pytest.mark.broker, pytest.mark.long]


def _worker_records(event_log) -> list[dict]:  # noqa: ANN001
    lines = (event_log / WORKERS_FILE).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_a_killed_job_restarts_in_its_spare_exactly_once(kafka_bootstrap, tmp_path):
    event_log = tmp_path / "eventlog"
    settings = {
        "RECOVERY_SUPERVISOR_SPARE": "true",
        "RECOVERY_SPARK_EVENT_LOG_DIR": str(event_log),
    }
    with environment(settings):
        cfg = ExperimentConfig(
            query="q3", rate=1000.0, duration_s=40.0, fail_at_s=25.0, fail="driver-kill"
        )
        report = Experiment(cfg).run()
    c = report["consistency"]
    assert report["failures"][0]["fired"] is True
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c

    events = read_frame(
        get_settings().home / "metrics.duckdb",
        "SELECT kind, detail FROM events WHERE run_id = ? ORDER BY ts_ms",
        [report["faulty_run_id"]],
    )
    kinds = events["kind"].tolist()
    assert "spare_started" in kinds
    restarts = [d for k, d in zip(kinds, events["detail"], strict=True) if k == "restart"]
    assert len(restarts) == 1 and '"spare": true' in restarts[0]
    spares = [
        int(json.loads(d)["pid"])
        for k, d in zip(kinds, events["detail"], strict=True)
        if k == "spare_started"
    ]
    assert not [p for p in spares if psutil.pid_exists(p)], "a spare outlived its run"

    fb = first_batch(event_log, report["failures"][0]["fired_ms"])
    names = {s.name for s in fb.spans}
    assert {"addBatch", "queryPlanning", "addBatch: jobs"} <= names
    # The restart skipped the process start: the application started before the kill.
    assert fb.app_start_ms < report["failures"][0]["fired_ms"] < fb.query_started_ms
    reads = [t for t in fb.tasks if "source read" in t.stage_name]
    assert reads
    # Its read tasks started Python workers (their phases joined from python_workers.jsonl),
    # or found workers the spare's rehearsal had warmed: a read worker forked by the spare's
    # own daemon and first called before the kill (job/spare_warmth.py).
    fired_ms = report["failures"][0]["fired_ms"]
    warmed = [
        w
        for w in _worker_records(event_log)
        if w.get("role") == "read"
        and (w.get("daemon_started_at") or 0) * 1000 >= fb.app_start_ms
        and (w.get("first_call_at") or 0) * 1000 < fired_ms
    ]
    assert any(t.python for t in reads) or warmed, [t.python for t in reads]
