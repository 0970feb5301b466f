"""ReleaseBarrier.last_released: the backward scan and where it stops (no broker: a scripted
log stands in for the partition, a fake probe for its offsets)."""

from __future__ import annotations

from dataclasses import dataclass, field

from recovery_lib.io.sinks.release import SCAN_STEP, ReleaseBarrier, Released


@dataclass
class FakeProbe:
    low_watermark: int
    first: int
    end: int
    first_calls: list[str] = field(default_factory=list)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return self.low_watermark, self.end

    def first_offset(self, topic: str, partition: int) -> int:
        self.first_calls.append(f"{topic}/{partition}")
        return self.first

    def ends(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {tp: self.end for tp in partitions}


def barrier(probe: FakeProbe, ids: dict[int, Released]) -> tuple[ReleaseBarrier, list[tuple]]:
    """A barrier over a log whose offset -> id map is ``ids`` (other offsets: no id)."""
    scans: list[tuple[int, int]] = []
    b = ReleaseBarrier.__new__(ReleaseBarrier)
    b._probe = probe  # type: ignore[assignment]

    def last_in(topic: str, partition: int, start: int, end: int, prefix: str):
        scans.append((start, end))
        hits = [o for o in ids if start <= o < end]
        return ids[max(hits)] if hits else None

    b._last_in = last_in  # type: ignore[method-assign]
    return b, scans


def test_the_last_id_near_the_end_needs_no_look_at_the_log_start():
    probe = FakeProbe(low_watermark=500, first=500, end=1_000)
    b, scans = barrier(probe, {990: Released(7, 3), 400: Released(1, 0)})
    assert b.last_released("out", 0) == Released(7, 3)
    assert probe.first_calls == []  # no extra fetch when the scan finds an id (Kafka retention)
    assert scans == [(1_000 - SCAN_STEP, 1_000)]


def test_a_low_watermark_above_records_still_in_the_log_is_looked_below():
    # tansu can report a low watermark above records it still holds; the only id lies below.
    probe = FakeProbe(low_watermark=300, first=0, end=310)
    b, scans = barrier(probe, {120: Released(2, 5)})
    assert b.last_released("out", 1) == Released(2, 5)
    assert probe.first_calls == ["out/1"]
    assert scans[0] == (300, 310) and min(s for s, _ in scans) <= 120


def test_no_id_anywhere_is_none_and_the_scan_covers_the_whole_log():
    probe = FakeProbe(low_watermark=200, first=0, end=1_000)
    b, scans = barrier(probe, {})
    assert b.last_released("out", 2) is None
    covered = sorted(scans)
    assert covered[0][0] == 0 and covered[-1][1] == 1_000
    assert all(a[1] == b_[0] for a, b_ in zip(covered, covered[1:], strict=False))


def test_deleted_records_keep_the_watermark_and_a_zero_watermark_is_not_checked():
    deleted = FakeProbe(low_watermark=200, first=200, end=260)
    b, scans = barrier(deleted, {})
    assert b.last_released("out", 0) is None
    assert min(s for s, _ in scans) == 200 and deleted.first_calls == ["out/0"]
    fresh = FakeProbe(low_watermark=0, first=0, end=10)
    b, _ = barrier(fresh, {})
    assert b.last_released("out", 0) is None
    assert fresh.first_calls == []


def test_a_write_task_waits_for_a_stalled_broker_instead_of_failing_the_batch(monkeypatch):
    """The barrier of a release-mode task rides out a broker that stalls for longer than one
    request timeout (a 15 s pause failed the batch and restarted the job)."""
    from recovery_lib.io.sinks import kafka_sink
    from recovery_lib.io.sinks.kafka_sink import KafkaStreamWriter, SinkOptions
    from recovery_lib.kafka import outage

    calls = {"count": 0, "barrier": 0}

    def stalled_count(producer, topic):  # noqa: ANN001, ANN202
        calls["count"] += 1
        if calls["count"] < 3:
            raise TimeoutError("no metadata within 10 s")
        return 2

    class StalledBarrier:
        def last_released(self, topic, partition, prefix=""):  # noqa: ANN001, ANN202
            calls["barrier"] += 1
            if calls["barrier"] < 2:
                raise TimeoutError("release barrier: no answer within 10 s")
            return Released(batch=4, seq=6)

    monkeypatch.setattr(kafka_sink, "partition_count", stalled_count)
    monkeypatch.setattr(kafka_sink, "cached", lambda kind, config, factory: StalledBarrier())
    monkeypatch.setattr(outage.time, "sleep", lambda s: None)
    writer = KafkaStreamWriter.__new__(KafkaStreamWriter)
    writer.options = SinkOptions(topic="out", kafka={}, mode="release", sink_id="s")
    skip = writer._released_rows(None, batch_id=4, partition=1, config={})  # noqa: SLF001
    assert skip == 7  # rows 0..6 of batch 4 were released before the stall
    assert calls == {"count": 3, "barrier": 2}


class RecordingProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes | str | None, bytes | str]] = []

    def produce(self, topic, value, key, part, on_delivery, headers=None):  # noqa: ANN001, ANN201
        self.sent.append((key, value))

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        return 0


def produce_rerun(rows: list[tuple[str, str]], released: Released, caplog):  # noqa: ANN001, ANN201
    """A re-run of batch ``released.batch`` through the sink's produce loop (no broker)."""
    import logging

    import pyarrow as pa

    from recovery_lib.io.sinks.kafka_sink import KafkaStreamWriter, SinkOptions

    writer = KafkaStreamWriter.__new__(KafkaStreamWriter)
    writer.options = SinkOptions(topic="out", kafka={}, mode="release", sink_id="")
    producer = RecordingProducer()
    batch = pa.RecordBatch.from_pydict({"key": [k for k, _ in rows], "value": [v for _, v in rows]})
    with caplog.at_level(logging.ERROR, logger="recovery_lib.io.sinks.kafka_sink"):
        numbered = writer._produce_all(  # noqa: SLF001
            producer, iter([batch]), released.batch, 0, skip=released.seq + 1, pin=0,
            released=released,
        )  # fmt: skip
    return numbered, producer.sent


def test_a_rerun_that_numbers_the_released_rows_alike_is_quiet(caplog):
    rows = [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")]
    released = Released(4, 1, key=b"b", value=b"2")  # rows 0 and 1 were released
    numbered, sent = produce_rerun(rows, released, caplog)
    assert numbered == 4 and sent == [("c", "3"), ("d", "4")]
    assert not caplog.records


def test_a_rerun_that_numbers_other_rows_says_which_batch_and_partition(caplog):
    """The first run released rows 0-1 of another order (a record read twice, or an order
    no re-run reproduces): the skip by number loses one row and repeats another, and the
    job log names it instead of staying silent."""
    rows = [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")]
    released = Released(4, 1, key=b"c", value=b"3")  # the first run's row 1 was "c"
    _, sent = produce_rerun(rows, released, caplog)
    assert sent == [("c", "3"), ("d", "4")]  # "c" twice overall, "b" never: what it warns of
    (record,) = caplog.records
    assert "batch 4 partition 0" in record.getMessage()
    assert "row 1 is not the record released" in record.getMessage()
