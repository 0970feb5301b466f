"""The Kafka source on real Spark and the embedded broker."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from recovery_lib.io.source import SOURCE_NAME
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.tail_probe import TailProbe
from tests.helpers import produce, uncommit, wait_for

pytestmark = pytest.mark.spark


def run_available_now(spark, tmp_path, name, on_batch=None, **options):
    """The rows an available-now query reads (and each batch's to ``on_batch(id, rows)``)."""
    df = spark.readStream.format(SOURCE_NAME).options(**options).load()
    rows = []

    def collect(batch, batch_id):
        got = batch.collect()
        rows.extend(got)
        if on_batch is not None:
            on_batch(batch_id, got)

    query = (
        df.writeStream.foreachBatch(collect)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / f"ck-{name}"))
        .start()
    )
    try:
        assert query.awaitTermination(240), "the available-now query did not finish in 240 s"
    finally:
        query.stop()  # a query left running would load every later test
    assert query.exception() is None, query.exception()
    return rows, query.recentProgress


@pytest.mark.parametrize("read_path", ["executors", "driver"])
def test_source_reads_every_record_across_topics_and_partitions(spark, admin, tmp_path, read_path):
    a, b = f"src-a-{read_path}", f"src-b-{read_path}"
    admin.create(a, 3)
    admin.create(b, 2)
    sent = set(produce(a, 3000, 3, prefix="a", headers=True)) | set(produce(b, 1000, 2, prefix="b"))
    rows, progress = run_available_now(
        spark,
        tmp_path,
        "all",
        subscribe=f"{a},{b}",
        maxOffsetsPerTrigger="700",
        readPath=read_path,
    )
    values = [r.value for r in rows]
    assert len(values) == len(sent) and set(values) == sent
    assert all(p["numInputRows"] <= 700 for p in progress)
    assert len([p for p in progress if p["numInputRows"]]) >= 4000 // 700
    first = next(r for r in rows if r.value == b"a0")
    assert (first.topic, first.partition, first.offset) == (a, 0, 0)
    assert (
        first.key == b"k0" and first.headers[0]["key"] == "h" and first.headers[0]["value"] == b"0"
    )
    assert abs(first.timestamp.timestamp() - time.time()) < 600
    # offsets within a partition are contiguous
    by_part = {}
    for r in rows:
        by_part.setdefault((r.topic, r.partition), []).append(r.offset)
    for offsets in by_part.values():
        assert sorted(offsets) == list(range(len(offsets)))


def test_a_driver_read_batch_is_replayed_by_a_task_after_a_restart(spark, admin, tmp_path):
    """readPath=driver: a batch planned and read in the source's driver process but not
    committed (the query died) is read again after the restart, by a task this time (the
    driver's cache died with the query): the replay has the first attempt's rows."""
    admin.create("src-drv", 2)
    produce("src-drv", 500, 2, prefix="d")
    options = {"subscribe": "src-drv", "readPath": "driver", "maxOffsetsPerTrigger": "200"}

    def batches() -> dict[int, set]:
        seen: dict[int, set] = {}
        run_available_now(
            spark,
            tmp_path,
            "driver",
            on_batch=lambda i, rows: seen.setdefault(i, set()).update(
                (r.partition, r.offset, r.value) for r in rows
            ),
            **options,
        )
        return seen

    first = batches()
    assert sum(len(rows) for rows in first.values()) == 500 and len(first) >= 3
    last = max(first)
    uncommit(tmp_path / "ck-driver", last)  # the query "died" before committing it
    replayed = batches()
    assert set(replayed) == {last}
    assert replayed[last] == first[last]


def test_starting_offsets_latest_and_explicit_json(spark, admin, tmp_path):
    admin.create("src-start", 2)
    produce("src-start", 100, 2, prefix="s")
    rows, _ = run_available_now(
        spark,
        tmp_path,
        "json",
        subscribe="src-start",
        startingOffsets=json.dumps({"src-start": {"0": 40, "1": -1}}),
    )
    assert sorted(r.offset for r in rows) == list(range(40, 50))
    assert {r.partition for r in rows} == {0}
    rows, _ = run_available_now(
        spark, tmp_path, "latest", subscribe="src-start", startingOffsets="latest"
    )
    assert rows == []


def test_tail_probe_finds_true_end_where_the_watermark_is_per_record_batch(admin):
    admin.create("probe-t", 1)
    producer = Producer({**client_config(), "linger.ms": "50"})
    for i in range(500):
        producer.produce("probe-t", value=str(i).encode())
    producer.flush(10)
    probe = TailProbe(client_config(), 10, 2)
    try:
        _, high = probe.watermarks("probe-t", 0)
        assert probe.ends([("probe-t", 0)]) == {("probe-t", 0): 500}
    finally:
        probe.close()
    # Documents the broker behaviour the probe exists for (an exact broker gives 500 here too).
    assert 1 <= high <= 500
    # No time to ask: a reader that must see everything gets an error naming the partition,
    # a live batch the high watermark (a lower bound).
    hurried = TailProbe(client_config(), 10, cap_s=0, exact_wait_s=0)
    try:
        with pytest.raises(TimeoutError, match="probe-t/0"):
            hurried.ends([("probe-t", 0)])
        assert hurried.ends([("probe-t", 0)], exact=False) == {("probe-t", 0): high}
    finally:
        hurried.close()


def test_transaction_control_records_are_skipped(spark, admin, tmp_path):
    admin.create("src-txn", 1)
    producer = Producer({**client_config(), "transactional.id": f"txn-{time.time()}"})
    producer.init_transactions(30)
    for round_ in range(3):
        producer.begin_transaction()
        for i in range(10):
            producer.produce("src-txn", value=f"r{round_}-{i}".encode())
        producer.commit_transaction(30)
    rows, _ = run_available_now(spark, tmp_path, "txn", subscribe="src-txn")
    assert sorted(r.value for r in rows) == sorted(
        f"r{a}-{i}".encode() for a in range(3) for i in range(10)
    )


def test_value_not_valid_for_declared_format_goes_to_dead_letter_topic(spark, admin, tmp_path):
    admin.create("src-utf", 1)
    admin.create("src-utf-dlq", 1)
    producer = Producer(client_config())
    for value in (b"ok-1", b"\xff\xfe-bad", b"ok-2"):
        producer.produce("src-utf", value=value)
    producer.flush(10)
    rows, _ = run_available_now(
        spark,
        tmp_path,
        "utf",
        subscribe="src-utf",
        valueFormat="string",
        deadLetterTopic="src-utf-dlq",
    )
    assert [r.value for r in rows] == ["ok-1", "ok-2"]
    consumer = Consumer({**client_config(), "group.id": "t", "enable.auto.commit": "false"})
    consumer.assign([TopicPartition("src-utf-dlq", 0, 0)])
    msgs: list = []

    def delivered() -> bool:  # a fresh consumer's first fetch can be slow
        msgs.extend(m for m in consumer.consume(10, timeout=2) if m.error() is None)
        return bool(msgs)

    try:
        wait_for(delivered, 30, "the dead letter", interval_s=0)
    finally:
        consumer.close()
    assert len(msgs) == 1 and msgs[0].value() == b"\xff\xfe-bad"
    headers = dict(msgs[0].headers())
    assert headers["rl.source"] == b"src-utf/0@1" and b"valueFormat=string" in headers["rl.reason"]


def test_value_not_valid_for_declared_format_fails_with_the_fix_when_asked(spark, admin, tmp_path):
    admin.create("src-utf-fail", 1)
    producer = Producer(client_config())
    producer.produce("src-utf-fail", value=b"\xff")
    producer.flush(10)
    df = (
        spark.readStream.format(SOURCE_NAME)
        .options(subscribe="src-utf-fail", valueFormat="string", onBadRecord="fail")
        .load()
    )
    query = (
        df.writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ck-fail"))
        .start()
    )
    with pytest.raises(Exception, match="valueFormat=binary"):
        query.awaitTermination(240)


def test_missing_topic_and_malformed_offsets_fail_at_start_with_the_fix(spark, tmp_path):
    started = time.monotonic()
    df = spark.readStream.format(SOURCE_NAME).options(subscribe="no-such-topic").load()
    query = (
        df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck-m")).start()
    )
    with pytest.raises(Exception, match="recovery topics create no-such-topic"):
        query.awaitTermination(120)
    assert time.monotonic() - started < 120
    with pytest.raises(Exception, match="startingOffsets is neither"):
        df = (
            spark.readStream.format(SOURCE_NAME)
            .options(subscribe="x", startingOffsets="{oops")
            .load()
        )
        df.writeStream.format("noop").option(
            "checkpointLocation", str(tmp_path / "ck-o")
        ).start().awaitTermination(60)


def test_unreachable_broker_fails_the_query_with_the_fix(spark, tmp_path):
    from recovery_lib.processes import free_port

    df = (
        spark.readStream.format(SOURCE_NAME)
        .options(subscribe="t", **{"kafka.bootstrap.servers": f"127.0.0.1:{free_port()}"})
        .load()
    )
    query = (
        df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck-u")).start()
    )
    with pytest.raises(Exception, match="did not answer"):
        query.awaitTermination(120)


def test_sink_rejects_a_value_column_of_the_wrong_type_with_the_fix(spark, admin, tmp_path):
    admin.create("src-sinkbad", 1)
    df = spark.readStream.format(SOURCE_NAME).options(subscribe="src-sinkbad").load()
    with pytest.raises(Exception, match="to_json"):
        df.selectExpr("offset AS value").writeStream.format(SOURCE_NAME).option(
            "topic", "x"
        ).option("checkpointLocation", str(tmp_path / "ck-s")).start().awaitTermination(60)
