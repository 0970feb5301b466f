"""Riding out a broker stall: transient errors are retried with a growing backoff up to the
budget, the wait is noted for the job's status and cleared when the broker answers, other
errors and a longer outage fail loudly (no Kafka: a made-up call and clock)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from recovery_lib.kafka.outage import (
    OUTAGE_FILE_ENV,
    BrokerOutage,
    is_transient,
    read_outage,
    ride_out,
)
from recovery_lib.ops.daemon import broker_wait

TIMED_OUT = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get metadata"))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds + 1.0  # each failed attempt also took a second


def failing(times: int, error: BaseException, notes: list | None = None, path=None):  # noqa: ANN201
    calls = [0]

    def call() -> str:
        if notes is not None:
            notes.append(read_outage(path))
        calls[0] += 1
        if calls[0] <= times:
            raise error
        return "ends"

    return call, calls


def test_a_stall_shorter_than_the_budget_is_ridden_out_and_shown_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outage = tmp_path / "hb.json.outage"
    monkeypatch.setenv(OUTAGE_FILE_ENV, str(outage))
    clock = Clock()
    notes: list = []
    call, calls = failing(4, TIMED_OUT, notes, outage)
    result = ride_out(
        call, "latest offsets", budget_s=60, sleep=clock.sleep, clock=lambda: clock.now
    )
    assert result == "ends" and calls[0] == 5
    assert clock.sleeps == [0.2, 0.4, 0.8, 1.6]  # backoff grows
    seen = [n for n in notes if n is not None]
    assert seen and seen[-1]["what"] == "latest offsets" and seen[-1]["budget_s"] == 60
    assert "Failed to get metadata" in seen[-1]["error"]
    assert not outage.exists()  # the broker answered: no wait to show any more


def test_a_longer_outage_fails_loudly_naming_the_budget(monkeypatch) -> None:
    monkeypatch.delenv(OUTAGE_FILE_ENV, raising=False)
    clock = Clock()
    call, calls = failing(10_000, TIMED_OUT)
    with pytest.raises(BrokerOutage, match="RECOVERY_KAFKA_OUTAGE_BUDGET_S") as caught:
        ride_out(call, "latest offsets", budget_s=20, sleep=clock.sleep, clock=lambda: clock.now)
    assert clock.now >= 20 and calls[0] > 3
    assert "supervisor restarts it" in str(caught.value)


def test_an_error_a_waiting_broker_would_not_fix_is_raised_at_once() -> None:
    clock = Clock()
    call, calls = failing(1, ValueError("a bad offset"))
    with pytest.raises(ValueError, match="a bad offset"):
        ride_out(call, "x", budget_s=60, sleep=clock.sleep, clock=lambda: clock.now)
    assert calls[0] == 1 and clock.sleeps == []
    unknown_topic = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    assert not is_transient(unknown_topic) and is_transient(TIMED_OUT)
    assert is_transient(TimeoutError("no answer"))
    # the client's metadata lost the partition with its connections (seen after a blackhole)
    local_unknown = KafkaError(KafkaError._UNKNOWN_PARTITION, "Failed to get watermark offsets")
    assert is_transient(KafkaException(local_unknown))
    destroyed = KafkaError(KafkaError._DESTROY_BROKER, "Broker handle destroyed")
    assert is_transient(KafkaException(destroyed))


def test_the_daemon_status_says_the_job_waits_for_the_broker(tmp_path: Path) -> None:
    from recovery_lib.runtime.heartbeat import HeartbeatWriter, read_heartbeat

    outage = tmp_path / "hb.json.outage"
    writer = HeartbeatWriter(tmp_path / "hb.json", outage_path=outage)
    writer.beat()
    assert broker_wait(read_heartbeat(tmp_path / "hb.json")) == ""
    outage.write_text(json.dumps({"what": "latest offsets", "waited_s": 12.3, "budget_s": 60}))
    writer.beat()
    message = broker_wait(read_heartbeat(tmp_path / "hb.json"))
    assert message == "waiting for the broker: 12 s of 60 s (latest offsets)"
    assert broker_wait(SimpleNamespace(info={"lag_batches": 2})) == ""


def test_a_control_topic_s_end_rides_out_a_restarting_broker(monkeypatch) -> None:
    """The KaZoo order log and the LiveRobin index are folded by every replica: a broker
    restart made both replicas of a set die at once (the faults campaign on Apache Kafka,
    `Local: Unknown partition` and `Broker transport failure` from the watermark probe)."""
    import recovery_lib.kafka.outage as outage
    from recovery_lib.kafka.control_topic import ControlTopic

    monkeypatch.setattr(outage.time, "sleep", lambda _s: None)
    errors = [
        KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION, "Unknown partition")),
        KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure")),
    ]

    class Probe:
        def ends(self, parts):
            if errors:
                raise errors.pop(0)
            return {parts[0]: 42}

    topic = ControlTopic("order", {"bootstrap.servers": "127.0.0.1:1"})
    topic._probe = Probe()  # noqa: SLF001 - the watermark probe, without a broker
    assert topic.end() == 42 and errors == []
