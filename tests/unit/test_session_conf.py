"""What a session adds to Spark's conf for its JVMs and its checkpoint files, by setting."""

from __future__ import annotations

from pathlib import Path

from recovery_lib.settings import Settings
from recovery_lib.spark.session import jvm_and_checkpoint_conf

MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
DRIVER = "spark.driver.extraJavaOptions"
EXECUTOR = "spark.executor.extraJavaOptions"


def _settings(tmp_path: Path, **changes: object) -> Settings:
    return Settings(home=tmp_path, spark_class_archive=False, **changes)


def test_by_default_checkpoints_use_filesystem_and_every_jvm_runs_c1(tmp_path: Path) -> None:
    conf = jvm_and_checkpoint_conf(_settings(tmp_path), {})
    assert conf[MANAGER].endswith(".FileSystemBasedCheckpointFileManager")
    assert conf[DRIVER] == conf[EXECUTOR] == "-XX:TieredStopAtLevel=1"


def test_spark_defaults_add_nothing(tmp_path: Path) -> None:
    settings = _settings(tmp_path, spark_checkpoint_file_api="filecontext", spark_jit="tiered")
    assert jvm_and_checkpoint_conf(settings, {}) == {}


def test_the_callers_options_come_first_and_its_manager_wins(tmp_path: Path) -> None:
    given = {MANAGER: "my.Manager", DRIVER: "-Xss4m", EXECUTOR: "-Xss8m"}
    conf = jvm_and_checkpoint_conf(_settings(tmp_path), given)
    assert MANAGER not in conf  # the caller's stays as given
    assert conf[DRIVER] == "-Xss4m -XX:TieredStopAtLevel=1"
    assert conf[EXECUTOR] == "-Xss8m -XX:TieredStopAtLevel=1"


def test_an_existing_class_archive_is_mapped_by_the_driver_only(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, spark_class_archive=True, spark_jit="tiered")
    assert DRIVER not in jvm_and_checkpoint_conf(settings, {})  # no archive made yet
    from recovery_lib.spark.class_archive import archive_path

    path = archive_path(settings)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    conf = jvm_and_checkpoint_conf(settings, {})
    assert conf[DRIVER] == f"-XX:SharedArchiveFile={path}" and EXECUTOR not in conf
