"""Settings passed in, not read from the process: two jobs files loaded in one process with two
settings (another home, determinants on the output) each keep their own (issue 58 item 2)."""

from __future__ import annotations

import pytest

from recovery_lib.ops.config import get_job, load_jobs
from recovery_lib.settings import Settings


def test_two_jobs_with_different_settings_in_one_process(tmp_path):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: p, job: prices, mode: causal, params: {price_url: x}}\n")
    a = Settings(home=tmp_path / "a", kafka_bootstrap="127.0.0.1:9091")
    b = Settings(home=tmp_path / "b", kafka_bootstrap="127.0.0.1:9092", causal_storage="output")
    job_a, job_b = load_jobs(jobs, a)["p"], get_job("p", jobs, b)
    assert job_a.workdir == tmp_path / "a" / "jobs" / "p"
    assert job_b.checkpoint.is_relative_to(tmp_path / "b")
    assert job_a.causal_config().storage == "kafka"
    assert job_b.causal_config().storage == "output"
    assert job_b.causal_config().state_dir.startswith(str(tmp_path / "b"))
    assert job_b.causal_config().kafka["bootstrap.servers"] == "127.0.0.1:9092"


def test_each_entry_is_checked_with_its_own_settings(tmp_path):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "jobs:\n  - {name: t, job: prices, mode: causal, sink: delta, params: {price_url: x}}\n"
    )
    assert load_jobs(jobs, Settings(home=tmp_path))["t"].table_target is not None
    with pytest.raises(ValueError, match="RECOVERY_CAUSAL_STORAGE=kafka"):
        load_jobs(jobs, Settings(home=tmp_path, causal_storage="output"))
