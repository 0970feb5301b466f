"""TableTarget: the one value a table sink travels as (the launch's --table-sink), its sinks, its
commits and rows as the latency follower and the oracle read them; the plain-append contrast;
and the modes that refuse a table (no Spark: Arrow batches built by hand)."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from recovery_lib.io.exceptions import InvalidSinkOption
from recovery_lib.io.sinks.lakehouse import TableKind, TableWriterFenced
from recovery_lib.io.sinks.table_sink import BATCH_COL, PARTITION_COL, SEQ_COL
from recovery_lib.io.sinks.table_target import TableTarget
from recovery_lib.job.spec import resolve_job
from recovery_lib.metrics.table_latency import TableLatencyCollector
from recovery_lib.modes import ModeRefused, ModeRequest, get_mode
from recovery_lib.settings import Settings

ROWS = 4


def batch(batch_id: int, ingest_ms: int = 1_000) -> pa.Table:
    """A job output as ``with_lineage(df, b).toArrow()`` gives it."""
    return pa.table(
        {
            "key": pa.array([f"k{i}" for i in range(ROWS)], pa.string()),
            "value": pa.array([f'{{"b": {batch_id}, "i": {i}}}' for i in range(ROWS)]),
            "ingest_ms": pa.array([ingest_ms] * ROWS, pa.int64()),
            BATCH_COL: pa.array([batch_id] * ROWS, pa.int64()),
            PARTITION_COL: pa.array([0] * ROWS, pa.int32()),
            SEQ_COL: pa.array(range(ROWS), pa.int64()),
        }
    )


@pytest.mark.parametrize(
    ("spelled", "kind", "identifier", "guarded"),
    [
        ("delta:/data/out", TableKind.DELTA, "rl.output", True),
        ("iceberg:/lake", TableKind.ICEBERG, "rl.output", True),
        ("iceberg:/lake#sales.totals", TableKind.ICEBERG, "sales.totals", True),
        ("delta-append:/data/out", TableKind.DELTA, "rl.output", False),
        ("ICEBERG-append:/lake#a.b", TableKind.ICEBERG, "a.b", False),
    ],
)
def test_a_target_reads_back_from_its_spelling(spelled, kind, identifier, guarded):
    target = TableTarget.parse(spelled)
    assert (target.kind, target.identifier, target.guarded) == (kind, identifier, guarded)
    assert TableTarget.parse(target.spell()) == target


@pytest.mark.parametrize(
    ("spelled", "says"),
    [
        ("/data/out", "spell it delta:<path>"),
        ("parquet:/x", "table kind 'parquet' is unknown"),
        ("delta:/x#ns.t", "a Delta table is named by its path"),
        ("iceberg:/lake#flat", "namespace.table"),
        ("delta:", "spell it"),
    ],
)
def test_a_misspelled_target_says_how_to_spell_it(spelled, says):
    with pytest.raises(InvalidSinkOption, match=says):
        TableTarget.parse(spelled)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_the_guarded_sink_writes_each_batch_once_and_the_follower_sees_each_commit(tmp_path, kind):
    target = TableTarget.parse(f"{kind}:{tmp_path / 'table'}")
    assert not target.exists()
    follower = TableLatencyCollector(target, "run", None)
    sink = target.sink("exp", "q1")
    sink.write_batch(batch(0, 1_000), 0)
    sink.write_batch(batch(1, 2_000), 1)
    assert follower.poll() == 2 * ROWS
    sink.write_batch(batch(1, 2_000), 1)  # the re-run after a kill between commit and commit
    sink.write_batch(batch(2, 3_000), 2)
    assert follower.poll() == ROWS  # only batch 2 is new
    assert follower.batches_twice == []
    commits = [c.timestamp_ms for c in target.commits() if c.mark is not None]
    assert [v for v, _ in follower.samples] == [t for t in commits for _ in range(ROWS)]
    assert [v - lat for v, lat in follower.samples] == [1_000] * 4 + [2_000] * 4 + [3_000] * 4
    records = target.read_outputs()
    assert len(records) == 3 * ROWS and len({r.id for r in records}) == 3 * ROWS


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_plain_append_lands_a_rerun_batch_twice_which_the_reader_and_follower_show(
    tmp_path, kind
):
    target = TableTarget.parse(f"{kind}-append:{tmp_path / 'table'}")
    follower = TableLatencyCollector(target, "run", None)
    sink = target.sink("exp", "q1")
    for b in (0, 1, 1):
        sink.write_batch(batch(b), b)
    follower.poll()
    assert follower.batches_twice == [1]
    ids = [r.id for r in target.read_outputs()]
    assert len(ids) == 3 * ROWS and len(set(ids)) == 2 * ROWS  # batch 1's rows under their ids


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_zombie_epoch_is_refused_by_the_target_sink(tmp_path, kind):
    target = TableTarget.parse(f"{kind}:{tmp_path / 'table'}")
    newest = [1]
    primary = target.sink("exp", "q1", 1, lambda: newest[0])
    primary.write_batch(batch(0), 0)
    newest[0] = 2  # a standby took over
    target.sink("exp", "q1", 2, lambda: newest[0]).write_batch(batch(1), 1)
    with pytest.raises(TableWriterFenced, match="zombie"):
        primary.write_batch(batch(2), 2)


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("kazoo", "cannot write a lakehouse table: its replicas write through the replica gate"),
        ("liverobin", "use --sink release, or choose mode native, causal or standby"),
        ("cec", "its output log is its state"),
    ],
)
def test_modes_without_a_single_table_writer_refuse_a_table_sink(mode, says):
    with pytest.raises(ModeRefused, match=says):
        get_mode(mode).validate(ModeRequest(resolve_job("q3"), table_sink=True))


@pytest.mark.parametrize("mode", ["native", "causal", "standby"])
def test_modes_with_one_writer_per_batch_accept_a_table_sink(mode):
    get_mode(mode).validate(ModeRequest(resolve_job("q3"), table_sink=True))


def test_a_jobs_file_entry_writes_a_table_through_its_launch_and_refuses_replicas(
    tmp_path, settings_env
):
    from recovery_lib.ops.config import load_jobs

    settings_env(RECOVERY_HOME=tmp_path / "home")
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "jobs:\n"
        "  - {name: d, job: q1, sink: delta}\n"
        "  - {name: i, job: q1, sink: iceberg, table: /lake#ns.q1, mode: standby}\n"
        "  - {name: t, job: q1}\n"
    )
    loaded = load_jobs(jobs)
    assert loaded["d"].table_target == TableTarget(
        TableKind.DELTA, str(tmp_path / "home" / "jobs" / "d" / "table")
    )
    argv = loaded["i"].launch().to_argv()
    assert argv[argv.index("--table-sink") + 1] == "iceberg:/lake#ns.q1"
    assert loaded["i"].table_app_id == "nexmark:q1"
    assert loaded["t"].table_target is None and "--table-sink" not in loaded["t"].launch().to_argv()
    # The reference run of a table job writes a topic.
    assert loaded["d"].launch().as_reference("/ck", "ref").table_sink is None
    jobs.write_text("jobs:\n  - {name: r, job: q3, sink: delta, mode: kazoo}\n")
    with pytest.raises(ValueError, match="job r: mode kazoo cannot write a lakehouse table"):
        load_jobs(jobs)
    jobs.write_text("jobs:\n  - {name: p, job: q1, sink: parquet}\n")
    with pytest.raises(ValueError, match="sink"):
        load_jobs(jobs)


def test_causal_mode_refuses_a_table_when_determinants_ride_on_the_output():
    request = ModeRequest(resolve_job("prices"), table_sink=True)
    get_mode("causal").validate(request)  # determinants in their own topic: fine
    with pytest.raises(ModeRefused, match="RECOVERY_CAUSAL_STORAGE=kafka"):
        output = Settings(causal_storage="output")
        get_mode("causal").validate(dataclasses.replace(request, settings=output))
    get_mode("native").validate(ModeRequest(resolve_job("q1"), table_sink=True))


def test_a_daemons_follower_starts_at_the_tables_end_and_keeps_a_window(tmp_path):
    target = TableTarget.parse(f"delta:{tmp_path / 'table'}")
    sink = target.sink("exp", "q1")
    follower = TableLatencyCollector(target, "run", None, from_beginning=False, window_s=5)
    for b in (0, 1):  # before the daemon looked
        sink.write_batch(batch(b), b)
    assert follower.poll() == 0 and follower.samples == []
    sink.write_batch(batch(2, 5_000), 2)
    assert follower.poll() == ROWS
    follower._record(follower.samples[-1][0] + 60_000, [70_000])  # a minute later
    assert len(follower.samples) == 1  # the older ones left the 5 s window
    assert all(s * 1000 >= follower.samples[0][0] - 5_000 for s in follower.per_second)
