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
