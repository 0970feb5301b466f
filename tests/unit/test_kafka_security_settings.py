"""A secured cluster's client settings, without a broker: the typed RECOVERY_KAFKA_* settings
build librdkafka's properties beside the pass-through ones, a half-set login is refused naming
what is missing, and the password shows nowhere (repr, dumps, errors, logs, options); the
secured listener's server.properties and layout."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from recovery_lib.io.source_options import SourceOptions
from recovery_lib.kafka import apache
from recovery_lib.kafka.clients import REDACTED, client_config, is_secret, redacted, scrubbed
from recovery_lib.kafka.exceptions import BrokerStartError
from recovery_lib.settings import Settings, plaintext_client_environment

PASSWORD = "pw-7d1e0b"
SECURED = {
    "RECOVERY_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
    "RECOVERY_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "RECOVERY_KAFKA_SASL_USERNAME": "alice",
    "RECOVERY_KAFKA_SASL_PASSWORD": PASSWORD,
}


@pytest.fixture()
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Set variables for Settings() (none of the machine's Kafka client variables leak in)."""
    import os

    for name in list(os.environ):
        if name.startswith(("RECOVERY_KAFKA_", "KAFKA_CLIENT_")) or name == "KAFKA_BOOTSTRAP":
            monkeypatch.delenv(name)
    monkeypatch.setenv("RECOVERY_HOME", str(tmp_path / "home"))

    def set_env(**values: object) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, str(value))

    return set_env


@pytest.fixture()
def ca_file(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    return path


def test_the_settings_build_the_librdkafka_properties_of_a_sasl_ssl_cluster(env, ca_file):
    env(**SECURED, RECOVERY_KAFKA_SSL_CA_LOCATION=ca_file)
    settings = Settings()
    assert client_config("broker:9093", settings=settings) == {
        "bootstrap.servers": "broker:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": PASSWORD,
        "ssl.ca.location": str(ca_file),
    }


def test_without_security_settings_a_client_gets_only_its_bootstrap(env):
    assert client_config("broker:9092", settings=Settings()) == {"bootstrap.servers": "broker:9092"}


def test_the_pass_through_still_adds_properties_beside_the_typed_ones(env, ca_file):
    env(
        **SECURED,
        KAFKA_CLIENT_CONFIG=json.dumps({"ssl.endpoint.identification.algorithm": "https"}),
        KAFKA_CLIENT_SSL_KEY_LOCATION="/keys/client.key",
        KAFKA_CLIENT_LINGER_MS="",  # empty: no property
    )
    config = Settings().kafka_client_config()
    assert config["ssl.endpoint.identification.algorithm"] == "https"
    assert config["ssl.key.location"] == "/keys/client.key"
    assert "linger.ms" not in config
    assert config["sasl.password"] == PASSWORD


def test_the_pass_through_alone_works_as_before(env):
    env(KAFKA_CLIENT_CONFIG='{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}')
    assert Settings().kafka_client_config() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
    }


def test_a_property_set_differently_by_both_is_refused_without_its_values(env):
    env(**SECURED, KAFKA_CLIENT_SASL_PASSWORD="other-pw-4411")
    with pytest.raises(ValueError, match="RECOVERY_KAFKA_SASL_PASSWORD") as clash:
        Settings().kafka_client_config()
    assert PASSWORD not in str(clash.value) and "other-pw-4411" not in str(clash.value)


def test_invalid_pass_through_json_is_refused_without_quoting_it(env):
    env(KAFKA_CLIENT_CONFIG='{"sasl.password": "' + PASSWORD + '",}')
    with pytest.raises(ValueError, match="KAFKA_CLIENT_CONFIG is not valid JSON") as bad:
        Settings().kafka_client_config()
    assert PASSWORD not in str(bad.value)


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"RECOVERY_KAFKA_SASL_PASSWORD": PASSWORD}, "RECOVERY_KAFKA_SASL_USERNAME"),
        (
            {k: v for k, v in SECURED.items() if k != "RECOVERY_KAFKA_SASL_MECHANISM"},
            "RECOVERY_KAFKA_SASL_MECHANISM",
        ),
        (
            {k: v for k, v in SECURED.items() if k != "RECOVERY_KAFKA_SECURITY_PROTOCOL"},
            "RECOVERY_KAFKA_SECURITY_PROTOCOL",
        ),
        ({**SECURED, "RECOVERY_KAFKA_SECURITY_PROTOCOL": "SSL"}, "SASL_SSL"),
    ],
)
def test_a_half_set_login_is_refused_naming_what_is_missing_not_the_password(env, given, named):
    env(**given)
    with pytest.raises(ValidationError, match=named) as refused:
        Settings()
    assert PASSWORD not in str(refused.value)


def test_a_missing_ca_file_is_refused_naming_the_setting(env, tmp_path):
    env(RECOVERY_KAFKA_SSL_CA_LOCATION=tmp_path / "nowhere.pem")
    with pytest.raises(ValidationError, match="RECOVERY_KAFKA_SSL_CA_LOCATION"):
        Settings()


def test_protocol_and_mechanism_are_case_insensitive(env):
    env(**{**SECURED, "RECOVERY_KAFKA_SECURITY_PROTOCOL": "sasl_ssl"})
    assert Settings().kafka_client_config()["security.protocol"] == "SASL_SSL"


def test_the_password_is_hidden_in_the_settings_repr_and_dumps(env):
    env(**SECURED, KAFKA_CLIENT_CONFIG=json.dumps({"ssl.key.password": "key-pw-1234"}))
    settings = Settings()
    shown = [repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump())]
    for text in shown:
        assert PASSWORD not in text and "key-pw-1234" not in text
    assert settings.kafka_client_config()["ssl.key.password"] == "key-pw-1234"


def test_redaction_hides_every_secret_of_a_client_config_and_of_options(caplog):
    config = {
        "bootstrap.servers": "broker:9093",
        "sasl.username": "alice",
        "sasl.password": PASSWORD,
        "ssl.key.password": "k1",
        "ssl.keystore.password": "k2",
        "sasl.oauthbearer.client.secret": "k3",
        "kafka.sasl.password": "k4",  # a source / sink option
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----",
    }
    shown = redacted(config)
    assert shown["bootstrap.servers"] == "broker:9093" and shown["sasl.username"] == "alice"
    hidden = [k for k in config if k not in ("bootstrap.servers", "sasl.username")]
    assert all(shown[k] == REDACTED for k in hidden), shown
    assert not is_secret("ssl.ca.location") and not is_secret("sasl.mechanism")
    with caplog.at_level(logging.INFO):
        logging.getLogger("recovery_lib.test").info("client config: %s", redacted(config))
        json.dumps({"kafka": redacted(config)})
    assert PASSWORD not in caplog.text and "k4" not in caplog.text
    assert scrubbed(f"login with {PASSWORD} refused", config) == f"login with {REDACTED} refused"


def test_source_options_do_not_show_the_password(env):
    options = SourceOptions.parse(
        {"subscribe": "bids", "kafka.bootstrap.servers": "b:9093", "kafka.sasl.password": PASSWORD}
    )
    assert options.kafka["sasl.password"] == PASSWORD
    assert PASSWORD not in repr(options)


def test_the_plaintext_environment_empties_every_security_setting(env, ca_file, monkeypatch):
    env(**SECURED, RECOVERY_KAFKA_SSL_CA_LOCATION=ca_file, KAFKA_CLIENT_SASL_KERBEROS_NAME="x")
    for name, value in plaintext_client_environment().items():
        assert value == ""
        monkeypatch.setenv(name, value)
    assert "KAFKA_CLIENT_SASL_KERBEROS_NAME" in plaintext_client_environment()
    assert Settings().kafka_client_config() == {}


# The secured listener of the project's own Kafka node (kafka/apache.py).


def listener(tmp_path: Path, port: int | None = None) -> apache.SecuredListener:
    chain, key = tmp_path / "chain.pem", tmp_path / "key.pem"
    chain.write_text("-----BEGIN CERTIFICATE-----\nAAAA\nBBBB\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nCCCC\n-----END PRIVATE KEY-----\n")
    return apache.SecuredListener("alice", PASSWORD, chain, key, port)


def ports_from(start: int):
    counter = iter(range(start, start + 100))
    return lambda _host: next(counter)


def test_a_secured_layout_gives_each_node_its_own_ports_and_keeps_them_in_layout_json(tmp_path):
    secured = listener(tmp_path, port=9999)
    layout = apache._new_layout(3, "127.0.0.1", ports_from(20000), 9092, secured)
    ports = [p for n in layout.nodes for p in (n.port, n.controller_port, n.secured_port)]
    assert len(set(ports)) == 9 and None not in ports
    assert layout.nodes[0].port == 9092 and layout.nodes[0].secured_port == 9999
    layout.save(tmp_path / "layout.json")
    assert apache.KafkaLayout.load(tmp_path / "layout.json") == layout
    plain = apache._new_layout(1, "127.0.0.1", ports_from(21000), None, None)
    assert plain.nodes[0].secured_port is None
    # A layout.json written before secured listeners existed still loads.
    old = {"cluster_id": "x", "nodes": [{"node_id": 1, "port": 1, "controller_port": 2}]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert apache.KafkaLayout.load(tmp_path / "old.json").nodes[0].secured_port is None


def test_the_secured_listener_s_server_properties(tmp_path):
    secured = listener(tmp_path)
    layout = apache._new_layout(1, "127.0.0.1", ports_from(22000), None, secured)
    node = layout.nodes[0]
    text = apache.server_properties(layout, node, tmp_path, "127.0.0.1", None, secured)
    props = dict(line.split("=", 1) for line in text.splitlines())
    assert props["listeners"].split(",") == [
        f"PLAINTEXT://127.0.0.1:{node.port}",
        f"CONTROLLER://127.0.0.1:{node.controller_port}",
        f"SASL_SSL://127.0.0.1:{node.secured_port}",
    ]
    assert f"SASL_SSL://127.0.0.1:{node.secured_port}" in props["advertised.listeners"]
    assert "SASL_SSL:SASL_SSL" in props["listener.security.protocol.map"].split(",")
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    )
    assert props["listener.name.sasl_ssl.ssl.keystore.type"] == "PEM"
    # One line each, the PEM's line breaks as \n escapes (Java's properties loader undoes them).
    assert props["listener.name.sasl_ssl.ssl.keystore.certificate.chain"] == (
        "-----BEGIN CERTIFICATE-----\\nAAAA\\nBBBB\\n-----END CERTIFICATE-----"
    )
    assert props["listener.name.sasl_ssl.ssl.keystore.key"].startswith(
        "-----BEGIN PRIVATE KEY-----\\nCCCC"
    )
    assert PASSWORD not in text  # the SCRAM user lives in the cluster's metadata, not here
    assert secured.scram_credential == f'SCRAM-SHA-512=[name="alice",password="{PASSWORD}"]'
    assert PASSWORD not in repr(secured)
    plain = apache.server_properties(layout, node, tmp_path, "127.0.0.1", None, None)
    assert "SASL_SSL" not in plain


def test_a_dir_formatted_without_a_secured_listener_or_on_another_port_is_refused(tmp_path):
    plain = apache._new_layout(1, "127.0.0.1", ports_from(23000), None, None)
    with pytest.raises(BrokerStartError, match="formatted without a secured listener"):
        apache._check_secured(plain, listener(tmp_path), tmp_path)
    secured = apache._new_layout(1, "127.0.0.1", ports_from(24000), None, listener(tmp_path))
    apache._check_secured(secured, listener(tmp_path), tmp_path)  # no port asked: any
    with pytest.raises(BrokerStartError, match="recorded its secured listener on port"):
        apache._check_secured(secured, listener(tmp_path, port=1), tmp_path)


def test_a_user_or_password_the_format_tool_cannot_quote_is_refused(tmp_path):
    with pytest.raises(BrokerStartError):
        apache.SecuredListener("alice", 'pa"ss', tmp_path / "c", tmp_path / "k")


def test_a_sasl_protocol_from_the_pass_through_serves_the_typed_login(env):
    login = {k: v for k, v in SECURED.items() if k != "RECOVERY_KAFKA_SECURITY_PROTOCOL"}
    env(**login, KAFKA_CLIENT_SECURITY_PROTOCOL="SASL_SSL")
    assert Settings().kafka_client_config()["security.protocol"] == "SASL_SSL"


def test_a_secured_protocol_without_kafka_bootstrap_is_refused_not_sent_to_the_embedded_broker(
    env,
):
    from recovery_lib.kafka.clients import resolve_bootstrap
    from recovery_lib.kafka.exceptions import NoBrokerConfigured

    env(**SECURED)
    with pytest.raises(NoBrokerConfigured, match="KAFKA_BOOTSTRAP is unset"):
        resolve_bootstrap(Settings())
