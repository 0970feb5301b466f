"""Poison records: the parked file, a batch's input range from the offset log, the bisection
that finds each record a batch fails on (the probe stands in for a Spark query here: it fails
when its ranges hold a poison offset), and the supervisor that asks for a search after the
same batch failed ``poison_attempts`` times."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from recovery_lib.io.parked import POISON_BATCH_ENV, ParkedRecord, park, parked_in, read_parked
from recovery_lib.job.options import JobOptions
from recovery_lib.job.poison import PoisonSearch, Ranges, batch_ranges
from recovery_lib.runtime.faults import ARM_DIR_ENV, POISON_FIRED, PoisonedInput, raise_on_poison


def offsets_log(checkpoint: Path, batch: int, ends: dict[str, dict[str, int]]) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": 0}), json.dumps(ends)]
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(lines))


def test_parked_records_are_kept_once_and_read_per_range(tmp_path: Path) -> None:
    path = tmp_path / "q1.parked.json"
    assert read_parked(path) == []
    park(path, [ParkedRecord("bids", 1, 40, "ValueError: x")])
    park(path, [ParkedRecord("bids", 1, 40, "again"), ParkedRecord("bids", 0, 7, "y")])
    assert [r.position for r in read_parked(path)] == ["bids/1@40", "bids/0@7"]
    assert parked_in(path, "bids", 1, 0, 100) == {40: "ValueError: x"}  # the first reason
    assert parked_in(path, "bids", 1, 41, 100) == {}
    path.write_text("{not json")
    with pytest.raises(ValueError, match="dead-letter topic"):
        read_parked(path)


def test_a_batch_reads_from_the_previous_batchs_ends_to_its_own(tmp_path: Path) -> None:
    offsets_log(tmp_path, 0, {"bids": {"0": 10, "1": 12}})
    offsets_log(tmp_path, 1, {"bids": {"0": 25, "1": 12}})
    assert batch_ranges(tmp_path, 0) == {("bids", 0): (0, 10), ("bids", 1): (0, 12)}
    assert batch_ranges(tmp_path, 1) == {("bids", 0): (10, 25), ("bids", 1): (12, 12)}


class FakeSearch(PoisonSearch):
    """The probe fails when its ranges hold a poison offset that is not parked yet."""

    def __init__(self, opts: JobOptions, poison: set[tuple[str, int, int]]) -> None:
        super().__init__(None, lambda _s, _o: None, opts)
        self.poison = poison
        self.seen: list[Ranges] = []

    def probe(self, ranges: Ranges) -> str | None:
        self.probes += 1
        self.seen.append(ranges)
        parked = {(r.topic, r.partition, r.offset) for r in read_parked(self.opts.parked_path)}
        for (topic, part), (start, end) in ranges.items():
            for t, p, off in self.poison - parked:
                if (t, p) == (topic, part) and start <= off < end:
                    return f"PoisonedInput: the job's code cannot process {t}/{p}@{off}"
        return None


def test_the_bisection_finds_and_parks_every_poison_record_of_a_batch(tmp_path: Path) -> None:
    opts = JobOptions(query="q1", checkpoint_dir=str(tmp_path), kafka={"bootstrap.servers": "-"})
    ranges = {("bids", 0): (100, 1100), ("bids", 1): (50, 50), ("auctions", 0): (0, 300)}
    search = FakeSearch(opts, {("bids", 0, 777), ("auctions", 0, 3)})
    found = search.find(ranges)
    assert sorted(r.position for r in found) == ["auctions/0@3", "bids/0@777"]
    assert {r.position for r in read_parked(opts.parked_path)} == {"auctions/0@3", "bids/0@777"}
    assert all("PoisonedInput" in r.reason for r in found)
    # log2 of each range, not a probe per record; every probe names every partition (one
    # left out would be read from its beginning).
    assert search.probes < 40
    assert all(set(r) == set(ranges) for r in search.seen)


def test_a_batch_that_fails_on_no_single_record_parks_nothing(tmp_path: Path) -> None:
    opts = JobOptions(query="q1", checkpoint_dir=str(tmp_path), kafka={"bootstrap.servers": "-"})

    class Broken(FakeSearch):
        def probe(self, ranges: Ranges) -> str | None:
            self.probes += 1
            total = sum(end - start for start, end in ranges.values())
            return "the broker is gone" if total > 50 else None  # not one record's fault

    assert Broken(opts, set()).find({("bids", 0): (0, 100)}) == []
    assert read_parked(opts.parked_path) == []


def test_the_poison_hook_raises_only_in_an_experiment_and_says_where(tmp_path, monkeypatch):
    batch = pa.RecordBatch.from_pylist(
        [
            {"value": b'{"bidder": 1}', "topic": "bids", "partition": 0, "offset": 5},
            {"value": b'{"__poison__": 1}', "topic": "bids", "partition": 0, "offset": 6},
        ]
    )
    monkeypatch.delenv(ARM_DIR_ENV, raising=False)
    raise_on_poison(batch)  # a production job: nothing happens
    arm_dir = tmp_path / "arm"  # nothing armed: the directory does not exist yet
    monkeypatch.setenv(ARM_DIR_ENV, str(arm_dir))
    with pytest.raises(PoisonedInput, match="bids/0@6"):
        raise_on_poison(batch)
    assert "bids/0@6" in (arm_dir / POISON_FIRED).read_text()
    raise_on_poison(batch.slice(0, 1))  # a batch without it passes


def test_the_supervisor_asks_for_a_search_after_the_same_batch_failed_again(
    tmp_path: Path, settings_env: Callable[..., None]
) -> None:
    from recovery_lib.runtime.launch import JobLaunch
    from recovery_lib.runtime.supervisor import ProcessSpec, Supervisor

    settings_env(RECOVERY_POISON_ATTEMPTS=3)  # reloaded again after the test, pass or fail
    launch = JobLaunch(job="jobs.nexmark.q1:JOB", name="q1", checkpoints=str(tmp_path / "ck"))
    sup = Supervisor(ProcessSpec.for_job(launch), tmp_path / "work")
    checkpoint = tmp_path / "ck" / "q1"
    offsets_log(checkpoint, 0, {"bids": {"0": 10}})
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "commits" / "0").write_text("v1\n{}")
    offsets_log(checkpoint, 1, {"bids": {"0": 20}})  # planned, never committed
    for _ in range(2):
        sup._count_failed_batch()  # noqa: SLF001 - what tick() does before each restart
        assert POISON_BATCH_ENV not in sup._next_env  # noqa: SLF001
    sup._count_failed_batch()  # noqa: SLF001 - the third failure of batch 1
    assert sup._next_env == {POISON_BATCH_ENV: "1"}  # noqa: SLF001
    (checkpoint / "commits" / "1").write_text("v1\n{}")  # it went through after the search
    sup._next_env = {}  # noqa: SLF001 - start() used it
    sup._count_failed_batch()  # noqa: SLF001 - nothing in flight: nothing counted
    assert sup._next_env == {}  # noqa: SLF001


def test_a_probe_that_fails_on_no_input_stops_the_search_before_it_blames_a_record(
    tmp_path: Path,
) -> None:
    from recovery_lib.job.poison import PoisonSearchUnsupported

    opts = JobOptions(query="q1", checkpoint_dir=str(tmp_path), kafka={"bootstrap.servers": "-"})

    class Unrunnable(FakeSearch):
        def probe(self, ranges: Ranges) -> str | None:
            self.probes += 1
            return "AnalysisException: append output mode not supported"

    with pytest.raises(PoisonSearchUnsupported, match="no input"):
        Unrunnable(opts, set()).find({("bids", 0): (0, 100)})
    assert read_parked(opts.parked_path) == []


def test_poison_probes_are_side_queries_not_the_jobs_progress() -> None:
    from recovery_lib.job.poison import PROBE_QUERY_PREFIX
    from recovery_lib.metrics.side_queries import is_side_query

    assert is_side_query(f"{PROBE_QUERY_PREFIX}3") and is_side_query("rehearsal_q3")
    assert not is_side_query("q3") and not is_side_query(None)


def test_the_parked_reason_is_the_exception_the_users_code_raised_not_the_plan() -> None:
    from recovery_lib.job.poison import failure_reason

    spark_says = RuntimeError(
        "[STREAM_FAILED] Query [id = 1] terminated with exception: [PYTHON_EXCEPTION] An "
        "exception was thrown from the Python worker: Traceback (most recent call last):\n"
        '  File "faults.py", line 279, in raise_on_poison\n'
        "recovery_lib.runtime.faults.PoisonedInput: the job's code cannot process bids/0@6\n"
        "SQLSTATE: 39000 SQLSTATE: XXKST\n"
        "\n=== Streaming Query ===\nIdentifier: [id = 1]\n"
        "   +- ~StreamingDataSourceV2ScanRelation[key#759, value#760] rlkafka\n"
    )
    assert failure_reason(spark_says) == (
        "recovery_lib.runtime.faults.PoisonedInput: the job's code cannot process bids/0@6"
    )
    assert failure_reason(ValueError("bad")) == "bad"
