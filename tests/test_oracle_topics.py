"""The oracle on real topics: the batch reader sees what the record reader sees (fences, control
records, outputs without ids), judge_topics gives judge's verdicts, and `recovery contract
check` reports a job's mutation score from a topic."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from typer.testing import CliRunner

from recovery_lib.cli.main import app
from recovery_lib.io.sinks import dedup_reader
from recovery_lib.io.sinks.dedup_reader import read_topic, read_topic_batches
from recovery_lib.io.sinks.fences import FENCE_HEADER
from recovery_lib.io.sinks.ids import CONTROL_HEADER, EPOCH_HEADER, ID_HEADER
from recovery_lib.kafka import block_consumer
from recovery_lib.kafka.clients import client_config
from recovery_lib.settings import environment
from recovery_lib.verify.contract import ConsistencyContract
from recovery_lib.verify.oracle import Verdict, judge, judge_topics
from tests.unit.test_contract_strength import load

pytestmark = pytest.mark.broker


def produce(topic: str, records: list[tuple[int, bytes | None, bytes, list]]) -> None:
    producer = Producer(client_config())
    for partition, key, value, headers in records:
        producer.produce(topic, value=value, key=key, partition=partition, headers=headers)
    assert producer.flush(30) == 0
    del producer  # destroyed now: no client left to retry a stopped broker


def output(i: int, epoch: int = 0) -> tuple[bytes, bytes, list]:
    value = json.dumps({"k": i, "v": i * 3}).encode()
    return (
        str(i % 5).encode(),
        value,
        [(ID_HEADER, f"0-0-{i}".encode()), (EPOCH_HEADER, str(epoch).encode())],
    )


def test_the_block_consumer_is_built():
    """The install compiles it (a C compiler and Python's headers are on every machine the
    project installs on); without it the oracle reads 10^7 outputs 1.5x slower."""
    assert block_consumer.available(), "reinstall (make install) with gcc on the PATH"


@pytest.mark.parametrize("blocks", [True, False], ids=["block-consumer", "messages"])
def test_the_batch_reader_sees_what_the_record_reader_sees(admin, topic_name, blocks, monkeypatch):
    admin.create(topic_name, 2)
    records = [(i % 2, *output(i)) for i in range(40)]
    records += [(0, None, b"footprint", [(ID_HEADER, b"fp-1"), (CONTROL_HEADER, b"cec")])]
    records += [(1, b"x", b"no headers", None)]
    records += [(0, None, b"", [(FENCE_HEADER, b"1")])]  # a takeover in partition 0
    records += [(0, *output(100, epoch=0))]  # a zombie of epoch 0 after the fence: dropped
    records += [(0, *output(101, epoch=1))]
    records += [(0, *output(102 + i, epoch=i % 2)) for i in range(10)]  # 5 zombies among them
    records += [(1, *output(200, epoch=0))]  # partition 1 has no fence: kept
    produce(topic_name, records)
    fence = dedup_reader.FenceFilter()
    expected = [(r.id, r.key, r.value) for r in read_topic(topic_name, fence=fence)]
    # Small blocks: the records after the fence come in blocks without it (fenced by column).
    monkeypatch.setattr(dedup_reader, "_BLOCK_RECORDS", 4)
    got, batch_fence = [], dedup_reader.FenceFilter()
    with environment({"RECOVERY_KAFKA_BLOCK_READER": str(blocks).lower()}):
        for batch in read_topic_batches(topic_name, rows=7, fence=batch_fence):
            for row in batch.to_pylist():
                rid = row["id"].decode() if row["id"] is not None else None
                got.append((rid, row["key"], row["value"]))
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert len(expected) == 48  # 40 outputs, the one without headers, 7 of epoch 1 or unfenced
    assert batch_fence.dropped == fence.dropped == 6


def test_judge_topics_agrees_with_judge(admin, topic_name):
    reference, run = f"{topic_name}.ref", f"{topic_name}.run"
    for t in (reference, run):
        admin.create(t, 3)
    produce(reference, [(i % 3, *output(i)) for i in range(300)])
    damaged = [(i % 3, *output(i)) for i in range(300) if i != 17]  # one output lost
    damaged.append((1, *output(40)))  # a replayed write: same id, same value
    produce(run, damaged)
    contract = ConsistencyContract()
    for dedup in (True, False):
        streamed = judge_topics("x", contract, run, reference, dedup).to_dict()
        in_memory = judge(
            "x", contract, list(read_topic(run)), list(read_topic(reference)), dedup
        ).to_dict()
        assert streamed["verdict"] == Verdict.INCONSISTENT
        for field in ("guarantee", "lost", "duplicated", "copies", "outputs", "extra"):
            assert streamed[field] == in_memory[field], field
        assert streamed["lost"] == 1


def test_contract_check_scores_a_jobs_contract_from_its_topics(admin, topic_name, tmp_path):
    spec, reference, inputs = load("lastbids")
    out, bids = f"{topic_name}.out", f"{topic_name}.bids"
    admin.create(out, 2)
    admin.create(bids, 2)
    produce(
        out,
        [
            (r.partition, r.key, r.value, [(ID_HEADER, r.id.encode()), (EPOCH_HEADER, b"0")])
            for r in reference
        ],
    )
    produce(bids, [(r.partition, r.key, r.value, None) for r in inputs.records("bids")])
    report = tmp_path / "contract.json"
    result = CliRunner().invoke(
        app,
        [
            "contract",
            "check",
            "--job",
            "lastbids",
            "--reference-topic",
            out,
            "--input",
            f"bids={bids}",
            "--report",
            str(report),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert data["score"] == 1.0 and data["false_rejections"] == 0 and data["with_input"]
    assert "list-edits" in [op["operator"] for op in data["operators"] if op["applies"]]


def test_the_evidence_of_a_verdict_keeps_every_record_fenced_ones_too(admin, topic_name, tmp_path):
    """An inconsistent verdict's topics saved raw (verify/evidence.py): what the oracle dropped
    (a fence, a zombie's record after it, a control record) is there, with its headers."""
    import pyarrow.parquet as pq

    from recovery_lib.verify.evidence import save_topics

    admin.create(topic_name, 2)
    records = [(i % 2, *output(i)) for i in range(30)]
    records += [(0, None, b"", [(FENCE_HEADER, b"1")])]
    records += [(0, *output(100, epoch=0))]  # a zombie: the oracle drops it, the evidence not
    records += [(1, None, b"footprint", [(ID_HEADER, b"fp-1"), (CONTROL_HEADER, b"cec")])]
    produce(topic_name, records)

    saved = save_topics({"faulty": topic_name}, tmp_path / "evidence", client_config())

    table = pq.read_table(tmp_path / "evidence" / "faulty.parquet").to_pylist()
    assert saved == {"faulty": len(records)} and len(table) == len(records)
    by_position = {(r["partition"], r["offset"]): r for r in table}
    assert len(by_position) == len(records)  # each record once, at its own position
    zombie = [r for r in table if r["value"] == output(100)[1]]
    assert dict(zombie[0]["headers"])[EPOCH_HEADER] == b"0"
    assert any(FENCE_HEADER in dict(r["headers"]) for r in table)
    assert sorted(r["value"] for r in table if r["value"] != b"") == sorted(
        v for _, _, v, _ in records if v != b""
    )
