"""Real kills of real job processes: replay determinism and sink behaviour after a crash."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from recovery_lib.io.sinks.dedup_reader import DedupReader, read_topic
from tests.helpers import JobProcess, committed_batches, produce, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.broker]

RECORDS = 12_000
PER_BATCH = 1_000


def audit_entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "reads.jsonl").read_text().splitlines()]


def audit_ranges(path: Path) -> dict[int, set[tuple]]:
    """batch id -> set of (topic, partition, start, end) read by successful reads."""
    ranges: dict[int, set[tuple]] = {}
    for entry in audit_entries(path):
        ranges.setdefault(entry["batch"], set()).add(
            (entry["topic"], entry["partition"], entry["start"], entry["end"])
        )
    return ranges


def offset_log(checkpoint: Path) -> dict[int, str]:
    return {
        int(p.name): p.read_text().splitlines()[-1]
        for p in (checkpoint / "offsets").iterdir()
        if p.name.isdigit()
    }


def passthrough(
    tmp_path: Path,
    topic: str,
    sink: str,
    out: str,
    mode: str = "dedup",
    available_now: bool = False,
    env: dict | None = None,
    tag: str = "run",
) -> JobProcess:
    args = [
        "jobs.passthrough",
        "--topics",
        topic,
        "--sink",
        sink,
        "--out",
        out,
        "--mode",
        mode,
        "--checkpoint",
        str(tmp_path / "ck"),
        "--max-records",
        str(PER_BATCH),
        "--audit",
        str(tmp_path / "audit"),
    ]
    if available_now:
        args.append("--available-now")
    return JobProcess(
        args,
        tmp_path / f"{tag}.log",
        env={"RECOVERY_FAULT_DIR": str(tmp_path / "faults"), **(env or {})},
    )


# Every default-tier dedup e2e relies on this: a re-run reading other offsets fails them.
@pytest.mark.long
def test_replay_reads_same_offsets_after_driver_kill(admin, tmp_path, topic_name):
    admin.create(topic_name, 3)
    admin.create(f"{topic_name}-out", 3)
    sent = set(produce(topic_name, RECORDS, 3))
    held = [r.value for r in read_topic(topic_name)]
    assert len(held) == RECORDS and set(held) == sent, "the broker did not keep the input as sent"
    first = passthrough(tmp_path, topic_name, "kafka", f"{topic_name}-out", tag="first")
    try:

        def batch_in_flight() -> bool:
            committed = committed_batches(tmp_path / "ck")
            planned = offset_log(tmp_path / "ck") if (tmp_path / "ck" / "offsets").exists() else {}
            return len(committed) >= 3 and max(planned) > max(committed)

        def frozen_with_a_batch_in_flight() -> bool:
            if not batch_in_flight():
                return False
            first.freeze()  # frozen, the batch cannot commit between the check and the kill
            if batch_in_flight():
                return True
            first.thaw()
            return False

        wait_for(
            frozen_with_a_batch_in_flight,
            180,
            f"a batch in flight after 3 commits; log: {first.tail()}",
            interval_s=0.02,
        )
        first.kill()  # SIGKILL of the driver's process group, mid-run
    finally:
        first.stop()
    before_ranges = audit_ranges(tmp_path / "audit")
    before_offsets = offset_log(tmp_path / "ck")
    in_flight = max(before_offsets)
    assert in_flight not in committed_batches(tmp_path / "ck")
    assert before_ranges, "no batch was read before the kill"

    second = passthrough(
        tmp_path, topic_name, "kafka", f"{topic_name}-out", available_now=True, tag="second"
    )
    try:
        assert second.wait(300) == 0, second.tail()
    finally:
        second.stop()
    after_ranges = audit_ranges(tmp_path / "audit")
    after_offsets = offset_log(tmp_path / "ck")
    # Every batch planned before the kill keeps its offsets, and re-executions read the same ranges.
    for batch, entry in before_offsets.items():
        assert after_offsets[batch] == entry
    assert in_flight in committed_batches(tmp_path / "ck")  # the batch in flight was replayed
    # The audit unions both runs: a re-executed batch that read other ranges would add entries.
    for batch, ranges in before_ranges.items():
        assert after_ranges[batch] == ranges, f"batch {batch} read different ranges after restart"
    assert max(after_ranges) > max(before_ranges)
    # No gap and no overlap between batches: the ranges tile [0, end) of every partition.
    tiles: dict[tuple, list[tuple[int, int]]] = {}
    for ranges in after_ranges.values():
        for topic, part, start, end in ranges:
            tiles.setdefault((topic, part), []).append((start, end))
    total = 0
    for spans in tiles.values():
        spans = sorted(set(spans))
        assert spans[0][0] == 0
        for (_, e1), (s2, _) in zip(spans, spans[1:], strict=False):
            assert e1 == s2
        total += spans[-1][1]
    assert total == RECORDS
    # Every read returned its whole range (the input has no control records to skip).
    short = [e for e in audit_entries(tmp_path / "audit") if e["rows"] != e["end"] - e["start"]]
    assert not short, f"reads that returned fewer rows than their range: {short}"
    reader = DedupReader(f"{topic_name}-out")
    outputs = {r.value for r in reader}
    missing = sorted(int(v[1:]) for v in sent - outputs)
    assert not missing, (
        f"{len(missing)} values missing from the output (first {missing[:5]}, last "
        f"{missing[-5:]}); {reader.duplicates} duplicates dropped; reads: "
        f"{audit_entries(tmp_path / 'audit')}"
    )
    assert outputs == sent


@pytest.mark.long  # mid-write kills: test_release_e2e; the dedup reader reads most e2e outputs
def test_at_least_once_sink_duplicates_after_mid_write_kill_and_dedup_reader_does_not(
    admin, tmp_path, topic_name
):
    out = f"{topic_name}-out"
    admin.create(topic_name, 2)
    admin.create(out, 2)
    sent = produce(topic_name, RECORDS, 2)
    crashed = passthrough(
        tmp_path,
        topic_name,
        "kafka",
        out,
        mode="at_least_once",
        env={"RECOVERY_FAULT_MIDWRITE": "batch=2,rows=300"},
        tag="crash",
    )
    try:
        code = crashed.wait(300)
    finally:
        crashed.stop()
    assert code == -9, (
        f"the job should have been SIGKILLed mid-write; exit {code}: {crashed.tail()}"
    )
    assert (tmp_path / "faults" / "midwrite-batch2.fired").exists()
    assert 2 not in committed_batches(tmp_path / "ck")

    resumed = passthrough(
        tmp_path, topic_name, "kafka", out, mode="at_least_once", available_now=True, tag="resume"
    )
    try:
        assert resumed.wait(300) == 0, resumed.tail()
    finally:
        resumed.stop()
    raw = [r.value for r in read_topic(out)]
    assert len(raw) > RECORDS, "the half-written batch should have been written twice"
    assert set(raw) == set(sent)
    reader = DedupReader(out)
    deduped = [r.value for r in reader]
    assert len(deduped) == RECORDS and set(deduped) == set(sent)
    assert reader.duplicates == len(raw) - RECORDS >= 300


@pytest.mark.long  # the table sinks' re-run is covered in tests/test_table_sinks.py
def test_table_sink_has_no_duplicates_after_kill_between_write_and_commit(
    admin, tmp_path, topic_name
):
    admin.create(topic_name, 2)
    produce(topic_name, RECORDS, 2)
    table = tmp_path / "out.duckdb"
    crashed = passthrough(
        tmp_path,
        topic_name,
        "table",
        str(table),
        env={"RECOVERY_FAULT_MIDWRITE": "batch=3,rows=1"},
        tag="crash",
    )
    try:
        code = crashed.wait(300)
    finally:
        crashed.stop()
    assert code == -9, crashed.tail()
    assert 3 not in committed_batches(tmp_path / "ck")
    with duckdb.connect(str(table), read_only=True) as con:
        written_before = con.execute("SELECT count(*) FROM records WHERE _batch_id = 3").fetchone()[
            0
        ]
    assert written_before > 0  # batch 3 reached the table before the kill

    resumed = passthrough(
        tmp_path, topic_name, "table", str(table), available_now=True, tag="resume"
    )
    try:
        assert resumed.wait(300) == 0, resumed.tail()
    finally:
        resumed.stop()
    with duckdb.connect(str(table), read_only=True) as con:
        total, distinct = con.execute(
            'SELECT count(*), count(DISTINCT (topic, partition, "offset")) FROM records'
        ).fetchone()
    assert total == distinct == RECORDS
