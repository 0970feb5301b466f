"""Sink modes without a broker: the commit gate (two_phase's consumer side), the release
barrier's arithmetic, and the refusals that name their fix."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery_lib.io.exceptions import InvalidSinkOption
from recovery_lib.io.sinks.commit_gate import COMMIT_HEADER, TXN_HEADER, CommitGate, commit_record
from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.io.sinks.ids import output_id
from recovery_lib.io.sinks.modes import consumer_dedups, sink_mode
from recovery_lib.io.sinks.release import Released, _released
from recovery_lib.job.runner import check_sink_mode, parse_options
from recovery_lib.job.spec import resolve_job


class Log:
    """One partition of a two_phase topic, appended to in order."""

    def __init__(self) -> None:
        self.records: list[SinkRecord] = []

    def output(self, batch: int, seq: int, token: str, value: str = "") -> SinkRecord:
        rid = output_id(batch, 0, seq)
        return self._append(
            rid, (value or rid).encode(), ((TXN_HEADER, token.encode()),), ts=len(self.records)
        )

    def commit(self, batch: int, tokens: list[str]) -> SinkRecord:
        return self._append(
            None,
            commit_record(batch, tokens),
            ((COMMIT_HEADER, str(batch).encode()),),
            ts=1000 + len(self.records),
        )

    def _append(self, rid, value, headers, ts) -> SinkRecord:
        record = SinkRecord(rid, 0, None, value, "t", 0, len(self.records), headers, ts)
        self.records.append(record)
        return record


def visible(log: Log) -> list[SinkRecord]:
    gate = CommitGate()
    return [out for r in log.records for out in gate.offer(r)]


def test_nothing_is_visible_before_its_commit_record():
    log = Log()
    log.output(0, 0, "a")
    log.output(0, 1, "a")
    assert visible(log) == []
    marker = log.commit(0, ["a"])
    seen = visible(log)
    assert [r.id for r in seen] == ["0-0-0", "0-0-1"]
    assert {r.timestamp_ms for r in seen} == {marker.timestamp_ms}  # visible at the commit


def test_a_failed_attempt_and_a_second_commit_of_a_batch_are_dropped():
    log = Log()
    log.output(0, 0, "a", "first")  # attempt a dies after one record
    log.output(0, 0, "b", "second")  # the retry b writes the whole task
    log.output(0, 1, "b", "second")
    log.commit(0, ["b"])
    log.output(0, 0, "c", "third")  # the driver died before Spark's commit log: b re-runs
    log.commit(0, ["c"])
    log.output(1, 0, "d")
    log.commit(1, ["d"])
    gate = CommitGate()
    seen = [out for r in log.records for out in gate.offer(r)]
    assert [(r.id, r.value) for r in seen] == [
        ("0-0-0", b"second"),
        ("0-0-1", b"second"),
        ("1-0-0", b"1-0-0"),
    ]
    assert gate.dropped == 2 and gate.commits == 2 and gate.pending() == 0


def test_records_of_other_writers_pass_and_other_sinks_commits_are_ignored():
    gate = CommitGate(sink_id="mine")
    plain = SinkRecord("x", 0, None, b"v", "t", 0, 0, (), 5)
    assert gate.offer(plain) == [plain]
    foreign = SinkRecord(
        None,
        0,
        None,
        json.dumps({"batch": 0, "sink": "other", "txns": ["a"]}).encode(),
        "t",
        0,
        1,
        ((COMMIT_HEADER, b"0"),),
        6,
    )
    assert gate.offer(foreign) == [] and gate.commits == 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.booleans()), min_size=1, max_size=30
    )
)
def test_every_committed_output_is_visible_once_whatever_the_attempts(plan):
    """Batches 0..n each run attempts (some die part-way, some get committed twice); the gate
    shows exactly the first committed attempt's outputs of every committed batch."""
    log = Log()
    want: list[str] = []
    attempt = 0
    for batch in sorted({b for b, _, _ in plan}):
        for b, rows, dies in plan:
            if b != batch:
                continue
            token = f"t{attempt}"
            attempt += 1
            for seq in range(rows + 1):
                log.output(batch, seq, token, f"{token}:{seq}")
            if dies:
                continue
            if not any(f"{batch}" == v.split("|")[0] for v in want):
                want += [f"{batch}|{token}:{seq}" for seq in range(rows + 1)]
            log.commit(batch, [token])
    got = [f"{r.id.split('-')[0]}|{r.value.decode()}" for r in visible(log)]
    assert got == want


@pytest.mark.parametrize(
    "last, batch, skip",
    [(Released(5, 9), 5, 10), (Released(4, 9), 5, 0), (Released(6, 0), 5, None)],
)
def test_the_barrier_skips_what_its_partition_released(last, batch, skip):
    assert last.skip_for(batch) == skip


def test_the_barrier_reads_only_ids_of_its_own_sink():
    rid = output_id(3, 1, 7, "q3").encode()
    assert _released({"rl.id": rid}, "q3") == Released(3, 7)
    assert _released({"rl.id": rid}, "") is None
    assert _released({"rl.id": rid, "rl.fence": b"2"}, "q3") is None
    assert _released({}, "") is None


def test_sink_mode_names():
    assert sink_mode("two-phase") == "two_phase" and sink_mode("Release") == "release"
    assert consumer_dedups("dedup") and not consumer_dedups("release")
    with pytest.raises(ValueError, match="at-least-once, dedup, release, two-phase"):
        sink_mode("exactly-once")


def test_release_refuses_a_partition_column():
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from recovery_lib.io.sinks.kafka_sink import validate_sink_schema

    schema = StructType(
        [StructField("value", StringType()), StructField("partition", IntegerType())]
    )
    validate_sink_schema(schema, mode="dedup")
    with pytest.raises(InvalidSinkOption, match="drop the 'partition' column"):
        validate_sink_schema(schema, mode="release")


def test_release_refuses_a_nondeterministic_job_unless_causal(settings_env):
    settings_env(KAFKA_BOOTSTRAP="127.0.0.1:1")  # options only: nothing connects
    prices = resolve_job("prices")
    with pytest.raises(ValueError, match="--mode causal"):
        check_sink_mode(prices, "release", causal=False)
    check_sink_mode(prices, "release", causal=True)  # replayed determinants: accepted
    check_sink_mode(prices, "two_phase", causal=False)
    check_sink_mode(resolve_job("q3"), "release", causal=False)
    with pytest.raises(SystemExit):  # the job's command line says the same
        parse_options(prices, ["--sink-mode", "release", "--param", "price_url=http://x"])


def test_transactional_refuses_a_nondeterministic_job_unless_causal(settings_env):
    # It skips what a partition committed before by id, as the release barrier does.
    settings_env(KAFKA_BOOTSTRAP="127.0.0.1:1")
    prices = resolve_job("prices")
    with pytest.raises(ValueError, match="sink mode transactional needs a replay"):
        check_sink_mode(prices, "transactional", causal=False)
    check_sink_mode(prices, "transactional", causal=True)
    check_sink_mode(resolve_job("q3"), "transactional", causal=False)


def test_a_transactional_job_is_refused_on_a_broker_that_shows_aborted_records(
    settings_env, monkeypatch
):
    from recovery_lib.job import runner
    from recovery_lib.job.frames import sink_options
    from recovery_lib.kafka import capabilities

    settings_env(KAFKA_BOOTSTRAP="127.0.0.1:1")
    opts, _ = parse_options(resolve_job("q3"), ["--sink-mode", "transactional"])
    monkeypatch.setattr(capabilities, "hides_aborted_records", lambda config: False)
    with pytest.raises(ValueError, match="shows aborted transactional records.*Apache Kafka"):
        runner.check_broker_transactions(opts)
    monkeypatch.setattr(capabilities, "hides_aborted_records", lambda config: True)
    runner.check_broker_transactions(opts)  # the runtime tried it: the sink may trust it
    sink = sink_options(opts)
    assert sink["brokerSupportsTransactions"] == "true" and sink["stableOrder"] == "true"
    dedup, _ = parse_options(resolve_job("q3"), ["--sink-mode", "dedup"])
    assert "brokerSupportsTransactions" not in sink_options(dedup)


def test_experiments_refuse_release_for_a_nondeterministic_native_run(settings_env):
    settings_env(KAFKA_BOOTSTRAP="127.0.0.1:1")
    from recovery_lib.experiment.runner import ExperimentConfig

    with pytest.raises(ValueError, match="--mode causal"):
        ExperimentConfig(query="lastbids", sink="release").validate()
    ExperimentConfig(query="lastbids", sink="release", mode="causal").validate()
    ExperimentConfig(query="q3", sink="two-phase").validate()


def test_an_armed_write_failure_raises_once_after_its_rows(tmp_path, monkeypatch):
    from recovery_lib.runtime import faults

    monkeypatch.setenv(faults.ARM_DIR_ENV, str(tmp_path))
    assert faults.sink_write_fault() is None  # nothing armed
    faults.arm(tmp_path, faults.WRITEFAIL_ARM, "rows=3")
    fault = faults.sink_write_fault()
    assert not fault.should_fire(0, 2) and fault.should_fire(0, 3)
    with pytest.raises(faults.InjectedTaskFailure, match="after 3 records"):
        fault.fire()
    assert faults.sink_write_fault() is None  # fired: the retry writes undisturbed


def test_release_output_topics_get_a_partition_per_output_task() -> None:
    from recovery_lib.io.sinks.modes import output_partitions
    from recovery_lib.settings import get_settings

    shuffle = get_settings().spark_shuffle_partitions
    assert output_partitions("release", 2) == max(2, shuffle)
    assert output_partitions("transactional", 64) == max(64, shuffle)
    assert output_partitions("dedup", 2) == output_partitions("at-least-once", 2) == 2
