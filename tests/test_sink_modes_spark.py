"""Sink modes release and two_phase in real Spark queries on the broker: a micro-batch re-run
(its commit-log entry removed, as a driver that died before committing leaves it) writes
nothing a consumer sees twice; the raw log shows what each mode held back or dropped."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from recovery_lib.io.sinks.commit_gate import COMMIT_HEADER, CommittedReader
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.io.source import SOURCE_NAME
from tests.helpers import produce

pytestmark = [pytest.mark.spark, pytest.mark.broker]

RECORDS = 900


def run_available_now(
    spark, source: str, out: str, checkpoint: Path, mode: str, **options: str
) -> None:
    df = (
        spark.readStream.format(SOURCE_NAME)
        .option("subscribe", source)
        .option("maxOffsetsPerTrigger", "300")
        .load()
    )
    query = (
        df.select(
            F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value")
        )
        .writeStream.format(SOURCE_NAME)
        .option("topic", out)
        .option("mode", mode)
        .option("stableOrder", "true")
        .options(**options)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the available-now query did not finish"
    assert query.exception() is None, query.exception()


def committed(checkpoint: Path) -> list[Path]:
    return sorted(
        (p for p in (checkpoint / "commits").iterdir() if p.name.isdigit()),
        key=lambda p: int(p.name),
    )


def rerun_last_batch(
    spark, source: str, out: str, checkpoint: Path, mode: str, **options: str
) -> int:
    """Remove the last batch's commit-log entry and restart: Spark re-runs that batch."""
    commits = committed(checkpoint)
    last = int(commits[-1].name)
    commits[-1].unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    run_available_now(spark, source, out, checkpoint, mode, **options)
    return last


@pytest.fixture()
def source(admin, topic_name) -> str:
    name = f"{topic_name}-in"
    admin.create(name, 2)
    produce(name, RECORDS, 2)
    return name


def test_release_rerun_of_a_batch_releases_nothing_twice(spark, admin, source, tmp_path):
    out = f"{source}-release"
    admin.create(out, 4)
    checkpoint = tmp_path / "ck"
    run_available_now(spark, source, out, checkpoint, "release")
    first = list(read_topic(out))
    assert len(first) == RECORDS
    rerun_last_batch(spark, source, out, checkpoint, "release")
    raw = list(read_topic(out))
    ids = Counter(r.id for r in raw)
    # A plain consumer: every record once, none written again by the re-run.
    assert len(raw) == RECORDS and max(ids.values()) == 1
    assert sorted(r.value for r in raw) == sorted(f"v{i}".encode() for i in range(RECORDS))
    # Ids grow along every partition (what the barrier relies on).
    for part in {r.partition for r in raw}:
        positions = [tuple(int(x) for x in r.id.split("-")) for r in raw if r.partition == part]
        assert positions == sorted(positions) and {p[1] for p in positions} == {part}


def test_at_least_once_rerun_of_a_batch_writes_copies(spark, admin, source, tmp_path):
    """The same re-run without the barrier: the copies the release test must not see."""
    out = f"{source}-alo"
    admin.create(out, 4)
    checkpoint = tmp_path / "ck"
    run_available_now(spark, source, out, checkpoint, "at_least_once")
    rerun_last_batch(spark, source, out, checkpoint, "at_least_once")
    ids = Counter(r.id for r in read_topic(out))
    assert len(ids) == RECORDS and sum(ids.values()) > RECORDS


def test_two_phase_shows_a_batch_once_at_its_first_commit(spark, admin, source, tmp_path):
    out = f"{source}-2pc"
    admin.create(out, 2)
    checkpoint = tmp_path / "ck"
    run_available_now(spark, source, out, checkpoint, "two_phase")
    batches = len(committed(checkpoint))
    last = rerun_last_batch(spark, source, out, checkpoint, "two_phase")
    raw = list(read_topic(out))
    markers = [r for r in raw if COMMIT_HEADER in dict(r.headers)]
    assert len(markers) == (batches + 1) * 2  # every commit, the re-run's too, per partition
    reader = CommittedReader(out)
    seen = list(reader)
    assert len(seen) == RECORDS and len({r.id for r in seen}) == RECORDS
    rerun_copies = sum(1 for r in raw if r.id and r.id.startswith(f"{last}-"))
    assert reader.gate.dropped == rerun_copies // 2 > 0  # the re-run's copy, held and dropped
    # Visible at its commit record, never before it was written.
    by_offset = {(r.partition, r.offset): r.timestamp_ms for r in raw}
    assert all(r.timestamp_ms >= by_offset[(r.partition, r.offset)] for r in seen)


def test_release_names_the_fix_when_the_topic_has_too_few_partitions(
    spark, admin, source, tmp_path
):
    out = f"{source}-narrow"
    admin.create(out, 1)
    with pytest.raises(Exception, match=r"coalesce the output"):
        run_available_now(spark, source, out, tmp_path / "ck", "release")


def test_the_transaction_probe_says_yes_for_apache_kafka_and_no_for_tansu(kafka_bootstrap):
    """Whether the transactional test below can run here, checked rather than assumed."""
    from recovery_lib.kafka.capabilities import hides_aborted_records
    from recovery_lib.settings import get_settings

    if get_settings().kafka_bootstrap and not _embedded():
        pytest.skip("KAFKA_BOOTSTRAP names an external broker: the probe is tested below")
    assert hides_aborted_records() is (get_settings().broker_kind == "kafka")


def _embedded() -> bool:
    from recovery_lib.kafka.broker import running_state
    from recovery_lib.settings import get_settings

    state = running_state(get_settings())
    return state is not None and state.bootstrap == get_settings().kafka_bootstrap


def test_transactional_rerun_of_a_batch_commits_nothing_twice(spark, admin, source, tmp_path):
    """Kafka transactions, read_committed: only on a broker that hides aborted records (Apache
    Kafka, the project's default broker; skipped on tansu, RECOVERY_BROKER_KIND=tansu)."""
    from confluent_kafka import Consumer, TopicPartition

    from recovery_lib.kafka.capabilities import hides_aborted_records
    from recovery_lib.kafka.clients import client_config

    if not hides_aborted_records():
        pytest.skip(
            "the broker's read_committed consumers see aborted transactional records (the "
            "embedded tansu does): the transactional sink is not correct there. Run on "
            "Apache Kafka (RECOVERY_BROKER_KIND=kafka, or KAFKA_BOOTSTRAP at a Kafka cluster)"
        )
    out = f"{source}-txn"
    admin.create(out, 4)
    checkpoint = tmp_path / "ck"
    txn = {"brokerSupportsTransactions": "true"}
    run_available_now(spark, source, out, checkpoint, "transactional", **txn)
    rerun_last_batch(spark, source, out, checkpoint, "transactional", **txn)
    consumer = Consumer(
        {**client_config(), "group.id": f"{out}-rc", "isolation.level": "read_committed"}
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(out, p, 0) for p in range(4)])
        idle = 0
        while idle < 5:
            msgs = [m for m in consumer.consume(1000, timeout=1.0) if m.error() is None]
            values += [m.value() for m in msgs]
            idle = 0 if msgs else idle + 1
    finally:
        consumer.close()
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(RECORDS))
