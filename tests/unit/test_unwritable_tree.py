"""A checkpoint tree that refuses writes for a while, then takes them again exactly as before
(as root through chattr +i, otherwise through the write permission)."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from recovery_lib.chaos.disk import UnwritableTree


def test_a_frozen_tree_refuses_new_entries_and_thaws_on_time(tmp_path: Path) -> None:
    root = tmp_path / "ck"
    (root / "offsets").mkdir(parents=True)
    (root / "offsets" / "0").write_text("v1")
    mode_before = stat.S_IMODE((root / "offsets").stat().st_mode)
    tree = UnwritableTree()
    # Frozen for longer than any stall of this thread: the refusals below cannot race the thaw.
    frozen = tree.freeze(root, 300)
    try:
        assert frozen.directories == 2 and tree.frozen()
        with pytest.raises(PermissionError):
            (root / "offsets" / "1").write_text("v1")  # Spark's next offset log entry
        with pytest.raises(PermissionError):
            (root / "commits").mkdir()
    finally:
        tree.stop()  # never leave a tree frozen, even when an assertion failed
    assert not tree.frozen()
    (root / "offsets" / "1").write_text("v1")  # writable again
    (root / "commits").mkdir()
    assert stat.S_IMODE((root / "offsets").stat().st_mode) == mode_before

    # A short freeze ends by itself, no earlier than asked.
    tree = UnwritableTree()
    frozen = tree.freeze(root, 0.5)
    try:
        deadline = time.monotonic() + 10
        while tree.frozen() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not tree.frozen() and frozen.thawed_ms is not None
        assert frozen.thawed_ms - frozen.frozen_ms >= 500
        (root / "offsets" / "2").write_text("v1")
        assert stat.S_IMODE((root / "offsets").stat().st_mode) == mode_before
    finally:
        tree.stop()
    with pytest.raises(RuntimeError, match="thaw it first"):
        tree.freeze(root, 5)
        tree.freeze(root, 5)
    tree.stop()
