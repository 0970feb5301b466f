"""Errors on cleanup and background paths are reported, not swallowed: records left undelivered
at exit, a failing background flush of the metrics store, a broker whose clean-up fails after
a failed start, a source that cannot tell its latest offset."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pytest

import recovery_lib.metrics.store as store_mod
from recovery_lib.io import client_cache
from recovery_lib.kafka import broker as broker_mod
from recovery_lib.kafka.broker import EmbeddedBroker
from recovery_lib.kafka.exceptions import BrokerStartError
from recovery_lib.metrics.store import MetricsStore
from recovery_lib.settings import Settings


class _Producer:
    def __init__(self, left: int) -> None:
        self.left = left

    def flush(self, timeout_s: float) -> int:
        return self.left


class _Consumer:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.closed = False

    def close(self) -> None:
        if self.error is not None:
            raise self.error
        self.closed = True


def test_records_left_undelivered_at_exit_are_reported_and_every_client_is_closed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(client_cache, "_clients", {})
    secret = {"bootstrap.servers": "b:9092", "sasl.password": "s3cret"}
    client_cache.cached("producer:sink", secret, lambda c: _Producer(left=3))
    client_cache.cached("producer:deadletter", secret, lambda c: _Producer(left=0))
    client_cache.cached("consumer:range", secret, lambda c: _Consumer(RuntimeError("gone")))
    last = client_cache.cached("consumer:other", secret, lambda c: _Consumer())

    problems = client_cache.close_all()

    assert problems == [
        "producer:sink: 3 records not delivered within 5 s are lost at exit",
        "consumer:range: closing at exit failed: RuntimeError('gone')",
    ]
    assert last.closed  # tried after the one that failed
    assert client_cache._clients == {}
    err = caplog.text
    assert "producer:sink: 3 records not delivered" in err
    assert "s3cret" not in err  # the configuration (credentials) is never printed


def test_a_failed_background_flush_is_reported_and_its_rows_land_on_a_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.duckdb"
    store = MetricsStore(path, flush_interval_s=0.05)
    real = store_mod.with_lock_retry
    failures = [duckdb.IOException("disk full"), duckdb.IOException("disk full")]

    def flaky(fn, timeout_s: float = 30.0):  # noqa: ANN001, ANN202
        if failures:
            raise failures.pop(0)
        return real(fn, timeout_s)

    monkeypatch.setattr(store_mod, "with_lock_retry", flaky)
    store.add("throughput", [("run", 1, 10, 10)])
    store.start_background_flush()

    def recovered() -> bool:  # two failures, then a background flush that succeeded
        return store.background_errors == 2 and store.last_background_error is None

    deadline = time.monotonic() + 30
    while not recovered() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert recovered()
    monkeypatch.setattr(store_mod, "with_lock_retry", real)
    store.close()
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute("SELECT count(*) FROM throughput").fetchone()[0]
    assert rows == 1  # kept through both failures, written by the third flush
    err = caplog.text
    assert err.count("background flush failed") == 1  # once per distinct error, not per retry
    assert "IOException: disk full" in err


def test_a_failed_start_raises_its_own_error_when_the_clean_up_fails_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(broker_mod, "tansu_binary", lambda: Path("/bin/true"))  # exits at once

    def stop_fails(self: EmbeddedBroker, timeout_s: float = 5.0) -> None:
        raise OSError("cannot signal")

    monkeypatch.setattr(EmbeddedBroker, "stop", stop_fails)
    broker = EmbeddedBroker(Settings(home=tmp_path / "home"), kind="tansu")
    try:
        with pytest.raises(BrokerStartError, match="exited with code 0") as info:
            broker.start()
    finally:
        assert broker.process is not None
        broker.process.wait(timeout=10)
    assert any("stopping the broker afterwards failed too" in n for n in info.value.__notes__)


def test_a_source_that_cannot_tell_its_latest_offset_says_why_and_keeps_the_query(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from recovery_lib.io.source import KafkaStreamReader, SourceOptions, source_schema

    options = SourceOptions.parse({"subscribe": "t", "kafka.bootstrap.servers": "127.0.0.1:9"})
    reader = KafkaStreamReader(options, source_schema())

    def unreachable(exact: bool = True) -> dict:
        raise RuntimeError("broker unreachable")

    monkeypatch.setattr(reader, "_available", unreachable)
    assert reader.reportLatestOffset() is None
    assert "latest offset unknown: broker unreachable" in caplog.text


def test_the_progress_report_gives_what_the_batch_planning_saw_without_asking_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from recovery_lib.io.source import KafkaStreamReader, SourceOptions, source_schema

    options = SourceOptions.parse({"subscribe": "t", "kafka.bootstrap.servers": "127.0.0.1:9"})
    reader = KafkaStreamReader(options, source_schema())
    asked = []

    def available(exact: bool = True) -> dict:
        asked.append(exact)
        return {"t": {"0": 10 * len(asked)}}

    monkeypatch.setattr(reader, "_available", available)
    assert reader.reportLatestOffset() == {"t": {"0": 10}}  # before any batch: asks
    assert reader.latestOffset({"t": {"0": 0}}, ReadAllAvailable()) == {"t": {"0": 20}}
    assert reader.reportLatestOffset() == {"t": {"0": 20}}
    assert len(asked) == 2


def test_a_source_whose_log_ends_before_its_checkpoint_refuses_naming_both_offsets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A restarted (emptied) embedded broker under a running query: the checkpoint read up to
    offset 50, the log now ends at 10. Going on would skip offsets 10..49 once they exist."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from recovery_lib.io.exceptions import InputBehindCheckpoint
    from recovery_lib.io.source import KafkaStreamReader, SourceOptions, source_schema

    options = SourceOptions.parse({"subscribe": "t", "kafka.bootstrap.servers": "127.0.0.1:9"})
    reader = KafkaStreamReader(options, source_schema())
    ends = {"t": {"0": 10, "1": 80}}
    monkeypatch.setattr(reader, "_ends", lambda exact=True: ends)
    with pytest.raises(InputBehindCheckpoint, match="t/0 read up to 50, the log ends at 10"):
        reader.latestOffset({"t": {"0": 50, "1": 20}}, ReadAllAvailable())
    ends["t"]["0"] = 60  # the log reaches the checkpoint again: the query goes on
    assert reader.latestOffset({"t": {"0": 50, "1": 20}}, ReadAllAvailable()) == ends
    bounded = SourceOptions.parse(
        {"subscribe": "t", "kafka.bootstrap.servers": "127.0.0.1:9",
         "endingOffsets": '{"t": {"0": 5, "1": 5}}'}
    )  # fmt: skip
    reader = KafkaStreamReader(bounded, source_schema())
    monkeypatch.setattr(reader, "_ends", lambda exact=True: {"t": {"0": 10, "1": 80}})
    # A bounded run at its bound is done, not behind: it stays where it is.
    assert reader.latestOffset({"t": {"0": 7, "1": 5}}, ReadAllAvailable()) == {
        "t": {"0": 7, "1": 5}
    }


def test_a_checkpoint_of_other_topics_is_refused_not_read_into(monkeypatch):
    """A job restarted on the checkpoint of a run that read other topics (a soak under the same
    job name on a new topic prefix: its join matched every new row with the old state's, each
    output three times) stops with what to do, for a new batch and for a replayed one."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from recovery_lib.io.exceptions import InputBehindCheckpoint
    from recovery_lib.io.source import KafkaStreamReader, SourceOptions, source_schema

    options = SourceOptions.parse({"subscribe": "new.t", "kafka.bootstrap.servers": "127.0.0.1:9"})
    reader = KafkaStreamReader(options, source_schema())
    monkeypatch.setattr(reader, "_ends", lambda exact=True: {"new.t": {"0": 10, "1": 10}})
    old = {"old.t": {"0": 50, "1": 20}}
    with pytest.raises(InputBehindCheckpoint, match=r"read topics \['old.t'\].*now reads"):
        reader.latestOffset(old, ReadAllAvailable())
    with pytest.raises(InputBehindCheckpoint, match="belongs to other input"):
        reader.partitions(old, {"old.t": {"0": 60, "1": 20}})
    # Its own topics, and a topic added beside them, go on.
    assert reader.latestOffset({"new.t": {"0": 5, "1": 5}}, ReadAllAvailable())
    assert reader.partitions({"new.t": {"0": 5}}, {"new.t": {"0": 7}, "old.t": {"0": 1}})
