"""The soak, ten minutes of it: q3 under the whole stack (Airflow launches it, the chaos DAG hurts
it every minute, GC every three), its own broker behind the fault proxy; at the end the
consistency DAG judges the whole output and everything the soak started is gone."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(1800)]


def test_a_ten_minute_soak_under_chaos_stays_exactly_once_and_leaves_nothing_running(
    tmp_path, recovery_home, monkeypatch, settings_env
):
    from recovery_lib.ops import daemon
    from recovery_lib.ops.soak import SoakConfig, run_soak
    from recovery_lib.ops.stack import COMPONENTS, OpsStack
    from recovery_lib.settings import get_settings

    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)  # the soak brings its own broker
    settings_env()  # reloads now, and again once the variable is back after the test
    report = tmp_path / "soak"
    cfg = SoakConfig(
        job="q3", hours=10 / 60, rate=100.0, sample_every_s=20.0, chaos_every_min=1.0,
        gc_every_min=3.0, consistency_every_min=600.0, fault_s=6.0, report=str(report),
    )  # fmt: skip
    lines: list[str] = []
    result = run_soak(cfg, lines.append)

    assert result["verdict"] == "consistent", (result.get("consistency"), lines[-20:])
    assert result["guarantee"] == "exactly-once", result["consistency"]
    assert result["chaos"]["fired"] >= 3, result["chaos"]
    assert result["gc_passes"] >= 2, result
    samples = result["samples"]
    assert len(samples) >= 25, len(samples)
    seen = {name for s in samples for name in s["rss_mb"]}
    assert {"job", "daemon", "broker", "scheduler", "api-server", "dashboard"} <= seen, seen
    assert all(s["sizes"]["checkpoint_bytes"] > 0 for s in samples[3:])
    assert set(result["growth_last_hour"]) >= {"job", "checkpoint_bytes"}
    assert report.with_suffix(".json").exists() and report.with_suffix(".png").exists()
    stack = OpsStack(get_settings())
    assert [c for c in COMPONENTS if stack.running_pid(c) is not None] == []
    with pytest.raises(ValueError):  # its jobs file went with it: the job is not configured
        daemon.check(result["config"]["job_name"])
