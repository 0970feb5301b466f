"""Which driver JVMs map the class-data archive: only an existing archive of this installation,
and only while the setting is on."""

from __future__ import annotations

from pathlib import Path

from recovery_lib.settings import Settings
from recovery_lib.spark.class_archive import archive_path, driver_java_options, java_version


def test_the_archive_is_named_after_spark_java_and_the_jars_place(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    path = archive_path(settings)
    assert path is not None and path.parent == tmp_path / "jvm"
    import pyspark

    assert f"spark-{pyspark.__version__}-java{java_version()}-" in path.name


def test_a_missing_archive_or_the_setting_off_starts_the_jvm_as_before(tmp_path: Path) -> None:
    on = Settings(home=tmp_path, spark_class_archive=True)
    assert driver_java_options(on) is None  # not made yet
    path = archive_path(on)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert driver_java_options(on) == f"-XX:SharedArchiveFile={path}"
    off = Settings(home=tmp_path, spark_class_archive=False)
    assert driver_java_options(off) is None
