"""A secured Kafka cluster: the project's Kafka node with a SASL_SSL listener (SCRAM-SHA-512, a
certificate of the test's own CA), reached only through the settings (RECOVERY_KAFKA_*): records
go through, a wrong password or an untrusted certificate fails at once with the setting to
fix, and a q1 experiment runs end to end with every client on the secured listener, writing
the password nowhere."""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from recovery_lib.kafka import apache
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.apache import SecuredListener
from recovery_lib.kafka.broker import BrokerState, EmbeddedBroker
from recovery_lib.kafka.clients import check_reachable, client_config
from recovery_lib.kafka.exceptions import (
    BrokerAuthenticationFailed,
    BrokerStartError,
    BrokerTlsFailed,
    BrokerUnreachable,
)
from recovery_lib.processes import free_port
from recovery_lib.settings import Settings

pytestmark = pytest.mark.broker

USER = "alice"
PASSWORD = "s3cret-5b7e1d"  # distinctive: a search of logs and reports for it finds only it
WRONG_PASSWORD = "wr0ng-9c4a2f"


@dataclass(frozen=True)
class TlsFiles:
    """A self-signed CA and a server certificate it signed for 127.0.0.1 and localhost."""

    ca: Path  # the CA's certificate: what clients trust (ssl.ca.location)
    chain: Path  # the server's certificate, then the CA's
    key: Path  # the server's private key, PKCS#8, not encrypted


def make_tls_files(directory: Path, name: str = "recovery test CA") -> TlsFiles:
    now = datetime.datetime.now(datetime.UTC)
    valid = {
        "not_valid_before": now - datetime.timedelta(minutes=5),
        "not_valid_after": now + datetime.timedelta(days=1),
    }
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    ca = (
        x509.CertificateBuilder(subject_name=ca_name, issuer_name=ca_name, **valid)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder(
            subject_name=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]),
            issuer_name=ca_name,
            **valid,
        )
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(directory / "ca.pem", directory / "chain.pem", directory / "key.pem")
    files.ca.write_bytes(ca.public_bytes(pem))
    files.chain.write_bytes(server.public_bytes(pem) + ca.public_bytes(pem))
    files.key.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return files


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def secured_broker(
    tmp_path_factory: pytest.TempPathFactory, tls: TlsFiles
) -> Iterator[BrokerState]:
    """One Kafka node with a SASL_SSL listener beside its PLAINTEXT one, private to this module
    (the session's broker, if any, runs on)."""
    settings = Settings(home=tmp_path_factory.mktemp("secured-home"), broker_kind="kafka")
    listener = SecuredListener(USER, PASSWORD, tls.chain, tls.key)
    broker = EmbeddedBroker(settings, private=True, kind="kafka", secured=listener)
    state = broker.start()
    try:
        yield state
    finally:
        from recovery_lib.io.client_cache import close_all

        close_all()  # while the broker is up: no cached client retries a dead port
        broker.stop()


@pytest.fixture()
def secured_settings(
    settings_env: Callable[..., None], secured_broker: BrokerState, tls: TlsFiles, tmp_path: Path
) -> Callable[..., None]:
    """Point this process's settings, and its children's environment, at the secured listener
    with a home of the test's own; keyword arguments override (a wrong password)."""

    def use(**overrides: object) -> None:
        settings_env(
            **{
                "RECOVERY_HOME": tmp_path / "home",
                "KAFKA_BOOTSTRAP": secured_broker.secured_bootstrap,
                "RECOVERY_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "RECOVERY_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
                "RECOVERY_KAFKA_SASL_USERNAME": USER,
                "RECOVERY_KAFKA_SASL_PASSWORD": PASSWORD,
                "RECOVERY_KAFKA_SSL_CA_LOCATION": tls.ca,
                **overrides,
            }
        )

    return use


def test_the_secured_listener_is_recorded_and_refuses_a_plaintext_client(secured_broker):
    assert secured_broker.secured_bootstrap is not None
    assert secured_broker.secured_bootstrap != secured_broker.bootstrap
    layout = Path(secured_broker.log_dir) / "layout.json"
    assert str(secured_broker.nodes[0].secured_port) in layout.read_text()
    # A client without TLS and SASL gets no answer there: the port is the secured one.
    with pytest.raises((BrokerUnreachable, BrokerTlsFailed)):
        check_reachable({"bootstrap.servers": secured_broker.secured_bootstrap}, 3.0)


@pytest.mark.long  # ~15 s: a second broker start
def test_a_restart_on_the_same_log_dir_keeps_the_secured_port_and_its_user(tmp_path, tls):
    settings = Settings(home=tmp_path / "home", broker_kind="kafka")
    listener = SecuredListener(USER, PASSWORD, tls.chain, tls.key)
    login = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": USER,
        "sasl.password": PASSWORD,
        "ssl.ca.location": str(tls.ca),
    }
    with EmbeddedBroker(settings, private=True, kind="kafka", secured=listener) as first:
        before = first.state.secured_bootstrap
    with EmbeddedBroker(settings, private=True, kind="kafka", secured=listener) as again:
        assert again.state.secured_bootstrap == before  # layout.json kept the port
        check_reachable({"bootstrap.servers": before, **login}, 10.0)  # and the SCRAM user
    # A dir formatted without the listener has no SCRAM user: refused before any JVM starts.
    plain = tmp_path / "plain"
    plain.mkdir()
    node = apache.KafkaNodeLayout(1, free_port(), free_port())
    apache.KafkaLayout(apache.new_cluster_id(), (node,)).save(plain / "layout.json")
    with pytest.raises(BrokerStartError, match="formatted without a secured listener"):
        EmbeddedBroker(
            settings, private=True, log_dir=plain, kind="kafka", secured=listener
        ).start()


def test_records_go_through_the_sasl_ssl_listener_with_the_settings(
    secured_settings, secured_broker, tls
):
    secured_settings()
    config = client_config()
    assert config["bootstrap.servers"] == secured_broker.secured_bootstrap
    assert {k: config[k] for k in ("security.protocol", "sasl.mechanism", "sasl.username")} == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": USER,
    }
    assert config["ssl.ca.location"] == str(tls.ca)
    topic = f"secured-{uuid.uuid4().hex[:8]}"
    TopicAdmin().create(topic, 2)
    sent = [f"r{i}".encode() for i in range(200)]
    producer = Producer({**client_config(), "acks": "all", "enable.idempotence": "true"})
    for i, value in enumerate(sent):
        producer.produce(topic, value, partition=i % 2)
    assert producer.flush(30) == 0, "records left undelivered on the secured listener"
    consumer = Consumer(
        {
            **client_config(),
            "group.id": f"secured-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": "false",
        }
    )
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
        deadline = time.monotonic() + 30
        while len(got) < len(sent) and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(500, timeout=1.0) if m.error() is None]
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)


def test_a_wrong_password_fails_at_once_naming_the_settings_not_the_password(secured_settings):
    # A long request timeout: the refusal must come from the login, not from a timeout.
    secured_settings(
        RECOVERY_KAFKA_SASL_PASSWORD=WRONG_PASSWORD, RECOVERY_KAFKA_REQUEST_TIMEOUT_S=60
    )
    started = time.monotonic()
    with pytest.raises(BrokerAuthenticationFailed) as refused:
        TopicAdmin()  # what every entry (experiment, job, daemon) builds before anything else
    elapsed = time.monotonic() - started
    assert elapsed < 15, f"the refused login took {elapsed:.1f} s to surface"
    message = str(refused.value)
    assert "RECOVERY_KAFKA_SASL_USERNAME" in message and "RECOVERY_KAFKA_SASL_PASSWORD" in message
    assert repr(USER) in message
    assert WRONG_PASSWORD not in message and PASSWORD not in message


def test_the_experiment_command_stops_at_once_on_a_wrong_password(secured_settings):
    secured_settings(RECOVERY_KAFKA_SASL_PASSWORD=WRONG_PASSWORD)
    command = [sys.executable, "-m", "recovery_lib.cli.main", "experiment", "run", "--job", "q1"]
    started = time.monotonic()
    done = subprocess.run(
        [*command, "--fail", "none", "--duration", "5", "--fail-at", "1"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started  # the interpreter's start and imports included
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert elapsed < 20, f"the command took {elapsed:.1f} s to stop"
    assert "RECOVERY_KAFKA_SASL_PASSWORD" in " ".join(said.split()), said
    assert WRONG_PASSWORD not in said and PASSWORD not in said


def test_a_certificate_the_configured_ca_did_not_sign_fails_at_once(secured_settings, tmp_path):
    other = make_tls_files(tmp_path / "other-ca", name="another CA")
    secured_settings(RECOVERY_KAFKA_SSL_CA_LOCATION=other.ca, RECOVERY_KAFKA_REQUEST_TIMEOUT_S=60)
    started = time.monotonic()
    with pytest.raises(BrokerTlsFailed, match="RECOVERY_KAFKA_SSL_CA_LOCATION"):
        TopicAdmin()
    assert time.monotonic() - started < 15


@pytest.mark.slow
@pytest.mark.long  # ~2 min: every client through SASL_SSL; the refusals above run by default
def test_a_q1_experiment_on_the_secured_listener_is_exactly_once_and_writes_no_password(
    secured_settings, tmp_path
):
    from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report

    # Every client (generator, source, sink, oracle, latency collector, admin) knows only the
    # secured listener: Kafka answers it with that listener's addresses, and the first test
    # shows a client without TLS and SASL gets nothing there. A client that lost the settings
    # would fail the run.
    secured_settings()
    cfg = ExperimentConfig(
        query="q1", fail="driver-kill", rate=300.0, duration_s=20.0, fail_at_s=8.0, warmup_s=1.0
    )
    report = Experiment(cfg).run()
    c = report["consistency"]
    assert report["failures"][0]["kind"] == "driver-kill" and report["failures"][0]["fired"]
    assert report["restarts"] and report["restarts"][0]["cause"].startswith("exit -9")
    assert c["outputs"] > 0 and c["outputs"] == c["reference_outputs"], c
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c
    write_report(report, tmp_path / "home" / "report.json")
    # Nothing the experiment left (reports, job logs, checkpoints, metrics) holds the password.
    leaks = [
        str(path)
        for path in (tmp_path / "home").rglob("*")
        if path.is_file() and PASSWORD.encode() in path.read_bytes()
    ]
    assert not leaks, f"the SASL password is written in {leaks}"
