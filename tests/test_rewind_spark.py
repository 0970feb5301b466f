"""Checkpoint rewind on a real stateful query: rewound to batch b, the query re-runs b+1..N
with their first boundaries (--follow-log) from the state after b, and writes the very same
outputs again under the same ids (so a dedup reader sees the first run's output once)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.kafka.clients import client_config
from recovery_lib.runtime.checkpoint import last_committed
from recovery_lib.runtime.rewind import rewind
from tests.helpers import JobProcess

pytestmark = [pytest.mark.slow, pytest.mark.broker, pytest.mark.long]

PARTITIONS = 2


def produce_bids(topic: str, count: int) -> None:
    producer = Producer({**client_config(), "linger.ms": "5", "enable.idempotence": "true"})
    rng = random.Random(3)
    for i in range(count):
        auction = rng.randrange(500)
        value = {"auction": auction, "bidder": 1, "price": rng.randrange(1, 99), "dateTime": i}
        producer.produce(topic, json.dumps(value).encode(), str(auction).encode(), auction % 2)
    assert producer.flush(30) == 0


def run_job(tmp_path: Path, topic: str, out: str, tag: str, *extra: str) -> None:
    job = JobProcess(
        [
            "recovery_lib.job",
            "--job",
            "jobs.avgprice:JOB",
            "--input",
            f"bids={topic}",
            "--output-topic",
            out,
            "--partitions",
            str(PARTITIONS),
            "--checkpoints",
            str(tmp_path / "ck"),
            "--param",
            "window=3",
            "--available-now",
            "--max-records",
            "1000",
            *extra,
        ],
        tmp_path / f"{tag}.log",
    )
    try:
        assert job.wait(240) == 0, job.tail()
    finally:
        job.stop()


def test_a_rewound_query_rewrites_the_same_outputs_under_the_same_ids(admin, tmp_path, topic_name):
    admin.create(topic_name, PARTITIONS)
    out = f"{topic_name}.out"
    admin.create(out, PARTITIONS)
    produce_bids(topic_name, 8_000)
    run_job(tmp_path, topic_name, out, "first")  # mode native: Spark's state store
    ck = tmp_path / "ck" / "avgprice"
    last = last_committed(ck)
    assert last is not None and last >= 6
    first = list(read_topic(out))
    assert first and all(r.id for r in first)

    b = last - 4
    plan = rewind(ck, b)
    assert last_committed(ck) == b and plan.stores >= 1
    moved = Path(plan.moved_to)
    # The batches' entries (Hadoop's .crc companions beside them are binary).
    first_offsets = {
        p.name: p.read_text() for p in (moved / "offsets").iterdir() if p.name.isdigit()
    }

    run_job(tmp_path, topic_name, out, "again", "--follow-log", str(moved / "offsets"))
    assert last_committed(ck) == last
    for name, text in first_offsets.items():  # the same boundaries as the first time
        if name.isdigit() and int(name) <= last:
            assert (ck / "offsets" / name).read_text().splitlines()[2:] == text.splitlines()[2:]
    seen = {(r.partition, r.offset) for r in first}
    again = [r for r in read_topic(out) if (r.partition, r.offset) not in seen]
    rewritten = Counter((r.id, r.value) for r in again)
    firsts = Counter((r.id, r.value) for r in first)
    assert rewritten, "the rewound batches wrote nothing again"
    assert all(firsts[item] == 1 for item in rewritten)  # same id, same value
    batches = {int(r.id.split("-")[0]) for r in again}
    assert min(batches) == b + 1 and max(batches) <= last
