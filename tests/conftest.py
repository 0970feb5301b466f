"""Shared fixtures: one embedded broker and one SparkSession per test session."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

# Property tests check behaviour, not speed: a 2-core machine running Spark beside them can
# stall any example past hypothesis' default 200 ms deadline.
hypothesis_settings.register_profile(
    "recovery", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("recovery")


@pytest.fixture(scope="session")
def recovery_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("recovery-home")
    os.environ["RECOVERY_HOME"] = str(home)
    from recovery_lib.settings import reload_settings

    reload_settings()
    return home


@pytest.fixture(scope="session")
def kafka_bootstrap(recovery_home: Path) -> Iterator[str]:
    """The embedded broker, or the external cluster named by KAFKA_BOOTSTRAP."""
    from recovery_lib.settings import reload_settings

    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    from recovery_lib.kafka.broker import EmbeddedBroker

    broker = EmbeddedBroker()
    state = broker.start()
    # Subprocesses and Spark workers inherit the environment: point them at this broker.
    os.environ["KAFKA_BOOTSTRAP"] = state.bootstrap
    reload_settings()
    try:
        yield state.bootstrap
    finally:
        from recovery_lib.io.client_cache import close_all

        close_all()  # while the broker is up: no client of this process retries a dead port
        os.environ.pop("KAFKA_BOOTSTRAP", None)
        broker.stop()
        reload_settings()


@pytest.fixture()
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Set environment variables for one test, with the cached settings reloaded now and
    again after the test (a monkeypatched variable alone would leave stale settings behind)."""
    from recovery_lib.settings import reload_settings

    def set_env(**values: object) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, str(value))
        reload_settings()

    yield set_env
    monkeypatch.undo()
    reload_settings()


@pytest.fixture()
def topic_name() -> Iterator[str]:
    yield f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def admin(kafka_bootstrap: str):  # noqa: ANN201
    from recovery_lib.kafka.admin import TopicAdmin

    return TopicAdmin()


@pytest.fixture(scope="session")
def spark(kafka_bootstrap: str):  # noqa: ANN201
    from recovery_lib.spark.session import build_session

    session = build_session("tests")
    yield session
    session.stop()


FAILURE_LOG = Path(__file__).resolve().parent.parent / "reports" / "test-failures.log"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Append each failure's report as it happens: a long run stopped before its summary
    (a session's time out, a killed CI job) still says why its failed tests failed."""
    if report.failed:
        FAILURE_LOG.parent.mkdir(parents=True, exist_ok=True)
        with FAILURE_LOG.open("a") as log:
            log.write(f"==== {report.nodeid} ({report.when}) failed\n{report.longreprtext}\n\n")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """pytest's summary is the last thing a run prints: the session's Spark gateway closes its
    py4j connections while the interpreter exits, and py4j logs each one at INFO (to streams
    pytest already closed, which logging then reports as an error)."""
    import logging

    for name in ("py4j", "py4j.clientserver", "py4j.java_gateway"):  # a level set on each
        logging.getLogger(name).setLevel(logging.WARNING)
    # py4j's finalizer thread also logs through the root logger ("Exception while sending
    # command", when the JVM is already gone); whatever still logs after the summary must not
    # print "--- Logging error ---" tracebacks about the closed streams.
    logging.getLogger().setLevel(logging.WARNING)
    logging.raiseExceptions = False
