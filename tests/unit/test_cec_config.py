"""How a CEC job is declared and refused: the aggregate spec, the replay's parser (it must
agree with the streaming side's dead-letter rules), the experiment's failure kinds."""

from __future__ import annotations

import pytest

from recovery_lib.cec import AggregateSpec, CountWindows, TimeWindows
from recovery_lib.cec.policy import CheckpointPolicy
from recovery_lib.cec.spark import json_fields
from recovery_lib.experiment.runner import ExperimentConfig


def test_time_windows_need_an_event_time_and_aggregates_are_known() -> None:
    with pytest.raises(ValueError, match="time windows need event_time"):
        AggregateSpec("k", "v", TimeWindows(1000))
    with pytest.raises(ValueError, match="aggregate 'median'"):
        AggregateSpec("k", "v", CountWindows(3), aggregate="median")
    with pytest.raises(ValueError, match="need 1 <= slide <= size"):
        TimeWindows(1000, 2000)
    with pytest.raises(ValueError, match="0 < CI <= CP"):
        CheckpointPolicy(interval_ms=200, period_ms=100)


def test_sliding_window_starts_cover_the_event() -> None:
    kind = TimeWindows(10, 3)
    for event in range(-20, 40):
        starts = list(kind.starts(event))
        assert all(s <= event < s + 10 and s % 3 == 0 for s in starts)
        assert len(starts) == len([s for s in range(-30, 40) if s % 3 == 0 and s <= event < s + 10])


def test_replay_parser_takes_what_the_stream_takes() -> None:
    parse = json_fields(AggregateSpec("auction", "price", TimeWindows(10), "max", "dateTime"))
    assert parse(b'{"auction": 7, "price": 12, "dateTime": 1000}') == ("7", 12.0, 1000)
    # Dead-lettered on the streaming side (not JSON, missing or non-numeric fields): skipped.
    for bad in (b"not json", b'{"auction": 7}', b'{"auction": 7, "price": "12", "dateTime": 1}'):
        assert parse(bad) is None
    assert parse(b'{"auction": 7, "price": true, "dateTime": 1}') is None


def test_experiment_failure_kinds_of_cec() -> None:
    with pytest.raises(ValueError, match="torn-write .* needs --mode cec"):
        ExperimentConfig(query="avgprice", mode="native", fail="torn-write").validate()
    with pytest.raises(ValueError, match="write-retry fails a sink task"):
        ExperimentConfig(query="avgprice", mode="cec", fail="write-retry").validate()
    ExperimentConfig(query="avgprice", mode="cec", fail="torn-write,mid-write", repeat=2).validate()


def test_jobs_file_mode_cec_leaves_the_sink_and_the_standby_alone() -> None:
    from pydantic import ValidationError

    from recovery_lib.ops.config import StreamJob

    assert StreamJob(name="avg", job="avgprice", mode="cec").mode == "cec"
    with pytest.raises(ValidationError, match="mode cec writes its output log itself"):
        StreamJob(name="avg", job="avgprice", mode="cec", sink_mode="release")
    with pytest.raises(ValidationError, match="mode cec writes its output log itself"):
        StreamJob(name="avg", job="avgprice", mode="standby", process="cec")
