"""Determinants piggybacked on output records (causal storage "output"), without Spark: the
carrier blob, the operator side that attaches it, and the sink's refusal to lose it. The Kafka
round trip runs end to end in tests/test_causal_e2e.py."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

from recovery_lib.causal.determinants import (
    CorruptDeterminants,
    Determinant,
    DeterminantRun,
    StreamKey,
    assemble,
    decode_runs,
    encode_runs,
)
from recovery_lib.causal.log import CausalConfig, OutputCarriedLog
from recovery_lib.causal.operators import flushing
from recovery_lib.causal.services import CausalContext
from recovery_lib.io.exceptions import InvalidSinkOption
from recovery_lib.io.sinks.ids import DET_COLUMN
from recovery_lib.io.sinks.kafka_sink import validate_sink_schema

KEY = StreamKey("job", 7, "convert", 1)

values = st.one_of(st.integers(), st.floats(allow_nan=False), st.text(), st.binary())


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.lists(values, min_size=1, max_size=5)),
        min_size=1,
        max_size=6,
    )
)
def test_runs_survive_the_carrier_blob(specs):
    runs = [
        DeterminantRun(
            StreamKey("job", batch, "s", batch % 3), 0, tuple(Determinant("call", v) for v in vs)
        )
        for batch, vs in specs
    ]
    assert decode_runs(encode_runs(runs)) == runs


def test_a_torn_carrier_is_detected():
    blob = encode_runs([DeterminantRun(KEY, 0, (Determinant("seed", 42),))])
    with pytest.raises(CorruptDeterminants, match="truncated"):
        decode_runs(blob[:-3])
    flipped = blob[:-2] + bytes([blob[-2] ^ 0xFF]) + blob[-1:]
    with pytest.raises(CorruptDeterminants, match="checksum"):
        decode_runs(flipped)


def _context(tmp_path) -> CausalContext:
    cfg = CausalConfig(job="job", state_dir=str(tmp_path), storage="output", output_topic="job.out")
    return CausalContext(KEY, OutputCarriedLog(cfg))


@pytest.mark.parametrize("kind", ["arrow", "pandas"])
def test_each_output_batch_carries_what_was_logged_before_it_and_empty_ones_carry_nothing(
    tmp_path, kind
):
    ctx = _context(tmp_path)

    def frame(n: int):
        data = {"x": list(range(n))}
        return pa.RecordBatch.from_pydict(data) if kind == "arrow" else pd.DataFrame(data)

    def fn():
        ctx.call(lambda: 1)
        yield frame(0)  # nothing to carry it: the determinant must wait
        ctx.call(lambda: 2)
        yield frame(3)
        yield frame(2)  # nothing new
        ctx.call(lambda: 3)
        yield frame(1)
        ctx.call(lambda: 4)  # logged after the last output: no output depends on it

    outs = list(flushing(ctx, fn()))
    columns = [
        o.column(DET_COLUMN).to_pylist() if kind == "arrow" else list(o[DET_COLUMN]) for o in outs
    ]
    assert [len(c) for c in columns] == [0, 3, 2, 1]
    assert columns[1][1:] == [None, None] and columns[2] == [None, None]
    carried = decode_runs(columns[1][0]) + decode_runs(columns[3][0])
    assert [d.value for d in assemble(carried)] == [1, 2, 3]
    # The stream's marker is written before anything rides, so a re-execution reads the log.
    assert ctx.log.may_have(KEY)


def test_the_sink_refuses_to_start_when_the_determinant_column_was_dropped():
    plain = StructType([StructField("value", StringType())])
    with pytest.raises(InvalidSinkOption, match="carried"):
        validate_sink_schema(plain, carrier_required=True)
    validate_sink_schema(plain)  # a job without piggybacking is fine
    with_carrier = StructType([*plain.fields, StructField(DET_COLUMN, BinaryType())])
    validate_sink_schema(with_carrier, carrier_required=True)
    pinned = StructType([*with_carrier.fields, StructField("partition", IntegerType())])
    with pytest.raises(InvalidSinkOption, match="one partition"):
        validate_sink_schema(pinned)


def test_output_storage_needs_the_output_topic():
    with pytest.raises(ValueError, match="output_topic"):
        CausalConfig(job="j", state_dir="/tmp/x", storage="output")
