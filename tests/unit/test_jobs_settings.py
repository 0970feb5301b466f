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


def test_the_operations_of_two_jobs_each_use_their_own_settings(tmp_path):
    """GC, shipping and the replication view of one process, two settings: each job's files,
    metrics store and standby are found under its own home."""
    from recovery_lib.metrics.store import read_frame
    from recovery_lib.ops.gc import gc_job
    from recovery_lib.ops.replication import newest_state
    from recovery_lib.ops.shipping import NoStandby, shipper_for

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: s, job: q1, mode: standby}\n")
    homes = {h: Settings(home=tmp_path / h, jobs_file=jobs) for h in ("a", "b")}
    for h, settings in homes.items():
        result = gc_job("s", dry_run=True, settings=settings)
        assert result["plan"]["checkpoint"].startswith(str(tmp_path / h))
        gcs = read_frame(tmp_path / h / "metrics.duckdb", "SELECT job FROM gc_runs")
        assert gcs["job"].tolist() == ["s"]
        with pytest.raises(NoStandby, match=str(tmp_path / h / "jobs" / "s")):
            shipper_for("s", settings)
        assert newest_state("s", settings) is None


def test_each_jobs_supervisor_takes_its_tunables_from_the_jobs_settings(tmp_path):
    """The daemon's supervisors read their settings from the job's request, not from the
    process: a spare for one job and not the other, each pair its own lease."""
    from recovery_lib.runtime.supervisor import ProcessSpec

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "jobs:\n  - {name: n, job: q1, mode: native}\n  - {name: s, job: q1, mode: standby}\n"
    )
    a = Settings(home=tmp_path / "a", supervisor_spare=True, standby_lease_timeout_s=3.0)
    b = Settings(home=tmp_path / "b", supervisor_spare=False, standby_lease_timeout_s=7.0)
    made = {}
    for tag, settings in (("a", a), ("b", b)):
        for name, job in load_jobs(jobs, settings).items():
            spec = ProcessSpec.for_job(job.launch())
            made[tag, name] = job.recovery_mode.supervisor(
                spec, job.mode_request, job.supervisor_home, None, None
            )
    assert made["a", "n"].spare_wanted and not made["b", "n"].spare_wanted
    assert made["a", "s"].lease_timeout_s == 3.0 and made["b", "s"].lease_timeout_s == 7.0
    assert made["a", "n"].settings is a and made["b", "s"].settings is b


def test_two_experiments_each_use_their_own_settings(tmp_path):
    """An experiment takes its settings from its caller: its metrics store, its broker and the
    faulty run's mode request (the supervisors' tunables) follow them, not the process's."""
    from recovery_lib.experiment.runner import Experiment, ExperimentConfig
    from recovery_lib.kafka.exceptions import BrokerUnreachable

    cfg = ExperimentConfig(query="q1", fail="driver-kill", duration_s=30, fail_at_s=10)
    for h, port in (("a", 9), ("b", 10)):  # nothing listens there
        settings = Settings(
            home=tmp_path / h,
            kafka_bootstrap=f"127.0.0.1:{port}",
            kafka_request_timeout_s=0.5,
            supervisor_spare=h == "b",
        )
        with pytest.raises(BrokerUnreachable, match=f"127.0.0.1:{port} did not answer"):
            Experiment(cfg, progress=lambda _m: None, settings=settings)
        assert (tmp_path / h / "metrics.duckdb").exists()
        request = cfg.request(settings)
        assert request.settings is settings
        assert request.spare_process is (h == "b")
