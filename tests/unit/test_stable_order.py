"""The sink's stable order: output ids depend on the rows a task writes, not on their order."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery_lib.io.sinks.kafka_sink import SinkOptions, stable_order

ROWS = [(f"k{i % 4}", f'{{"n":{i}}}') for i in range(12)]


def framed(rows, cuts):
    bounds = sorted({0, *cuts, len(rows)})
    return [
        pa.RecordBatch.from_pydict(
            {"key": [k for k, _ in rows[a:b]], "value": [v for _, v in rows[a:b]]}
        )
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


def numbered(batches) -> list[tuple[int, str, str]]:
    """(seq, key, value) as the sink numbers them."""
    out = []
    for batch in batches:
        keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
        for key, value in zip(keys, values, strict=True):
            out.append((len(out), key, value))
    return out


@settings(max_examples=60, deadline=None)
@given(st.permutations(list(range(12))), st.lists(st.integers(1, 11), max_size=4))
def test_ids_do_not_depend_on_arrival_order_or_framing(permutation, cuts):
    shuffled = [ROWS[i] for i in permutation]
    assert numbered(stable_order(iter(framed(shuffled, cuts)))) == numbered(
        stable_order(iter(framed(ROWS, [])))
    )


def test_without_it_the_order_decides_the_ids():
    assert numbered(framed(ROWS, [])) != numbered(framed(list(reversed(ROWS)), []))


def test_empty_task_and_option_parsing():
    assert list(stable_order(iter([]))) == []
    opts = SinkOptions.parse({"topic": "t", "stableOrder": "true", "kafka.bootstrap.servers": "x"})
    assert opts.stable_order
    assert not SinkOptions.parse({"topic": "t", "kafka.bootstrap.servers": "x"}).stable_order
