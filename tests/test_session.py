"""The session every job builds: settings that shorten a restart reach Spark."""

from __future__ import annotations

import pytest

from recovery_lib.settings import get_settings

pytestmark = pytest.mark.spark


def test_state_snapshots_are_uploaded_at_the_configured_interval(spark) -> None:
    """A restart replays the RocksDB changelog written after the newest uploaded snapshot;
    Spark's maintenance uploads one per interval (default 60 s, ours 10 s)."""
    interval = get_settings().spark_state_maintenance_interval_s
    assert interval < 60
    assert spark.conf.get("spark.sql.streaming.stateStore.maintenanceInterval") == f"{interval:g}s"


def test_checkpoints_go_through_the_filesystem_api_and_the_jvm_compiles_with_c1(spark) -> None:
    """Both cut a micro-batch's driver CPU (docs/replication.md): FileContext starts a
    `readlink` or `chmod` process per checkpoint file; C2 keeps compiling Spark's planner."""
    assert get_settings().spark_checkpoint_file_api == "filesystem"
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path("file:///tmp/recovery-session-test")
    manager = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    chosen = manager.create(path, spark._jsparkSession.sessionState().newHadoopConf())
    assert chosen.getClass().getSimpleName() == "FileSystemBasedCheckpointFileManager"
    flags = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in flags
