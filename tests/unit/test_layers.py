"""The package tree is the architecture: lower layers know nothing of the mechanisms built on
them, and mechanisms reach io through its hooks (io/hooks.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from recovery_lib.io.cut_policies import make_cut_policy
from recovery_lib.io.exceptions import InvalidSinkOption, InvalidSourceOption, WriterFenced
from recovery_lib.io.sinks.kafka_sink import SinkOptions

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
