"""Checkpoint rewind on synthetic checkpoints: after it the last committed batch is b and every
state store rebuilds the state after b; it moves files (undo = move back), never deletes them;
it refuses, touching nothing, when GC has removed what b needs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery_lib.runtime.checkpoint import last_committed
from recovery_lib.runtime.checkpoint_gc import run_gc
from recovery_lib.runtime.rewind import RewindRefused, plan_rewind, rewind
from tests.unit.test_gc import make_checkpoint, rebuildable

STORES = ("state/0/0", "state/0/1/left-keyToNumValues")


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}


def test_rewind_moves_the_newer_batches_aside_and_verifies(tmp_path):
    ck = make_checkpoint(tmp_path, committed=9, snapshot_every=4)
    before = tree(ck)
    plan = rewind(ck, 5)
    assert last_committed(ck) == 5
    assert sorted(int(p.name) for p in (ck / "offsets").iterdir() if p.name.isdigit())[-1] == 5
    for store in STORES:
        assert rebuildable(ck / store, 6)
        assert not (ck / store / "7.delta").exists() and (ck / store / "6.delta").exists()
    moved = Path(plan.moved_to)
    assert (moved / "offsets" / "10").exists()  # the planned, uncommitted batch too: a tail
    assert (moved / "commits" / "9").exists()
    # Undo: moving the files back gives the checkpoint as it was.
    for rel in plan.files:
        shutil.move(str(moved / rel), str(ck / rel))
    assert tree(ck) == before


def test_dry_run_and_refusals_touch_nothing(tmp_path):
    ck = make_checkpoint(tmp_path, committed=9, snapshot_every=4)
    before = tree(ck)
    plan = rewind(ck, 3, dry_run=True)
    assert plan.dry_run and plan.files and plan.moved_to is None and plan.batches_rewound == 6
    with pytest.raises(RewindRefused, match="batch 12 is not committed"):
        rewind(ck, 12)
    run_gc(ck, keep_batches=3)  # GC keeps batches 7..9: batch 3's logs and state are gone
    after_gc = tree(ck)
    with pytest.raises(RewindRefused, match="removed"):
        rewind(ck, 3)
    assert tree(ck) == after_gc
    assert before != after_gc
    with pytest.raises(RewindRefused, match="not a Spark streaming checkpoint"):
        plan_rewind(tmp_path / "nothing", 0)


@settings(max_examples=60, deadline=None)
@given(
    committed=st.integers(0, 20),
    snapshot_every=st.integers(0, 6),
    keep=st.integers(1, 25),
    to=st.integers(0, 20),
    kind=st.sampled_from(["hdfs", "rocksdb"]),
)
def test_after_any_gc_a_rewind_is_refused_or_leaves_a_loadable_checkpoint(
    tmp_path_factory, committed, snapshot_every, keep, to, kind
):
    ck = make_checkpoint(tmp_path_factory.mktemp("rw"), committed, snapshot_every, kind=kind)
    kept = run_gc(ck, keep_batches=keep).plan.oldest_kept_batch
    before = tree(ck)
    try:
        rewind(ck, to)
    except RewindRefused:
        assert tree(ck) == before  # refused: nothing moved
        # ... and only where it has to: past the last commit, or below what GC kept.
        assert to > committed or kept is None or to < kept
        return
    assert last_committed(ck) == to
    for store in STORES:
        assert rebuildable(ck / store, to + 1, kind)


def test_the_cli_rewinds_a_checkpoint_directory_and_says_why_it_refuses(tmp_path):
    import json

    from typer.testing import CliRunner

    from recovery_lib.cli.main import app

    ck = make_checkpoint(tmp_path, committed=6, snapshot_every=3)
    runner = CliRunner()
    dry = runner.invoke(app, ["checkpoint", "rewind", str(ck), "--to-batch", "4", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["batches_rewound"] == 2 and last_committed(ck) == 6
    done = runner.invoke(app, ["checkpoint", "rewind", str(ck), "--to-batch", "4"])
    assert done.exit_code == 0 and last_committed(ck) == 4
    refused = runner.invoke(app, ["checkpoint", "rewind", str(ck), "--to-batch", "5"])
    assert refused.exit_code == 1 and "not committed" in refused.output
