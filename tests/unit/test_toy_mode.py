"""Adding a recovery mode is one module and one ``register`` line (recovery_lib/modes): a toy
mode, defined and registered here and nowhere else, is taken by the experiment's command line,
the jobs file and its daemon's supervisor, and the ``recovery_experiment`` DAG's form."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from recovery_lib.modes import MODES, ModeRequest, get_mode, mode_names, register
from recovery_lib.modes.native import NativeMode
from recovery_lib.runtime.supervisor import Supervisor

ROOT = Path(__file__).resolve().parents[2]


class ToyMode(NativeMode):
    """Native recovery under another name, with a refusal of its own and a supervisor that
    says it was asked."""

    name = "toy"
    summary = "a test's mode: native recovery, counting the supervisors it builds"
    outage_rank = None
    built: list[Path] = []

    def problem(self, request: ModeRequest) -> str | None:
        if "pause" in request.failures:
            return "mode toy does not pause: use driver-kill"
        return super().problem(request)

    def supervisor(self, spec, request, workdir, store, run_id):  # noqa: ANN001, ANN201
        self.built.append(workdir)
        return super().supervisor(spec, request, workdir, store, run_id)


@pytest.fixture()
def toy():
    mode = register(ToyMode())
    ToyMode.built = []
    try:
        yield mode
    finally:
        MODES.pop(mode.name)


def test_the_registry_names_the_toy_mode(toy):
    assert get_mode("toy") is toy and "toy" in mode_names(replicated=False)


def test_the_experiment_command_line_reaches_the_toy_mode(toy, recovery_home):
    from recovery_lib.cli.main import app

    runner = CliRunner()
    refused = runner.invoke(app, ["experiment", "run", "--mode", "toy", "--fail", "pause"])
    assert refused.exit_code == 1
    assert "mode toy does not pause: use driver-kill" in refused.output
    unknown = runner.invoke(app, ["experiment", "run", "--mode", "toyz"])
    assert unknown.exit_code == 1 and "toy" in unknown.output  # the modes there are


def test_a_jobs_file_entry_runs_under_the_toy_mode(toy, tmp_path, settings_env):
    from recovery_lib.ops.config import load_jobs
    from recovery_lib.runtime.supervisor import ProcessSpec

    settings_env(RECOVERY_HOME=tmp_path / "home")
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: t, job: q1, mode: toy}\n")
    job = load_jobs(jobs)["t"]
    assert job.recovery_mode is toy and not job.process_mode.causal
    # The daemon's supervisor, as run_daemon builds it.
    sup = toy.supervisor(
        ProcessSpec.for_job(job.launch()), job.mode_request, job.supervisor_home, None, None
    )
    assert isinstance(sup, Supervisor) and ToyMode.built == [job.supervisor_home]
    jobs.write_text("jobs:\n  - {name: t, job: q1, mode: toy, process: causal}\n")
    with pytest.raises(ValueError, match="mode toy runs its processes native"):
        load_jobs(jobs)


def test_the_experiment_dag_offers_the_toy_mode(toy):
    spec = importlib.util.spec_from_file_location(
        "toy_dag", ROOT / "dags" / "recovery_experiment.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert "toy" in module.dag.params.get_param("mode").schema["enum"]
