"""Spark's own Kafka connector (format("kafka")) is on every session the project builds: a
team's query that reads and writes Kafka through it runs unchanged, headers included (the
lineage id a sink writes can be read back)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.kafka.clients import client_config
from recovery_lib.spark.session import kafka_connector_jars

pytestmark = [pytest.mark.spark, pytest.mark.broker]


@pytest.fixture()
def records(admin):
    topic = f"connector-{uuid.uuid4().hex[:8]}"
    admin.create(topic, 2)
    producer = Producer(client_config())
    for i in range(20):
        producer.produce(
            topic, key=f"k{i % 4}", value=f'{{"n": {i}}}', partition=i % 2,
            headers=[("rl.id", f"id-{i}".encode())],
        )  # fmt: skip
    assert producer.flush(30) == 0
    return topic


def test_the_connector_is_installed_and_on_the_session(spark) -> None:
    jars = kafka_connector_jars()
    names = " ".join(jars)
    assert "spark-sql-kafka-0-10" in names and "kafka-clients-3" in names, jars
    assert set(jars) <= set(spark.conf.get("spark.jars").split(","))


def test_a_query_reads_and_writes_kafka_through_spark_s_connector(
    spark, admin, kafka_bootstrap, records, tmp_path
) -> None:
    from pyspark.sql import functions as F

    read = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", records)
        .option("includeHeaders", "true")
        .load()
    )
    rows = read.select(
        F.col("key").cast("string").alias("key"),
        F.expr("filter(headers, h -> h.key = 'rl.id')[0].value").cast("string").alias("id"),
    ).collect()
    assert sorted(r.id for r in rows) == sorted(f"id-{i}" for i in range(20))
    # A streaming copy of the topic, as a team's job writes it (availableNow: one run).
    out = f"{records}.copy"
    admin.create(out, 2)
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", records)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", F.upper(F.col("value").cast("string")).alias("value"))
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", out)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the copy did not finish in 120 s"
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    copied = sorted(r.value.decode() for r in read_topic(out))
    assert copied == sorted(f'{{"N": {i}}}' for i in range(20))
