"""Standby building blocks without Spark: fencing epochs, fence records on the reader side,
checkpoint shipping (cut, incremental, torn copies), and the follow cut policy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from recovery_lib.ha.fencing import FENCE_HEADER, EpochStore, FencedError, FenceFilter
from recovery_lib.ha.standby.follow import FollowLog
from recovery_lib.ha.standby.pair import StandbyPair
from recovery_lib.ha.standby.shipping import Shipper, latest_complete, restore, verify_copy
from recovery_lib.runtime.supervisor import Supervisor

# -- a fake Spark checkpoint ---------------------------------------------------------------------


def _offsets_entry(batch: int, per_source: list[dict]) -> str:
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1000 + batch}
    return "\n".join(["v1", json.dumps(meta), *(json.dumps(s) for s in per_source)])


class FakeCheckpoint:
    """offsets/commits per batch, one RocksDB changelog per batch (version b+1), SSTs."""

    def __init__(self, root: Path, name: str = "q3") -> None:
        self.path = root / name
        (self.path / "offsets").mkdir(parents=True)
        (self.path / "commits").mkdir()
        self.state = self.path / "state" / "0" / "0" / "default"
        self.state.mkdir(parents=True)
        (self.path / "metadata").write_text('{"id":"x"}')
        (self.state / "_metadata").mkdir()
        (self.state / "_metadata" / "schema").write_text("schema")

    def plan(self, batch: int) -> None:
        ends = {"t": {"0": 10 * (batch + 1), "1": 5 * (batch + 1)}}
        (self.path / "offsets" / str(batch)).write_text(_offsets_entry(batch, [ends]))
        (self.path / "offsets" / f".{batch}.crc").write_bytes(b"c")

    def commit(self, batch: int, state_bytes: int = 100) -> None:
        (self.state / f"{batch + 1}.changelog").write_bytes(os.urandom(state_bytes))
        (self.path / "commits" / str(batch)).write_text("v1\n{}")

    def run(self, batches: range) -> None:
        for b in batches:
            self.plan(b)
            self.commit(b)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_copy_is_a_cut_at_the_last_commit(tmp_path: Path) -> None:
    ck = FakeCheckpoint(tmp_path / "primary")
    ck.run(range(3))
    ck.plan(3)  # planned, not committed
    (ck.state / "4.changelog").write_bytes(b"in flight")  # state of batch 3 being written
    shipped = Shipper(ck.path, tmp_path / "standby").ship()
    assert shipped is not None and shipped.batch == 2
    manifest = latest_complete(tmp_path / "standby")
    assert manifest is not None
    names = set(manifest.files)
    assert "q3/offsets/2" in names and "q3/offsets/3" not in names
    assert "q3/commits/2" in names
    assert "q3/state/0/0/default/3.changelog" in names
    assert "q3/state/0/0/default/4.changelog" not in names
    assert "q3/metadata" in names and "q3/state/0/0/default/_metadata/schema" in names
    # The planned-but-uncommitted batch is in the tail, for the standby to follow.
    assert (tmp_path / "standby" / "tail" / "3").exists()


def test_shipping_is_incremental_and_links_unchanged_files(tmp_path: Path) -> None:
    ck = FakeCheckpoint(tmp_path / "primary")
    ck.run(range(5))
    shipper = Shipper(ck.path, tmp_path / "standby")
    first = shipper.ship()
    assert first is not None and first.bytes_copied == first.bytes_total
    assert shipper.ship() is None  # nothing new
    ck.run(range(5, 6))
    second = shipper.ship()
    assert second is not None and second.batch == 5
    new_bytes = (
        sum((ck.path / rel).stat().st_size for rel in ("offsets/5", "commits/5", "offsets/.5.crc"))
        + (ck.state / "6.changelog").stat().st_size
    )
    assert second.bytes_copied == new_bytes < second.bytes_total
    a = tmp_path / "standby" / "copies" / f"{first.seq:08d}" / "tree" / "q3" / "offsets" / "0"
    b = tmp_path / "standby" / "copies" / f"{second.seq:08d}" / "tree" / "q3" / "offsets" / "0"
    assert a.stat().st_ino == b.stat().st_ino
    rounds = [
        json.loads(line)
        for line in (tmp_path / "standby" / "shipments.jsonl").read_text().splitlines()
    ]
    assert [r["batch"] for r in rounds] == [4, 5]
    changed = (ck.state / "6.changelog").stat().st_size
    assert rounds[1]["state_bytes_new"] == changed < rounds[1]["state_bytes_total"]
    assert rounds[1]["bytes_copied"] == second.bytes_copied and rounds[1]["batches"] == 1
    lag = shipper.lag()
    assert (lag.batches, lag.bytes) == (0, 0)
    ck.run(range(6, 8))
    lag = shipper.lag()
    assert lag.batches == 2 and lag.bytes > 0


def test_torn_copy_falls_back_to_the_previous_complete_one(tmp_path: Path) -> None:
    ck = FakeCheckpoint(tmp_path / "primary")
    ck.run(range(3))
    shipper = Shipper(ck.path, tmp_path / "standby", keep=3)
    good = shipper.ship()
    ck.run(range(3, 5))
    torn = shipper.ship()
    assert good is not None and torn is not None
    # Damage a file only the newer copy has (a bit flip in storage).
    victim = Path(torn.path) / "tree" / "q3" / "state" / "0" / "0" / "default" / "5.changelog"
    data = bytearray(victim.read_bytes())
    data[0] ^= 0xFF
    victim.write_bytes(bytes(data))
    assert any("5.changelog" in p for p in verify_copy(Path(torn.path)))
    rejected: list = []
    chosen = latest_complete(tmp_path / "standby", verify=True, rejected=rejected)
    assert chosen is not None and chosen.seq == good.seq and chosen.batch == 2
    assert rejected and rejected[0][0] == torn.seq
    # An interrupted copy (no manifest) is never used either.
    (Path(torn.path) / "MANIFEST.json").unlink()
    assert latest_complete(tmp_path / "standby", verify=False).seq == good.seq


def test_restore_gives_a_private_live_checkpoint(tmp_path: Path) -> None:
    ck = FakeCheckpoint(tmp_path / "primary")
    ck.run(range(2))
    (tmp_path / "primary" / "q3.causal").mkdir()
    (tmp_path / "primary" / "q3.causal" / "mark.json").write_text('{"batch": 1}')
    shipper = Shipper(ck.path, tmp_path / "standby")
    shipper.ship()
    manifest = latest_complete(tmp_path / "standby")
    live = restore(tmp_path / "standby", manifest, tmp_path / "live")
    assert live == tmp_path / "live" / "q3"
    assert _files(live) == {
        k[len("q3/") :]: v for k, v in _files(ck.path.parent).items() if k.startswith("q3/")
    }
    # Spark replaces files by rename; the copy must not change when the live one does.
    causal = tmp_path / "live" / "q3.causal" / "mark.json"
    causal.write_text('{"batch": 9}')  # rewritten in place: restore gave a private copy
    (live / "commits" / "1").unlink()
    (live / "commits" / "1").write_text("new")
    assert verify_copy(tmp_path / "standby" / "copies" / f"{manifest.seq:08d}") == []


def test_every_chosen_copy_is_intact_and_a_cut_of_the_primary(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Whatever the primary did between rounds and whichever copies were torn, a takeover uses
    the newest intact copy still kept (none only when there is none), it verifies, and it holds
    exactly the primary's files of its batch. A copy is chosen in at least a fifth of the
    examples (60 runs: never fewer than a quarter): the checks of a chosen copy judge nothing
    otherwise."""
    chosen_in: list[bool] = []

    # Derandomized: the bar below is on the share of examples that choose a copy, which a
    # random draw of 40 missed once (7 of 44 in CI, 2026-11-29); the examples stay varied.
    @settings(max_examples=40, deadline=None, derandomize=True)
    @given(
        steps=st.lists(
            st.tuples(st.integers(0, 3), st.booleans(), st.integers(0, 2)), min_size=1, max_size=8
        ),
    )
    @example(steps=[(2, True, 0)])  # the newest copy
    @example(steps=[(2, True, 0), (1, True, 1)])  # newest torn (file lost): the one before
    @example(steps=[(1, True, 0), (1, True, 2)])  # newest torn (no manifest): the one before
    @example(steps=[(1, True, 1)])  # the only copy torn: none
    def check(steps: list[tuple[int, bool, int]]) -> None:
        root = tmp_path_factory.mktemp("ship")
        ck = FakeCheckpoint(root / "primary")
        keep = 3
        shipper = Shipper(ck.path, root / "standby", keep=keep)
        next_batch = 0
        snapshots: dict[int, dict[str, bytes]] = {}
        torn: set[int] = set()
        for new_batches, do_ship, damage in steps:
            ck.run(range(next_batch, next_batch + new_batches))
            next_batch += new_batches
            if do_ship:
                shipped = shipper.ship()
                if shipped is not None:
                    snapshots[shipped.seq] = {
                        rel: (Path(shipped.path) / "tree" / rel).read_bytes()
                        for rel in latest_complete(root / "standby", verify=False).files
                    }
                    if damage == 1:  # torn: a file lost
                        victim = next((Path(shipped.path) / "tree" / "q3" / "commits").iterdir())
                        victim.unlink()
                        torn.add(shipped.seq)
                    elif damage == 2:  # torn: the manifest never written
                        (Path(shipped.path) / "MANIFEST.json").unlink()
                        torn.add(shipped.seq)
        kept = sorted(snapshots)[-keep:]  # each round prunes all but the newest copies
        intact = [seq for seq in kept if seq not in torn]
        chosen = latest_complete(root / "standby", verify=True)
        assert (chosen.seq if chosen is not None else None) == max(intact, default=None)
        chosen_in.append(chosen is not None)
        if chosen is None:
            return  # nothing intact was kept: falling back to no copy is right (asserted above)
        copy_dir = root / "standby" / "copies" / f"{chosen.seq:08d}"
        assert verify_copy(copy_dir) == []
        assert chosen.batch < next_batch
        for rel, data in snapshots[chosen.seq].items():
            assert (copy_dir / "tree" / rel).read_bytes() == data
            assert (ck.path.parent / rel).read_bytes() == data  # write-once files of the primary

    check()
    assert sum(chosen_in) >= len(chosen_in) // 5, (
        f"a copy was chosen in only {sum(chosen_in)} of {len(chosen_in)} examples"
    )


# -- fencing -------------------------------------------------------------------------------------


def test_epochs_advance_once_and_fence_older_writers(tmp_path: Path) -> None:
    store = EpochStore(tmp_path / "epochs")
    assert store.current() == 0
    primary = store.advance("primary")
    assert primary == 1
    store.check(1)
    standby = store.advance("standby", expected=primary)
    assert standby == 2 and store.holder(2)["holder"] == "standby"
    with pytest.raises(FencedError, match="epoch 2 was taken by standby"):
        store.check(primary, "sink write")
    with pytest.raises(FencedError, match="someone else took over"):
        store.advance("second standby", expected=primary)  # saw the same expiry, lost the race
    # Two takeovers racing for the same number (both read current() == 2): O_EXCL lets the
    # first one win, the second is told.
    EpochStore(tmp_path / "epochs").advance("fast standby")
    stale = EpochStore(tmp_path / "epochs")
    stale.current = lambda: 2  # type: ignore[method-assign]
    with pytest.raises(FencedError, match="epoch 3 was taken by a concurrent takeover"):
        stale.advance("slow standby")
    assert store.current() == 3 and store.holder(3)["holder"] == "fast standby"


def test_fence_filter_drops_older_epochs_after_the_fence_only() -> None:
    fence = FenceFilter()
    accept = fence.accept
    assert accept("out", 0, 1, {})  # the primary's records before any fence
    assert not accept("out", 0, None, {FENCE_HEADER: b"2"})  # the fence record itself
    assert not accept("out", 0, 1, {})  # a zombie's record after the fence
    assert accept("out", 1, 1, {})  # another partition, not fenced yet
    assert accept("out", 0, 2, {})  # the new primary
    assert accept("out", 0, None, {})  # records without an epoch are not ours to judge
    assert fence.dropped == 1


# -- stopping a pair -----------------------------------------------------------------------------


class _UnstoppableNode:
    """A node whose stop raises and whose process stays up (a stand-in: no real process)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proc = SimpleNamespace(pid=4242, poll=lambda: None)

    def stop(self, timeout_s: float) -> None:
        raise PermissionError("operation not permitted")


def test_a_node_that_does_not_stop_is_reported_and_the_others_are_stopped_still(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = SimpleNamespace(env={}, args=[], max_restarts=0)  # stop() reads no spec
    events: list[tuple[str, dict]] = []
    pair = StandbyPair(spec, tmp_path, query="q3", on_event=lambda k, d: events.append((k, d)))
    pair.zombies = [_UnstoppableNode(tmp_path / "node-0")]
    primary = Supervisor(spec, tmp_path / "node-1")
    primary.proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    pair.primary = primary
    try:
        failures = pair.stop(timeout_s=10)
    finally:
        if primary.proc.poll() is None:
            primary.proc.kill()
            primary.proc.wait()
    assert primary.proc.returncode is not None  # stopped after the zombie's stop raised
    assert failures == [
        "node-0: stop failed: PermissionError('operation not permitted')",
        f"node-0: pid 4242 is still running after stop; see {tmp_path / 'node-0' / 'job.log'}",
    ]
    assert [(kind, d["detail"]) for kind, d in events if kind == "stop_failed"] == [
        ("stop_failed", f) for f in failures
    ]
    assert "standby pair: node-0: pid 4242 is still running" in caplog.text


# -- following the primary's batches -------------------------------------------------------------


def test_follow_replays_logged_boundaries_then_cuts_freely(tmp_path: Path) -> None:
    tail = tmp_path / "tail"
    tail.mkdir()
    live = tmp_path / "live"
    (live / "offsets").mkdir(parents=True)
    (live / "offsets" / "4").write_text("restored copy ends at batch 4")
    # Two sources: the primary's batch 5 moved only topic a, batch 6 only topic b.
    (tail / "5").write_text(_offsets_entry(5, [{"a": {"0": 17}}, {"b": {"0": 3}}]))
    (tail / "6").write_text(_offsets_entry(6, [{"a": {"0": 17}}, {"b": {"0": 9}}]))
    policy_a = FollowLog({"followLog": str(tail), "followCheckpoint": str(live)})
    policy_b = FollowLog({"followLog": str(tail), "followCheckpoint": str(live)})
    available_a, available_b = {"a": {"0": 50}}, {"b": {"0": 50}}
    assert policy_a.cut({"a": {"0": 12}}, available_a, None) == {"a": {"0": 17}}
    assert policy_b.cut({"b": {"0": 3}}, available_b, None) == {"b": {"0": 3}}
    (live / "offsets" / "5").write_text("batch 5 planned")
    assert policy_a.cut({"a": {"0": 17}}, available_a, None) == {"a": {"0": 17}}  # no new data
    assert policy_b.cut({"b": {"0": 3}}, available_b, None) == {"b": {"0": 9}}
    (live / "offsets" / "6").write_text("batch 6 planned")
    assert policy_a.cut({"a": {"0": 17}}, available_a, None) == {"a": {"0": 50}}  # past the tail
    assert policy_a.followed == [5, 6] and policy_a.done


def test_the_determinant_log_is_fenced_through_the_sinks_write_guard(tmp_path: Path) -> None:
    """causal/ knows no epochs: the write-guard hook set by whoever configures fencing refuses
    a zombie's determinants before anything reaches the broker (no broker here)."""
    from recovery_lib.causal.determinants import Determinant, DeterminantRun, StreamKey
    from recovery_lib.causal.log import CausalConfig, KafkaDeterminantLog
    from recovery_lib.ha.fencing import EPOCH_GUARD_HOOK

    store = EpochStore(tmp_path / "epochs")
    mine = store.advance("primary")
    config = CausalConfig(
        job="j", state_dir=str(tmp_path / "causal"), kafka={"bootstrap.servers": "127.0.0.1:9"},
        epoch=mine, epoch_store=str(store.directory), write_guard=EPOCH_GUARD_HOOK,
    )  # fmt: skip
    log = KafkaDeterminantLog(config)
    log.append(DeterminantRun(StreamKey("j", 0, "s", 0), 0, (Determinant("call", 1),)))
    store.advance("standby", expected=mine)
    with pytest.raises(FencedError, match="determinant log write"):
        log.flush()
