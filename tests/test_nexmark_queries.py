"""Every NexMark query's streaming output equals its DuckDB reference on a small input; Q12
satisfies its invariants; bad records reach the dead-letter topic and the metrics."""

from __future__ import annotations

import json
import time
import uuid

import duckdb
import pytest
from confluent_kafka import Producer

from recovery_lib.io.sinks.dedup_reader import DedupReader, read_topic
from recovery_lib.job import JobOptions, write_output
from recovery_lib.kafka.clients import client_config
from recovery_lib.metrics.listener import MetricsListener
from recovery_lib.metrics.store import MetricsStore
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.contracts import contract
from recovery_lib.nexmark.producer import ensure_topics, produce_events
from recovery_lib.nexmark.queries import QUERIES
from recovery_lib.nexmark.reference import (
    ReferenceParams,
    check_q12,
    compare,
    load_events,
    reference_rows,
)
from recovery_lib.verify.inputs import InputView
from recovery_lib.verify.oracle import Verdict, judge
from recovery_lib.verify.schema import SchemaStore
from tests.helpers import wait_for

pytestmark = pytest.mark.spark

EVENTS = 20_000
BAD_BIDS = [b"{not json", b'{"auction": 1000, "bidder": 1001}']  # unparseable; missing fields


@pytest.fixture(scope="module")
def nexmark_input(admin):
    config = GeneratorConfig(
        topic_prefix=f"nxt{uuid.uuid4().hex[:6]}", event_time_rate=1000, partitions=2
    )
    ensure_topics(config, admin)
    produce_events(config, count=EVENTS)
    producer = Producer(client_config())
    for value in BAD_BIDS:
        producer.produce(config.bids_topic, value=value, partition=1)
    assert producer.flush(30) == 0, "the bad bids were not delivered"
    return config, load_events(config, EVENTS)


@pytest.fixture(scope="module")
def metrics(tmp_path_factory):
    store = MetricsStore(tmp_path_factory.mktemp("metrics") / "m.duckdb").start_background_flush()
    yield store
    store.close()


def run_query(spark, admin, config, query, tmp_path, store=None, **extra):
    opts = JobOptions(
        query=query,
        prefix=config.topic_prefix,
        partitions=config.partitions,
        checkpoint_dir=str(tmp_path / "ck"),
        available_now=True,
        max_records_per_batch=6000,
        schema_store=str(tmp_path / "schemas"),
        **extra,
    )
    admin.create(opts.out_topic, 2)
    admin.create(opts.dlq_topic, 1)
    listener = None
    if store is not None:
        run_id = store.start_run(query, "native", {"test": True})
        listener = MetricsListener(store, run_id)
        spark.streams.addListener(listener)
    try:
        streaming = write_output(QUERIES[query](spark, opts), opts)
        try:
            assert streaming.awaitTermination(300), f"{query} did not finish in 300 s"
        finally:
            streaming.stop()  # a query left running would load every later test
        assert streaming.exception() is None, streaming.exception()
        if listener is not None:  # its last progress events may still be on their way
            assert listener.wait_terminated(streaming.id), "the listener never saw the query end"
    finally:
        if listener is not None:
            spark.streams.removeListener(listener)
            store.finish_run(listener.run_id)
    return opts, [json.loads(r.value) for r in DedupReader(opts.out_topic)]


@pytest.mark.parametrize("query", ["q1", "q2", "q3", "q5", "q7", "q8"])
def test_streaming_output_equals_reference(spark, admin, nexmark_input, query, tmp_path):
    config, con = nexmark_input
    opts, outputs = run_query(spark, admin, config, query, tmp_path)
    expected = reference_rows(con, query, ReferenceParams())
    result = compare(outputs, expected)
    assert expected, "the reference must not be empty for the test to mean anything"
    assert result.equal, result
    # The writer recorded the value's Spark type, and every output Spark wrote fits it (and
    # its window lies among the input's event times).
    schema = SchemaStore(tmp_path / "schemas").lookup(opts.out_topic)
    assert schema is not None and schema.names == tuple(expected[0])
    records = list(read_topic(opts.out_topic))
    report = judge(
        query,
        contract(query).with_schema(schema),
        records,
        records,
        dedup=True,
        inputs=InputView({}, generator=config, events=EVENTS),
    )
    assert report.malformed == 0 and report.verdict is Verdict.CONSISTENT, report.to_dict()
    assert (report.window_span is not None) == (query in ("q5", "q7", "q8"))


def test_q12_counts_every_bid_exactly_once_across_processing_time_windows(
    spark, admin, nexmark_input, tmp_path
):
    config, con = nexmark_input
    opts = JobOptions(
        query="q12",
        prefix=config.topic_prefix,
        partitions=config.partitions,
        checkpoint_dir=str(tmp_path / "ck"),
        q12_window_s=2,
        output_topic=f"{config.topic_prefix}.out.q12",
    )
    admin.create(opts.out_topic, 2)
    admin.create(opts.dlq_topic, 1)
    streaming = write_output(QUERIES["q12"](spark, opts), opts)
    bids = con.execute("SELECT count(*) FROM bids").fetchone()[0]
    try:
        wait_for(
            lambda: sum(p["numInputRows"] for p in streaming.recentProgress) >= bids,
            180,
            "q12 to read every bid",
        )
        sentinel = Producer(client_config())

        def closed() -> bool:
            # A tick from a bidder that never bids advances processing time past open windows.
            time.sleep(2.5)
            sentinel.produce(
                config.bids_topic,
                value=json.dumps(
                    {
                        "auction": 1000,
                        "bidder": 1,
                        "price": 1,
                        "channel": "x",
                        "url": "x",
                        "dateTime": config.base_time_ms,
                    }
                ).encode(),
                partition=0,
            )
            assert sentinel.flush(30) == 0, "the tick bid was not delivered"
            counted = sum(
                json.loads(r.value)["num"]
                for r in read_topic(opts.out_topic)
                if json.loads(r.value)["bidder"] != 1
            )
            return counted >= bids

        wait_for(closed, 120, "every q12 window holding real bids to close", interval_s=0)
    finally:
        streaming.stop()
    outputs = [json.loads(r.value) for r in DedupReader(opts.out_topic)]
    verdict = check_q12(con, outputs, ignore_bidders=[1])
    assert verdict["ok"], verdict


def test_bad_records_go_to_dead_letters_and_into_the_metrics(
    spark, admin, nexmark_input, metrics, tmp_path
):
    config, con = nexmark_input
    opts, outputs = run_query(spark, admin, config, "q2", tmp_path, store=metrics)
    assert compare(outputs, reference_rows(con, "q2")).equal  # the job kept going
    # Every query reading bids routes the same bad records; their ids (source position) dedup.
    dead = [r for r in DedupReader(opts.dlq_topic) if r.id and r.id.startswith("dlq:")]
    assert sorted(r.value for r in dead) == sorted(BAD_BIDS)
    reasons = {dict(r.headers)["rl.reason"].decode() for r in dead}
    assert any("not a JSON bid" in x for x in reasons), reasons
    assert any("missing required fields: price,dateTime" in x for x in reasons), reasons
    assert all(
        dict(r.headers)["rl.source"].decode().startswith(f"{config.bids_topic}/1@") for r in dead
    )
    metrics.flush()
    with duckdb.connect(str(metrics.path), read_only=True) as db:
        run_id, status = db.execute("SELECT run_id, status FROM runs WHERE query = 'q2'").fetchone()
        batches, rows, dead_count = db.execute(
            "SELECT count(*), sum(input_rows), sum(dead_letters) FROM micro_batches "
            "WHERE run_id = ?",
            [run_id],
        ).fetchone()
        kinds = {
            k
            for (k,) in db.execute("SELECT kind FROM events WHERE run_id = ?", [run_id]).fetchall()
        }
    assert status == "finished"
    # Every record of the topic was read (Q12's test may have added tick bids to it).
    assert batches >= 3 and rows == sum(1 for _ in read_topic(config.bids_topic))
    assert rows >= con.execute("SELECT count(*) FROM bids").fetchone()[0] + len(BAD_BIDS)
    assert dead_count == len(BAD_BIDS)
    assert {"start", "stop"} <= kinds
