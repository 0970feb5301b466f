"""What a source task says when a planned offset is gone (io/range_reader.py): the broker lost
records the query had planned (a restarted empty broker: the driver's refusal, seen first by a
task), or retention deleted them."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from recovery_lib.io.exceptions import InputBehindCheckpoint, OffsetsUnavailable
from recovery_lib.io.range_reader import OUT_OF_RANGE, _lost
from recovery_lib.io.source_options import KafkaRange


class Watermarks:
    def __init__(self, low: int, high: int) -> None:
        self.marks = (low, high)

    def get_watermark_offsets(self, tp, timeout):  # noqa: ANN001, ANN201
        return self.marks


RANGE = KafkaRange("in.bids", 0, 5_000, 6_000)


def test_a_log_that_ends_before_the_planned_range_is_the_input_behind_the_checkpoint():
    gone = _lost(Watermarks(0, 100), RANGE, 5_000)
    assert isinstance(gone, InputBehindCheckpoint)
    assert "in.bids/0 read up to 5000, the log ends at 100" in str(gone)


def test_records_deleted_below_a_live_log_are_unavailable():
    gone = _lost(Watermarks(5_500, 9_000), RANGE, 5_000)
    assert isinstance(gone, OffsetsUnavailable) and "lost or deleted them" in str(gone)


def test_librdkafka_s_reset_error_counts_as_out_of_range():
    assert {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE} == OUT_OF_RANGE


def test_a_broker_that_does_not_answer_leaves_the_range_unavailable():
    class Down:
        def get_watermark_offsets(self, tp, timeout):  # noqa: ANN001, ANN201
            raise RuntimeError("broker down")

    with pytest.raises(OffsetsUnavailable):
        raise _lost(Down(), RANGE, 5_000)
