"""A team's own job, outside this repository, judged end to end through the public job API.

The job lives in a temporary directory on PYTHONPATH. It reads its own recorded topic
(replayed into fresh topics by the experiment), draws random weights and asks a local HTTP
service (started by the job's own ``services``) for scores that change over time. Run by the
``recovery`` command as a user would:

* causal mode, a driver kill and a mid-write kill: exactly-once;
* native mode, a mid-write kill: not exactly-once, the divergent output ids named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from confluent_kafka import Producer

from recovery_lib.kafka.clients import client_config

pytestmark = [pytest.mark.slow, pytest.mark.broker]

USER_JOB = '''
"""Clicks enriched with a random sample weight and a live score (a team's own job)."""

import json
import threading
import time
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from pyspark.sql import functions as F

from recovery_lib import causal
from recovery_lib.job import JobSpec, output, read_json_input
from recovery_lib.verify.contract import ConsistencyContract, Fields

SCHEMA = "user string, item long, ts long"
ENRICHED = "user string, item long, ts long, ingest_ms long, weight double, score double"


class Scores(BaseHTTPRequestHandler):
    def do_GET(self):
        item = int(self.path.rsplit("=", 1)[1])
        body = json.dumps({"score": (item * 7 + time.time_ns() // 1000) % 1000 / 10}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def score_service():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scores)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield {"score_url": f"http://127.0.0.1:{server.server_address[1]}"}
    finally:
        server.shutdown()
        server.server_close()


def build(spark, opts):
    url = opts.param("score_url")

    def fetch(item):
        with urllib.request.urlopen(f"{url}/score?item={item}", timeout=10) as response:
            return float(json.loads(response.read())["score"])

    clicks = read_json_input(spark, opts, "clicks", SCHEMA, ["user", "item"]).select(
        "user", "item", "ts", "ingest_ms"
    )
    if opts.causal is None:

        def enrich(frames):
            rng = np.random.default_rng()
            for frame in frames:
                frame["weight"] = rng.random(len(frame))
                frame["score"] = [fetch(i) for i in frame["item"].tolist()]
                yield frame

        enriched = clicks.mapInPandas(enrich, ENRICHED)
    else:

        def enrich(ctx, frames):
            logged_fetch = ctx.service(fetch)
            for frame in frames:
                frame["weight"] = ctx.random.random(len(frame))
                frame["score"] = [logged_fetch(i) for i in frame["item"].tolist()]
                yield frame

        enriched = causal.map_in_pandas(clicks, enrich, ENRICHED, "enrich", opts.causal)
    fields = ["user", "item", "ts", "weight", "score"]
    return enriched.select(
        *output(F.col("user"), [F.col(f) for f in fields], F.col("ingest_ms")),
        *causal.carried(enriched),
    )


JOB = JobSpec(
    name="clickscore",
    build=build,
    inputs=("clicks",),
    # Weight and score are free; which click an output enriches is not.
    contract=ConsistencyContract(deterministic=False, agreement=Fields(("user", "item", "ts"))),
    params=("score_url",),
    services=score_service,
)
'''

CLICKS_PER_PARTITION = 6_000


@pytest.fixture(scope="module")
def user_job(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> dict[str, str]:
    """The job's package in a directory outside the repository, and its recorded input: a
    topic of clicks (a few malformed), as a team would have it."""
    root = tmp_path_factory.mktemp("team")
    (root / "teamjobs").mkdir()
    (root / "teamjobs" / "__init__.py").write_text("")
    (root / "teamjobs" / "clickscore.py").write_text(textwrap.dedent(USER_JOB))
    topic = f"team.clicks.{os.getpid()}"
    from recovery_lib.kafka.admin import TopicAdmin

    TopicAdmin().create(topic, 2)
    producer = Producer({**client_config(), "linger.ms": "20"})
    for i in range(2 * CLICKS_PER_PARTITION):
        value = (
            b"not json"
            if i % 997 == 0
            else json.dumps({"user": f"u{i % 50}", "item": i % 300, "ts": i}).encode()
        )
        producer.produce(topic, value, f"u{i % 50}".encode(), partition=i % 2)
        producer.poll(0)
    assert producer.flush(30) == 0
    return {"root": str(root), "topic": topic}


def run_experiment(
    user_job: dict[str, str], tmp_path: Path, rate: int, *args: str
) -> tuple[int, dict]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([user_job["root"], os.environ.get("PYTHONPATH", "")]),
    }
    report = tmp_path / "report.json"
    cmd = [
        str(Path(sys.executable).parent / "recovery"),
        "experiment",
        "run",
        "--job",
        "teamjobs.clickscore:JOB",
        "--replay",
        f"clicks={user_job['topic']}",
        "--rate",
        str(rate),
        "--report",
        str(report),
        *args,
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert report.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return done.returncode, json.loads(report.read_text())


# Long tier: the causal library's own kill e2e stays in the default tier.
@pytest.mark.long
def test_user_job_in_causal_mode_is_exactly_once_through_a_driver_kill_and_a_mid_write_kill(
    user_job, tmp_path
):
    code, report = run_experiment(
        user_job,
        tmp_path,
        200,  # 60 s of input: room for the second failure after the first restart
        "--mode",
        "causal",
        "--fail",
        "driver-kill,mid-write",
        "--repeat",
        "2",
        "--fail-at",
        "6",
        "--every",
        "8",
        "--inject-grace",
        "120",  # a slow restart must not leave the mid-write kill out
    )
    c = report["consistency"]
    assert report["job"] == "teamjobs.clickscore:JOB"
    assert [f["kind"] for f in report["failures"]] == ["driver-kill", "mid-write"]
    assert all(f["fired"] is True for f in report["failures"]), report["failures"]
    assert report["not_injected"] == []
    assert c["outputs"] > 10_000 and c["outputs"] == c["reference_outputs"], c
    assert c["guarantee"] == "exactly-once" and c["verdict"] == "consistent", c
    assert code == 0


@pytest.mark.long  # the contrast to the causal run above; make test keeps the mechanism's e2e
def test_user_job_native_after_a_mid_write_kill_is_not_exactly_once(user_job, tmp_path):
    half = {user_job["topic"]: {"0": CLICKS_PER_PARTITION // 2, "1": CLICKS_PER_PARTITION // 2}}
    code, report = run_experiment(
        user_job,
        tmp_path,
        400,
        "--mode",
        "native",
        "--fail",
        "mid-write",
        "--fail-at",
        "4",
        "--replay-to",
        json.dumps(half),
    )
    c = report["consistency"]
    assert report["failures"][0]["fired"] is True, report["failures"]
    assert c["divergent"] > 0 and c["examples"]["divergent_ids"], c
    assert c["guarantee"] == "none" and c["verdict"] == "inconsistent", c
    assert code == 2
