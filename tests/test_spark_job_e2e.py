"""A team's unchanged Spark jobs (tests/spark_team_jobs.py: format("kafka") in and out, and a
foreachBatch writer), declared with ``spark_query_job`` outside the repository's packages and
run by the experiment under native recovery and a warm standby, each with a real driver kill.

Spark's Kafka sink is at-least-once: a batch written and not committed before the kill is
written again. The oracle (against the failure-free reference run, the output as a multiset of
records) must find nothing lost, extra or divergent, and names the duplicates if any.
"""

from __future__ import annotations

import os
import sys

import pytest

from recovery_lib.experiment.runner import Experiment, ExperimentConfig
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.verify.expectations import validate_output
from tests.spark_team_jobs import write_team_jobs

pytestmark = [pytest.mark.slow, pytest.mark.broker, pytest.mark.long]


@pytest.fixture(scope="module")
def team_path(tmp_path_factory):
    root = str(write_team_jobs(tmp_path_factory.mktemp("team")))
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([root, saved or ""])  # the job processes'
    sys.path.insert(0, root)
    try:
        yield root
    finally:
        sys.path.remove(root)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.mark.parametrize(
    ("job", "mode"),
    [
        ("teamjobs.recovery:BIDS_EUR", "native"),
        ("teamjobs.recovery:BIDS_EUR", "standby"),
        ("teamjobs.recovery:BIDS_UPPER", "native"),
        ("teamjobs.recovery:BIDS_UPPER", "standby"),
    ],
)
def test_an_unchanged_spark_job_recovers_from_a_driver_kill(kafka_bootstrap, team_path, job, mode):
    cfg = ExperimentConfig(
        query=job, mode=mode, fail="driver-kill", rate=500.0, duration_s=30.0, fail_at_s=12.0
    )
    cfg.validate()
    report = Experiment(cfg).run()
    c = report["consistency"]
    print(f"{job} {mode}: {c['guarantee']}, {c['outputs']} outputs, {c['duplicated']} duplicated")
    assert report["job"] == job
    assert [f["fired"] for f in report["failures"]] == [True], report["failures"]
    if mode == "standby":
        assert report["takeovers"], report.get("restarts")
    assert c["reference_outputs"] > 1000, c
    assert c["lost"] == 0 and c["extra"] == 0 and c["divergent"] == 0, c
    assert c["guarantee"] in ("exactly-once", "at-least-once"), c
    assert (c["guarantee"] == "at-least-once") == (c["duplicated"] > 0), c
    # GX: the generic suite of id-less output, on what the faulty run wrote.
    written = list(read_topic(report["out_topics"]["faulty"]))
    gx = validate_output(cfg.job.name, written, False, "faulty", lineage_ids=False)
    assert gx.success, gx.failures
