"""The install step fetches Spark's Kafka connector at pyspark's version, and every session
finds its jars (spark/session.py kafka_connector_jars)."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark

from recovery_lib.settings import get_settings
from recovery_lib.spark.session import kafka_connector_jars

ROOT = Path(__file__).resolve().parents[2]


def test_the_connector_is_pinned_to_pyspark_s_version() -> None:
    pom = (ROOT / "recovery_lib" / "spark" / "kafka_connector_pom.xml").read_text()
    pinned = re.search(r"<spark.version>([^<]+)</spark.version>", pom)
    assert pinned and pinned.group(1) == pyspark.__version__


def test_the_install_step_copies_the_connector_and_what_pyspark_lacks() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "kafka_connector_pom.xml" in makefile
    for artifact in ("spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13",
                     "kafka-clients", "commons-pool2"):  # fmt: skip
        assert artifact in makefile, artifact


def test_sessions_find_the_jars_where_the_settings_say(tmp_path, settings_env) -> None:
    (tmp_path / "b.jar").write_bytes(b"")
    (tmp_path / "a.jar").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    settings_env(RECOVERY_SPARK_KAFKA_JARS_DIR=tmp_path)
    assert kafka_connector_jars(get_settings()) == [
        str((tmp_path / "a.jar").resolve()),
        str((tmp_path / "b.jar").resolve()),
    ]
    settings_env(RECOVERY_SPARK_KAFKA_JARS_DIR=tmp_path / "missing")
    assert kafka_connector_jars(get_settings()) == []
