"""`make demo`'s main part (`recovery demo`) end to end: a real broker, the event_counts job on
Spark, results checked against the valid-events topic (the recovery part is the prices
experiment, covered by tests/test_experiments_e2e.py and test_causal_e2e.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

EVENTS = 3_000
BAD_EVERY = 997  # recovery_lib.demo.produce_events: every 997th event is not JSON
JAVA_FRAME = re.compile(r"^\s+at [\w$.]+\(.*\)$", re.MULTILINE)  # "\tat org.apache...(X.scala:1)"


@pytest.mark.slow
@pytest.mark.broker
def test_demo_runs_the_main_job_and_its_totals_match_the_valid_events(
    kafka_bootstrap, recovery_home
):
    import duckdb

    from recovery_lib.io.sinks.dedup_reader import read_topic

    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP": kafka_bootstrap,
        "RECOVERY_HOME": str(recovery_home),
        # State-store maintenance every second instead of every 60 s: a maintenance task left
        # behind by the session's stop would tick (and print its stack trace) before exit.
        "PYSPARK_SUBMIT_ARGS": "--conf spark.sql.streaming.stateStore.maintenanceInterval=1s "
        "pyspark-shell",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "recovery_lib.cli.main",
            "demo",
            "--events",
            str(EVENTS),
            "--no-recovery",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "event_counts demo" in done.stdout
    output = done.stdout + done.stderr
    java_frames = JAVA_FRAME.findall(output)
    assert not java_frames, "a normal run printed a Java stack trace:\n" + output[-5000:]
    bad = EVENTS // BAD_EVERY
    valid = {r.id: json.loads(r.value) for r in read_topic("demo.valid")}
    assert len(valid) == EVENTS - bad
    dead = [r for r in read_topic("recovery.deadletter") if (r.id or "").startswith("event_counts")]
    assert len({r.id for r in dead}) == bad
    expected: dict[str, float] = defaultdict(float)
    for event in valid.values():
        expected[event["user"]] += event["amount"]
    (table,) = sorted(Path(recovery_home, "demo").glob("*/counts.duckdb"))
    con = duckdb.connect(str(table), read_only=True)
    rows = con.execute(
        "SELECT user, arg_max(amount, _batch_id) FROM user_totals GROUP BY user"
    ).fetchall()
    con.close()
    totals = dict(rows)
    assert totals.keys() == expected.keys()
    for user, amount in expected.items():
        assert totals[user] == pytest.approx(amount, abs=1e-6), user
