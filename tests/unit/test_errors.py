"""One root for what the library refuses (errors.py): every package's own error derives from
RecoveryError, keeps the built-in base callers catch today, and the ``recovery`` script turns
it into one line and an exit code."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from recovery_lib.chaos.cluster import ClusterNotStarted
from recovery_lib.cli.main import EXIT_CONFIGURATION, EXIT_UNAVAILABLE, exit_code
from recovery_lib.errors import (
    ConfigurationError,
    JobError,
    JobFailed,
    NotStarted,
    OracleError,
    ProtocolError,
    RecoveryError,
    ReportError,
    SparkUnavailable,
)
from recovery_lib.io.exceptions import BadFenceHeader, InvalidSinkOption, IOLayerError
from recovery_lib.kafka.exceptions import (
    KafkaLayerError,
    NoBrokerConfigured,
    RecordsNotAcknowledged,
    RecordsUnreadable,
)
from recovery_lib.modes.registry import UnknownMode
from recovery_lib.runtime.launch import LaunchRefused
from recovery_lib.verify.schema import SchemaError

ROOT = Path(__file__).resolve().parents[2] / "recovery_lib"
# Raised on purpose inside Spark tasks by the fault injector: they are the faults, not refusals.
INJECTED = {"InjectedTaskFailure", "PoisonedInput"}
BUILT_IN = {"Exception", "RuntimeError", "ValueError", "KeyError", "TypeError", "OSError"}


def test_no_error_of_the_library_skips_the_root() -> None:
    strays = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or node.name in INJECTED | {"RecoveryError"}:
                continue
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            if bases and set(bases) <= BUILT_IN:
                strays.append(f"{path.relative_to(ROOT.parent)}: {node.name}")
    assert strays == [], "derive these from recovery_lib.errors.RecoveryError"


@pytest.mark.parametrize(
    "error, also",
    [
        (IOLayerError, RuntimeError),
        (InvalidSinkOption, ValueError),
        (BadFenceHeader, ValueError),
        (NoBrokerConfigured, RuntimeError),
        (UnknownMode, ValueError),
        (SchemaError, ValueError),
        (ProtocolError, RuntimeError),
        (LaunchRefused, ValueError),
        (ReportError, ValueError),
        (JobFailed, RuntimeError),
        (NotStarted, RuntimeError),
        (SparkUnavailable, RuntimeError),
        (RecordsNotAcknowledged, RuntimeError),
        (RecordsUnreadable, RuntimeError),
        (ClusterNotStarted, RuntimeError),
    ],
)
def test_each_package_root_is_a_recovery_error_and_keeps_its_builtin_base(error, also) -> None:
    assert issubclass(error, RecoveryError) and issubclass(error, also)


def test_exit_codes_say_what_kind_of_fix() -> None:
    assert exit_code(UnknownMode("no mode x")) == EXIT_CONFIGURATION
    assert exit_code(NoBrokerConfigured("start one")) == EXIT_UNAVAILABLE
    assert exit_code(RecordsNotAcknowledged("check the broker is up")) == EXIT_UNAVAILABLE
    assert exit_code(LaunchRefused("--input x=y: no input x")) == EXIT_CONFIGURATION
    assert exit_code(OracleError("bad schema")) == 1
    assert isinstance(KafkaLayerError("x"), RecoveryError)
    assert issubclass(ConfigurationError, ValueError)


def test_the_script_prints_one_line_for_a_refusal(tmp_path) -> None:
    """A RecoveryError no command handled: one line naming the fix, its exit code, and no
    traceback (here a mode the registry does not know, from a command that lets it through)."""
    script = (
        "import sys, typer\n"
        "import recovery_lib.cli.main as m\n"
        "from recovery_lib.modes.registry import get_mode\n"
        "@m.app.command('refuse')\n"
        "def refuse() -> None:\n"
        "    get_mode('no-such-mode')\n"
        "sys.argv = ['recovery', 'refuse']\n"
        "m.run()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == EXIT_CONFIGURATION, done.stdout + done.stderr
    assert done.stdout.startswith("error:") and "no-such-mode" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


# Checks no user can reach: each guards what the library's own code passes (path, function).
INTERNAL = {
    ("cec/windows.py", "Accumulator.result"),  # AggregateSpec refused an unknown name already
    ("chaos/disk.py", "UnwritableTree.freeze"),  # its callers ask frozen() first
    ("metrics/store.py", "MetricsStore.add"),  # rows of the library's own writers
    ("modes/registry.py", "register"),  # the registration lines of that module
    ("protocols/checkpoints.py", "CheckpointGraph.__init__"),  # each stage's own checkpoints
    ("protocols/checkpoints.py", "CheckpointGraph.at"),  # an index taken from the graph
    ("reproduce/measured.py", "Measured.__post_init__"),  # an extractor's own row
    ("reproduce/papers.py", "_load"),  # the repository's table of paper numbers
    ("reproduce/report.py", "compare"),  # extractors against that table
}
# Pydantic's contract: a validator raises ValueError, which pydantic wraps in ValidationError;
# the loaders turn that into a ConfigurationError (load_jobs, load_pipelines).
VALIDATORS = {"field_validator", "model_validator"}


Scope = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def _bare_raises(path: Path) -> list[tuple[int, str, set[str]]]:
    """(line, qualified function, decorators of the functions around it) of each
    ``raise ValueError(...)`` or ``raise RuntimeError(...)`` in ``path``."""
    found: list[tuple[int, str, set[str]]] = []

    def decorators(scope: list[Scope]) -> set[str]:
        used = (d.func if isinstance(d, ast.Call) else d for f in scope for d in f.decorator_list)
        return {getattr(d, "id", getattr(d, "attr", "")) for d in used}

    def visit(node: ast.AST, scope: list[Scope]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, Scope):
                visit(child, [*scope, child])
                continue
            if isinstance(child, ast.Raise) and isinstance(child.exc, ast.Call):
                called = child.exc.func
                if isinstance(called, ast.Name) and called.id in ("ValueError", "RuntimeError"):
                    name = ".".join(f.name for f in scope)
                    functions = [f for f in scope if not isinstance(f, ast.ClassDef)]
                    found.append((child.lineno, name, decorators(functions)))
            visit(child, scope)

    visit(ast.parse(path.read_text()), [])
    return found


def test_the_library_raises_its_own_errors_not_bare_value_or_runtime_errors() -> None:
    """What a user can cause raises a RecoveryError subclass (which keeps its built-in base);
    a bare ``ValueError``/``RuntimeError`` is left only where the lists above say why."""
    strays = []
    for path in sorted(ROOT.rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        for line, function, decorators in _bare_raises(path):
            if (where, function) in INTERNAL or decorators & VALIDATORS:
                continue
            strays.append(f"recovery_lib/{where}:{line} ({function})")
    assert strays == [], "raise the package's error (or one of recovery_lib/errors.py) instead"


# -- a user's mistakes, each refused with its type --------------------------------------------


def test_a_malformed_launch_pair_is_a_refused_launch() -> None:
    from recovery_lib.runtime.launch import parse_pairs

    with pytest.raises(LaunchRefused, match="--param takes name=value") as refused:
        parse_pairs(["rate"], "--param")
    assert isinstance(refused.value, ValueError)


def test_cec_settings_that_cannot_work_name_the_variables() -> None:
    from recovery_lib.cec.policy import CheckpointPolicy

    with pytest.raises(ConfigurationError, match="RECOVERY_CEC_INTERVAL_MS"):
        CheckpointPolicy(interval_ms=200.0, period_ms=100.0)


def test_causal_settings_that_cannot_work_name_the_variable(tmp_path) -> None:
    from recovery_lib.causal.log import CausalConfig

    with pytest.raises(ConfigurationError, match="RECOVERY_CAUSAL_STORAGE"):
        CausalConfig(job="j", state_dir=str(tmp_path), storage="disk")


def test_an_experiment_option_out_of_range_is_a_refused_launch() -> None:
    from recovery_lib.experiment.runner import ExperimentConfig

    with pytest.raises(LaunchRefused, match="--rate must be positive"):
        ExperimentConfig(rate=0).validate()


def test_an_unknown_sink_mode_is_an_invalid_sink_option() -> None:
    from recovery_lib.io.sinks.modes import sink_mode

    with pytest.raises(InvalidSinkOption, match="choose one of"):
        sink_mode("exactly-once")


def test_a_job_that_cannot_be_imported_is_a_job_error() -> None:
    from recovery_lib.job.spec import load_job

    with pytest.raises(JobError, match="PYTHONPATH"):
        load_job("no_such_package_of_jobs.job:JOB")


def test_job_commands_say_in_one_line_what_they_refuse(tmp_path, settings_env, monkeypatch) -> None:
    """``recovery job``: a job never started, an unknown job and a settings variable pydantic
    refuses each end with exit 1 and one ``error:`` line, not a traceback."""
    from typer.testing import CliRunner

    from recovery_lib.cli.job_cmd import job_app
    from recovery_lib.settings import get_settings

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: t, job: q1}\n")
    settings_env(RECOVERY_HOME=tmp_path / "home", RECOVERY_JOBS_FILE=jobs)
    runner = CliRunner()
    never = runner.invoke(job_app, ["status", "t"])
    assert never.exit_code == 1 and "never started" in never.output, never.output
    unknown = runner.invoke(job_app, ["start", "nope"])
    assert unknown.exit_code == 1 and "no job 'nope'" in unknown.output, unknown.output
    monkeypatch.setenv("RECOVERY_STATE_STORE", "no-such-store")  # read by the next command
    get_settings.cache_clear()
    bad_setting = runner.invoke(job_app, ["list"])
    assert bad_setting.exit_code == 1 and "state_store" in bad_setting.output, bad_setting.output
