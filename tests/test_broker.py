"""The embedded broker: starts on loopback, refuses a second copy, never outlives its owner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.broker import EmbeddedBroker, running_state, stop_recorded
from recovery_lib.kafka.exceptions import BrokerAlreadyRunning, BrokerUnreachable, TopicMissing
from recovery_lib.processes import pid_alive
from recovery_lib.settings import Settings, get_settings
from tests.helpers import wait_for


@pytest.fixture()
def private_settings(tmp_path) -> Settings:
    return Settings(home=tmp_path / "home")


def test_broker_starts_on_loopback_and_stops_by_pid(private_settings):
    broker = EmbeddedBroker(private_settings)
    state = broker.start()
    try:
        assert state.host == "127.0.0.1"
        assert running_state(private_settings).pid == state.pid
        with pytest.raises(BrokerAlreadyRunning, match="recovery broker stop"):
            EmbeddedBroker(private_settings).start()
        admin = TopicAdmin({"bootstrap.servers": state.bootstrap})
        assert admin.create("alpha", 3) is True
        assert admin.create("alpha", 3) is False  # idempotent
        assert admin.partitions("alpha") == [0, 1, 2]
        assert "alpha" in admin.list()
        assert admin.delete("alpha") is True
        with pytest.raises(TopicMissing, match="recovery topics create"):
            admin.partitions("alpha")
    finally:
        broker.stop()
    assert not pid_alive(state.pid)
    assert running_state(private_settings) is None


def test_detached_broker_is_stopped_by_the_recorded_pid(private_settings):
    state = EmbeddedBroker(private_settings).start(detached=True)
    try:
        assert pid_alive(state.pid)
    finally:
        stopped = stop_recorded(private_settings)
    assert stopped is not None and stopped.pid == state.pid
    wait_for(lambda: not pid_alive(state.pid), 10, "detached broker to exit")


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_owned_broker_dies_with_its_owner(tmp_path, how):
    script = textwrap.dedent(
        f"""
        import sys, time
        from recovery_lib.kafka.broker import EmbeddedBroker
        from recovery_lib.settings import Settings
        b = EmbeddedBroker(Settings(home={str(tmp_path / "h")!r}))
        print(b.start().pid, flush=True)
        time.sleep(120)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        broker_pid = int(owner.stdout.readline())
        assert pid_alive(broker_pid)
        owner.send_signal(signal.SIGKILL if how == "sigkill" else signal.SIGTERM)
        owner.wait(timeout=10)
        wait_for(lambda: not pid_alive(broker_pid), 10, "broker to die with its owner")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if "broker_pid" in locals() and pid_alive(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)


def test_an_owner_with_its_own_sigterm_handler_cleans_up_before_the_broker_stops(tmp_path):
    """The CLI turns SIGTERM into SystemExit: its cleanup (deleting topics, flushing producers)
    must find the broker still up, and the broker is stopped once it is done."""
    script = textwrap.dedent(
        f"""
        import signal, sys, time
        from recovery_lib.kafka.broker import EmbeddedBroker
        from recovery_lib.processes import port_answers
        from recovery_lib.settings import Settings
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        b = EmbeddedBroker(Settings(home={str(tmp_path / "h")!r}))
        state = b.start()
        try:  # the pid is said inside: a SIGTERM right after it still reaches the cleanup
            print(state.pid, flush=True)
            time.sleep(120)
        finally:
            print("up in cleanup:", port_answers(state.host, state.port), flush=True)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        broker_pid = int(owner.stdout.readline())
        owner.send_signal(signal.SIGTERM)
        assert owner.stdout.readline().strip() == "up in cleanup: True"
        assert owner.wait(timeout=10) == 143
        wait_for(lambda: not pid_alive(broker_pid), 10, "broker to stop after the cleanup")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if "broker_pid" in locals() and pid_alive(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)


def test_unreachable_broker_is_reported_with_the_fix_within_bounded_time(tmp_path):
    from recovery_lib.processes import free_port

    started = time.monotonic()
    with pytest.raises(BrokerUnreachable, match="KAFKA_BOOTSTRAP"):
        TopicAdmin({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    assert time.monotonic() - started < 60  # bounded: the request timeout, not forever


def test_cli_broker_start_status_stop(tmp_path):
    env = {**os.environ, "RECOVERY_HOME": str(tmp_path / "cli")}
    env.pop("KAFKA_BOOTSTRAP", None)
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "recovery_lib.cli.main", "broker", *a],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    started = run("start")
    assert started.returncode == 0, started.stdout + started.stderr
    said = "".join(started.stdout.split())  # Rich wraps long lines, even inside words
    if get_settings().broker_kind == "tansu":
        assert "inmemoryonly" in said and "KAFKA_BOOTSTRAP" in said, started.stdout
    else:
        assert "durableacrossrestarts" in said and "kafka/node-1" in said, started.stdout
    try:
        status = run("status")
        assert status.returncode == 0 and "running" in status.stdout
    finally:
        stopped = run("stop")
    assert "stopped broker pid" in stopped.stdout
    assert run("status").returncode == 3


def test_broker_for_run_starts_one_only_when_none_is_configured_and_stops_only_its_own(
    private_settings,
):
    from recovery_lib.kafka.broker import broker_for_run

    settings = private_settings.model_copy(update={"kafka_bootstrap": None})
    said: list[str] = []
    with broker_for_run(said.append, settings) as bootstrap:
        state = running_state(settings)
        assert state is not None and state.bootstrap == bootstrap
        with broker_for_run(said.append, settings) as inner:  # a running one is used as it is
            assert inner == bootstrap
        assert pid_alive(state.pid)
    assert not pid_alive(state.pid) and running_state(settings) is None
    assert said == [
        f"embedded broker started on {bootstrap} (pid {state.pid})",
        "embedded broker stopped",
    ]
    external = settings.model_copy(update={"kafka_bootstrap": "kafka.example:9092"})
    with broker_for_run(said.append, external) as bootstrap:
        assert bootstrap == "kafka.example:9092" and running_state(external) is None


def test_the_advisor_samples_key_skew_from_a_topic(kafka_bootstrap):
    import uuid

    from confluent_kafka import Producer

    from recovery_lib.advisor.facts import sample_skew
    from recovery_lib.kafka.clients import client_config

    topic = f"skew-{uuid.uuid4().hex[:8]}"
    TopicAdmin().create(topic, partitions=2)
    producer = Producer(client_config())
    for i in range(2_000):
        key = "hot" if i % 2 else f"k{i}"  # half the records on one key
        producer.produce(topic, value=b"{}", key=key)
    producer.flush(30)
    skew = sample_skew([topic])
    assert skew is not None and skew.records == 2_000 and skew.skewed
    assert 0.5 <= skew.hot_share <= 0.6
    empty = f"empty-{uuid.uuid4().hex[:8]}"
    TopicAdmin().create(empty, partitions=1)
    assert sample_skew([empty]) is None


def test_the_cic_header_read_returns_a_ranges_headers_and_says_why_a_range_never_came(
    kafka_bootstrap, settings_env
):
    import uuid

    from confluent_kafka import Producer

    from recovery_lib.kafka.clients import client_config
    from recovery_lib.protocols.header_ranges import read_headers

    topic = f"hdr-{uuid.uuid4().hex[:8]}"
    TopicAdmin().create(topic, partitions=2)
    producer = Producer(client_config())
    for i in range(20):
        headers = [("h", str(i).encode())] if i != 4 else []  # one record without the header
        producer.produce(topic, value=b"{}", partition=i % 2, headers=headers)
    producer.flush(30)
    got = read_headers({}, {(topic, 0): (1, 4), (topic, 1): (0, 2)}, "h")
    assert got == {
        (topic, 0): [(1, b"2"), (2, None), (3, b"6")],
        (topic, 1): [(0, b"1"), (1, b"3")],
    }
    settings_env(RECOVERY_SOURCE_POLL_TIMEOUT_S=2)
    with pytest.raises(RuntimeError, match=r"offsets 10\.\.15 not readable.*holds offsets 0\.\.10"):
        read_headers({}, {(topic, 0): (8, 15)}, "h")  # 8 and 9 exist, 10..14 never come


def test_stopping_a_broker_a_running_command_owns_is_refused_unless_forced(private_settings):
    from recovery_lib.kafka.exceptions import BrokerOwnedByRun

    owned = EmbeddedBroker(private_settings)
    state = owned.start()  # not detached: this process owns it, as a benchmark owns its own
    try:
        with pytest.raises(BrokerOwnedByRun, match=rf"pid {os.getpid()}.*--force"):
            stop_recorded(private_settings)
        assert pid_alive(state.pid)
        assert stop_recorded(private_settings, force=True).pid == state.pid
        wait_for(lambda: not pid_alive(state.pid), 10, "the forced broker to exit")
    finally:
        owned.stop()


def test_the_tail_probe_reads_the_age_of_the_oldest_unread_record(kafka_bootstrap):
    """The daemon's input_lag_seconds: the timestamp of the record at each reader position."""
    import uuid

    from confluent_kafka import Producer

    from recovery_lib.kafka.clients import client_config
    from recovery_lib.kafka.tail_probe import TailProbe

    topic = f"age-{uuid.uuid4().hex[:8]}"
    TopicAdmin().create(topic, partitions=2)
    producer = Producer(client_config())
    for i in range(10):  # partition 0 holds records stamped 1000..1009, partition 1 5000..5009
        producer.produce(topic, value=b"x", partition=0, timestamp=1_000 + i)
        producer.produce(topic, value=b"x", partition=1, timestamp=5_000 + i)
    producer.flush(30)
    probe = TailProbe(client_config(), 10, 5)
    try:
        assert probe.oldest_timestamp({(topic, 0): 4, (topic, 1): 2}) == 1_004
        assert probe.oldest_timestamp({(topic, 1): 7}) == 5_007
        assert probe.oldest_timestamp({(topic, 0): 10}) is None  # at the end: nothing waits
        assert probe.oldest_timestamp({}) is None
    finally:
        probe.close()
