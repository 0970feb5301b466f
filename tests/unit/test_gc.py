"""Checkpoint GC on synthetic checkpoints: what it removes, and the property that matters --
every kept recovery point can still be rebuilt from the files left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery_lib.runtime.checkpoint_gc import common_input_floor, plan_gc, run_gc


def make_checkpoint(
    root: Path, committed: int, snapshot_every: int, planned_extra: int = 1, kind: str = "hdfs"
) -> Path:
    """offsets 0..committed+planned_extra, commits 0..committed, and two state stores whose
    version v (state after batch v-1) is a delta/changelog, plus a snapshot every
    ``snapshot_every`` versions."""
    ck = root / "ck"
    for sub, last in (("offsets", committed + planned_extra), ("commits", committed)):
        (ck / sub).mkdir(parents=True)
        for b in range(last + 1):
            (ck / sub / str(b)).write_text(f"v1\n{json.dumps({'batchWatermarkMs': 0})}\n{{}}")
            (ck / sub / f".{b}.crc").write_text("crc")
    delta, snap = ("delta", "snapshot") if kind == "hdfs" else ("changelog", "zip")
    for store in ("state/0/0", "state/0/1/left-keyToNumValues"):
        d = ck / store
        d.mkdir(parents=True)
        for v in range(1, committed + 2):
            (d / f"{v}.{delta}").write_text("x" * 10)
            if snapshot_every and v % snapshot_every == 0:
                (d / f"{v}.{snap}").write_text("y" * 100)
    return ck


def rebuildable(store: Path, version: int, kind: str = "hdfs") -> bool:
    """Can the state of ``version`` be loaded from the files present?"""
    delta, snap = ("delta", "snapshot") if kind == "hdfs" else ("changelog", "zip")
    names = {p.name for p in store.iterdir()}
    bases = [v for v in range(0, version + 1) if f"{v}.{snap}" in names] + [0]
    base = max(bases)
    return all(f"{v}.{delta}" in names for v in range(base + 1, version + 1))


def test_keeps_the_recovery_line_and_the_newest_batches(tmp_path):
    ck = make_checkpoint(tmp_path, committed=24, snapshot_every=10)
    result = run_gc(ck, keep_batches=5)
    plan = result.plan
    assert plan.recovery_line == 24 and plan.oldest_kept_batch == 20
    assert sorted(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit()) == list(
        range(20, 25)
    )
    assert sorted(int(p.name) for p in (ck / "offsets").iterdir() if p.name.isdigit()) == list(
        range(20, 26)
    )  # the planned, uncommitted batch 25 stays
    store = ck / "state/0/0"
    # Oldest kept version 21 rebuilds from snapshot 20: everything before 20 is gone.
    assert min(int(p.name.split(".")[0]) for p in store.iterdir()) == 20
    assert result.bytes_freed > 0 and result.files_removed == len(plan.files)


def test_dry_run_changes_nothing(tmp_path):
    ck = make_checkpoint(tmp_path, committed=30, snapshot_every=10)
    before = sorted(p for p in ck.rglob("*"))
    result = run_gc(ck, keep_batches=3, dry_run=True)
    assert result.plan.files and result.files_removed == 0
    assert sorted(p for p in ck.rglob("*")) == before


def test_never_passes_the_checkpoint_shipped_to_a_standby(tmp_path):
    ck = make_checkpoint(tmp_path, committed=40, snapshot_every=10)
    plan = plan_gc(ck, keep_batches=2, shipped=12)
    assert plan.oldest_kept_batch == 11
    gone = {Path(p).name for p, _ in plan.files}
    assert "10" in gone  # it does collect, up to the shipped copy's line
    assert not gone & {"11", "12"}


def test_without_a_snapshot_the_whole_delta_chain_stays(tmp_path):
    ck = make_checkpoint(tmp_path, committed=15, snapshot_every=0)
    plan = plan_gc(ck, keep_batches=2)
    assert plan.files and not any("/state/" in p for p, _ in plan.files)


def test_no_commit_no_gc(tmp_path):
    (tmp_path / "ck" / "offsets").mkdir(parents=True)
    plan = plan_gc(tmp_path / "ck", keep_batches=1)
    assert plan.recovery_line is None and not plan.files and plan.notes
    with pytest.raises(ValueError, match="keep_batches"):
        plan_gc(tmp_path / "ck", keep_batches=0)


@settings(max_examples=60, deadline=None)
@given(
    committed=st.integers(0, 60),
    snapshot_every=st.integers(0, 12),
    keep=st.integers(1, 15),
    kind=st.sampled_from(["hdfs", "rocksdb"]),
)
def test_every_kept_recovery_point_stays_rebuildable(
    tmp_path_factory, committed, snapshot_every, keep, kind
):
    root = tmp_path_factory.mktemp("gc")
    ck = make_checkpoint(root, committed, snapshot_every, kind=kind)
    result = run_gc(ck, keep_batches=keep)
    oldest = result.plan.oldest_kept_batch
    assert oldest == max(committed - keep + 1, 0)
    for store in (ck / "state/0/0", ck / "state/0/1/left-keyToNumValues"):
        for batch in range(oldest, committed + 1):
            assert rebuildable(store, batch + 1, kind), (store, batch)
    for batch in range(oldest, committed + 1):
        assert (ck / "commits" / str(batch)).exists() and (ck / "offsets" / str(batch)).exists()


def test_input_records_stay_at_and_above_a_cec_jobs_replay_start(tmp_path):
    ck = make_checkpoint(tmp_path, committed=10, snapshot_every=5)
    (ck / "offsets" / "8").write_text('v1\n{"batchWatermarkMs": 0}\n{"in": {"0": 100, "1": 80}}')
    plain = plan_gc(ck, keep_batches=2, delete_input_records=True)
    assert plain.input_records_before == {"in": {"0": 100, "1": 80}}
    floor = {"in": {0: 50, 1: 90}}  # T of the eventual checkpoint per input partition
    plan = plan_gc(ck, keep_batches=2, delete_input_records=True, input_floor=floor)
    assert plan.input_records_before == {"in": {"0": 50, "1": 80}}
    assert any("CEC replay start" in note for note in plan.notes)


def test_a_replicated_jobs_input_is_kept_from_the_lowest_start_either_replica_keeps(tmp_path):
    a = make_checkpoint(tmp_path / "a", committed=10, snapshot_every=5)
    b = make_checkpoint(tmp_path / "b", committed=10, snapshot_every=5)
    (a / "offsets" / "8").write_text('v1\n{"batchWatermarkMs": 0}\n{"in": {"0": 100, "1": 80}}')
    (b / "offsets" / "8").write_text('v1\n{"batchWatermarkMs": 0}\n{"in": {"0": 70, "1": 95}}')
    assert common_input_floor([a, b], keep_batches=2) == {"in": {0: 70, 1: 80}}
    fresh = tmp_path / "replacement" / "ck"  # a replacement that has committed nothing yet
    fresh.mkdir(parents=True)
    assert common_input_floor([a, fresh], keep_batches=2) is None


def test_gc_of_a_replicated_job_collects_each_replicas_checkpoint(tmp_path, settings_env):
    from recovery_lib.ops.config import get_job
    from recovery_lib.ops.gc import gc_job

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "jobs:\n  - {name: q3r, job: q3, mode: liverobin, sink_mode: release, keep_batches: 2}\n"
    )
    settings_env(RECOVERY_JOBS_FILE=jobs, RECOVERY_HOME=tmp_path / "home")
    job = get_job("q3r")
    for root, committed in zip(job.replica_checkpoint_dirs, (10, 7), strict=True):
        made = make_checkpoint(root, committed=committed, snapshot_every=5)
        made.rename(root / job.query)
    summary = gc_job("q3r", dry_run=True)
    lines = [r["plan"]["recovery_line"] for r in summary["replicas"]]
    assert lines == [10, 7]  # each replica on its own line
    assert [r["plan"]["oldest_kept_batch"] for r in summary["replicas"]] == [9, 6]


def test_gc_of_a_table_job_vacuums_the_table_only_below_its_oldest_kept_batch(
    tmp_path, settings_env
):
    from recovery_lib.io.sinks.table_target import TableTarget
    from recovery_lib.ops.config import get_job
    from recovery_lib.ops.gc import gc_job
    from tests.unit.test_table_target import batch

    jobs = tmp_path / "jobs.yaml"
    table = tmp_path / "lake" / "q1"
    jobs.write_text(f"jobs:\n  - {{name: q1d, job: q1, sink: delta, table: {table}}}\n")
    settings_env(RECOVERY_JOBS_FILE=jobs, RECOVERY_HOME=tmp_path / "home")
    job = get_job("q1d")
    job.checkpoint_dir.mkdir(parents=True)
    make_checkpoint(job.checkpoint_dir, committed=12, snapshot_every=0).rename(job.checkpoint)
    sink = TableTarget.parse(f"delta:{table}").sink(job.input_prefix, job.query)
    for b in range(13):
        sink.write_batch(batch(b), b)
    summary = gc_job("q1d", keep_batches=4)
    vacuum = summary["table_vacuum"]
    assert summary["plan"]["oldest_kept_batch"] == 9
    assert vacuum["app_id"] == "nexmark:q1" and vacuum["keep_from_batch"] == 9
    marks = {c.version: c.mark for c in TableTarget.parse(f"delta:{table}").commits()}
    kept = sorted(m.batch_id for m in marks.values() if m is not None)
    assert kept == list(range(9, 13)), vacuum  # the commits a re-run from batch 9 reads
    assert vacuum["versions_removed"], vacuum
