"""The package tree is the architecture: each floor imports only the floors below it
(tests/unit/architecture.py FLOORS), no module file imports itself through others, no module
but the registry's compares recovery mode names, library code logs instead of printing, and
mechanisms reach io through its hooks (io/hooks.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from recovery_lib.io.cut_policies import make_cut_policy
from recovery_lib.io.exceptions import InvalidSinkOption, InvalidSourceOption, WriterFenced
from recovery_lib.io.sinks.kafka_sink import SinkOptions
from tests.unit import architecture

ROOT = Path(__file__).resolve().parents[2] / "recovery_lib"
MECHANISMS = ("ha", "causal", "runtime", "job", "experiment", "ops", "bench", "cli", "verify")


def imported_packages(package: str) -> dict[str, set[str]]:
    """Per module file of ``package``: the recovery_lib subpackages it imports (anywhere)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[str(path.relative_to(ROOT))] = {
            n.split(".")[1] for n in names if n.startswith("recovery_lib.") and n.count(".") >= 1
        }
    return found


def test_io_imports_no_mechanism():
    offenders = {
        module: sorted(set(packages) & set(MECHANISMS))
        for module, packages in imported_packages("io").items()
        if set(packages) & set(MECHANISMS)
    }
    assert imported_packages("io") and offenders == {}


def test_every_package_sits_on_a_floor():
    packages = {architecture.package_of(m) for m, _ in architecture.modules()} - {"__init__"}
    placed = {p for floor in architecture.FLOORS for p in floor}
    assert packages - placed == set(), "add the new package to architecture.FLOORS"


def test_no_import_runs_up_the_floors():
    assert architecture.up_imports() == []


def test_no_module_files_import_each_other_in_a_circle():
    assert architecture.file_circles() == []


def test_only_the_registry_compares_recovery_mode_names():
    assert architecture.mode_comparisons() == []


def test_library_code_logs_and_only_the_cli_prints():
    assert architecture.prints() == []


def test_the_measures_can_fail(tmp_path):
    """Each measure finds what it looks for in a made-up tree."""
    pkg = tmp_path / "recovery_lib"
    for name, text in {
        "kafka/a.py": "from recovery_lib.io.b import x\n",  # kafka is below io
        "io/b.py": "x = 1\nimport recovery_lib.io.c\n",
        "io/c.py": "import recovery_lib.io.b\n",  # b <-> c
        "ops/d.py": "def f(m):\n    print(m)\n    return m == 'kazoo'\n",
        "ops/e.py": "if __name__ == '__main__':\n    print('a program may')\n",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    assert architecture.up_imports(pkg) == ["kafka/a.py:1 -> recovery_lib.io.b"]
    assert architecture.file_circles(pkg) == [("recovery_lib.io.b", "recovery_lib.io.c")]
    assert architecture.mode_comparisons(pkg) == ["ops/d.py:3"]
    assert architecture.prints(pkg) == ["ops/d.py:2"]


def test_a_mechanisms_cut_policy_plugs_in_by_name(tmp_path):
    from recovery_lib.ha.standby.follow import FOLLOW_POLICY, FollowLog

    policy = make_cut_policy(
        FOLLOW_POLICY, {"followLog": str(tmp_path), "followCheckpoint": str(tmp_path)}
    )
    assert isinstance(policy, FollowLog)
    with pytest.raises(InvalidSourceOption, match="not a CutPolicy"):
        make_cut_policy("recovery_lib.io.hooks:load_hook", {})
    with pytest.raises(InvalidSourceOption, match="cannot be loaded"):
        make_cut_policy("no.such.module:Policy", {})


def test_the_sinks_write_guard_is_the_fencing_hook(tmp_path):
    from recovery_lib.ha.fencing import EPOCH_GUARD_HOOK, EpochStore, FencedError

    store = tmp_path / "epochs"
    EpochStore(store).advance("primary")
    options = SinkOptions.parse(
        {"topic": "t", "kafka.bootstrap.servers": "127.0.0.1:9", "epoch": "1",
         "writeGuard": EPOCH_GUARD_HOOK, "epochStore": str(store)}
    )  # fmt: skip
    guard = options.guard()
    guard.check("write")  # epoch 1 is current
    EpochStore(store).advance("standby")
    with pytest.raises(WriterFenced, match="epoch 2 was taken"):
        guard.check("write")
    assert issubclass(FencedError, WriterFenced)
    plain = SinkOptions.parse({"topic": "t", "kafka.bootstrap.servers": "127.0.0.1:9"})
    assert plain.guard() is None and plain.fault() is None
    with pytest.raises(InvalidSinkOption, match="module:attr"):
        SinkOptions.parse(
            {"topic": "t", "kafka.bootstrap.servers": "x:9", "writeFault": "nocolon"}
        ).fault()
