"""One root for what the library refuses (errors.py): every package's own error derives from
RecoveryError, keeps the built-in base callers catch today, and the ``recovery`` script turns
it into one line and an exit code."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from recovery_lib.cli.main import EXIT_CONFIGURATION, EXIT_UNAVAILABLE, exit_code
from recovery_lib.errors import ConfigurationError, OracleError, ProtocolError, RecoveryError
from recovery_lib.io.exceptions import InvalidSinkOption, IOLayerError
from recovery_lib.kafka.exceptions import KafkaLayerError, NoBrokerConfigured
from recovery_lib.modes.registry import UnknownMode
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
        (NoBrokerConfigured, RuntimeError),
        (UnknownMode, ValueError),
        (SchemaError, ValueError),
        (ProtocolError, RuntimeError),
    ],
)
def test_each_package_root_is_a_recovery_error_and_keeps_its_builtin_base(error, also) -> None:
    assert issubclass(error, RecoveryError) and issubclass(error, also)


def test_exit_codes_say_what_kind_of_fix() -> None:
    assert exit_code(UnknownMode("no mode x")) == EXIT_CONFIGURATION
    assert exit_code(NoBrokerConfigured("start one")) == EXIT_UNAVAILABLE
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
