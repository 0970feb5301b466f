"""The judge checks every field of an output against the job's output schema, and every window
against the times a run could open one (verify/schema.py, ConsistencyContract.windows): an
output no run could produce is never exactly-once, whatever field is wrong, in both engines."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery_lib.cli.verify_cmd import time_span
from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.verify.contract import ConsistencyContract, Fields, KeyTotals, TimeSpan, Windows
from recovery_lib.verify.oracle import Guarantee, Verdict, judge, judge_objects
from recovery_lib.verify.schema import OutputSchema, SchemaError, SchemaStore, array_of
from tests.unit.test_contract_strength import load

SCHEMA = OutputSchema(
    {
        "type": "struct",
        "fields": [
            {"name": "bidder", "type": "long", "nullable": False, "metadata": {}},
            {"name": "num", "type": "long", "nullable": False, "metadata": {}},
            {"name": "price", "type": "double", "nullable": True, "metadata": {}},
            {"name": "at", "type": "timestamp", "nullable": True, "metadata": {}},
            {"name": "tags", "type": array_of("integer"), "nullable": True, "metadata": {}},
        ],
    }
)
GOOD = {"bidder": 7, "num": 2, "price": 1.5, "at": "2026-11-28T10:00:00.000Z", "tags": [1, 2]}


@pytest.mark.parametrize(
    "change, why",
    [
        ({"bidder": None}, "bidder: null"),
        ({"num": "banana"}, 'num: "banana" is not a long'),
        ({"num": 2.5}, "is not a long"),
        ({"num": True}, "is not a long"),
        ({"num": 2**63}, "out of a long's range"),
        ({"price": "banana"}, "is not a double"),
        ({"at": "yesterday"}, "is not a timestamp"),
        ({"at": 5}, "is not a timestamp"),
        ({"tags": [1, None]}, "null in an array"),
        ({"tags": [1, 2**31]}, "out of a integer's range"),
        ({"tags": "1,2"}, "is not an array"),
        ({"extra": 1}, "field extra: not in the output schema"),
    ],
)
def test_a_value_that_does_not_fit_the_schema_is_named(change: dict[str, Any], why: str) -> None:
    assert SCHEMA.problem(GOOD) is None
    problem = SCHEMA.problem({**GOOD, **change})
    assert problem is not None and why in problem, problem


def test_missing_fields_nulls_and_non_finite_doubles() -> None:
    without = {k: v for k, v in GOOD.items() if k != "price"}
    # output() writes nulls, so a missing field is never a null there ...
    assert SCHEMA.problem(without) == "field price: missing"
    # ... a value serialized with Spark's default (nulls left out) may miss a nullable field.
    lenient = dataclasses.replace(SCHEMA, nulls_written=False)
    assert lenient.problem(without) is None
    assert lenient.problem({k: v for k, v in GOOD.items() if k != "num"}) == "field num: missing"
    assert SCHEMA.problem({**GOOD, "price": None}) is None  # nullable
    assert SCHEMA.problem({**GOOD, "price": "NaN"}) is None  # how to_json writes NaN


def test_a_schema_must_be_a_spark_struct_type() -> None:
    with pytest.raises(SchemaError, match="unknown Spark type 'lng'"):
        OutputSchema.declared({"a": "lng"})
    with pytest.raises(SchemaError, match="is a struct"):
        OutputSchema({"type": "array", "elementType": "long", "containsNull": False})
    with pytest.raises(SchemaError, match="not JSON"):
        OutputSchema.from_json("{")


def test_the_store_keeps_one_schema_per_output(tmp_path) -> None:
    store = SchemaStore(tmp_path)
    assert store.lookup("nx.out.q1") is None
    store.record("nx.out.q1", SCHEMA)
    assert store.lookup("nx.out.q1") == SCHEMA
    store.path("nx.out.q1").write_text("{broken")
    assert store.lookup("nx.out.q1") is None  # unreadable: logged, not checked


# -- the issue's cases, on q12's real run -----------------------------------------------------


def _q12() -> tuple[Any, list[SinkRecord], Any]:
    spec, reference, inputs = load("q12")
    assert spec.contract.output_schema is not None, "the fixture records q12's output schema"
    return spec, reference, inputs


def _with_window(record: SinkRecord, window: Any) -> SinkRecord:
    value = json.loads(record.value)
    if window is ...:
        del value["window_start"]
    else:
        value["window_start"] = window
    return dataclasses.replace(record, value=json.dumps(value).encode())


@pytest.mark.parametrize(
    "window, why",
    [
        (..., "field window_start: missing"),
        ("banana", 'window_start: "banana" is not a long'),
        (10**15, "window starts at 1000000000000000"),  # the year 33658
    ],
)
@pytest.mark.parametrize("engine", [judge, judge_objects])
def test_a_q12_output_whose_window_no_run_opened_is_malformed(engine, window, why) -> None:
    spec, reference, inputs = _q12()
    victim = next(i for i, r in enumerate(reference) if b'"bidder":1,' not in r.value)
    run = [*reference[:victim], _with_window(reference[victim], window), *reference[victim + 1 :]]
    report = engine(spec.name, spec.contract, run, reference, True, inputs)
    assert report.verdict is Verdict.INCONSISTENT and report.guarantee is Guarantee.NONE
    assert report.malformed == 1 and why in report.examples["malformed"][0], report.examples
    # What the agreement alone said (the judge before the schema and the windows): fine.
    bare = dataclasses.replace(spec.contract, output_schema=None, windows=None)
    assert engine(spec.name, bare, run, reference, True, inputs).verdict is Verdict.CONSISTENT


def test_the_run_s_clock_places_processing_time_windows() -> None:
    spec, reference, inputs = _q12()
    starts = [json.loads(r.value)["window_start"] for r in reference]
    clock = TimeSpan(min(starts), max(starts) + 10_000)
    fine = judge(spec.name, spec.contract, reference, reference, True, inputs, clock=clock)
    assert fine.verdict is Verdict.CONSISTENT, fine.to_dict()
    assert fine.window_span == clock and fine.output_schema == ["bidder", "num", "window_start"]
    # The same outputs judged as a run that ended before its windows opened.
    early = TimeSpan(0, min(starts) - 1)
    late = judge(spec.name, spec.contract, reference, reference, True, inputs, clock=early)
    assert late.malformed == len(reference) and late.verdict is Verdict.INCONSISTENT


def test_an_event_time_window_outside_the_input_is_malformed() -> None:
    spec, reference, inputs = load("q7")
    record = reference[0]
    value = json.loads(record.value)
    for moved, why in ((0, "before the first event"), (10**15, "after the last event")):
        run = [
            dataclasses.replace(record, value=json.dumps({**value, "window_start": moved}).encode())
        ]
        run += reference[1:]
        for engine in (judge, judge_objects):
            report = engine(spec.name, spec.contract, run, reference, True, inputs)
            assert report.malformed == 1 and why in report.examples["malformed"][0]
    span = judge(spec.name, spec.contract, reference, reference, True, inputs).window_span
    assert span is not None and span.first_ms <= value["dateTime"] <= span.last_ms


# -- the columnar engine decides as the plain one ------------------------------------------------

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["NaN", "banana", "2026-11-28T10:00:00Z", "2026-13-99", "1e999"]),
    st.lists(st.one_of(st.none(), st.integers(-(2**33), 2**33)), max_size=3),
)
EDITS = st.dictionaries(
    st.sampled_from(["bidder", "num", "price", "at", "tags", "other"]), VALUES, max_size=2
)
CONTRACT = ConsistencyContract(
    deterministic=False,
    agreement=KeyTotals(("bidder",), "num", "sum"),
    output_schema=SCHEMA,
    windows=Windows("num", size_ms=10, clock="processing"),
)
# The same outputs under each agreement the columnar engine reads from the typed value.
CONTRACTS = {
    "totals": CONTRACT,
    "fields": dataclasses.replace(CONTRACT, agreement=Fields(("bidder", "num"))),
    "exact": dataclasses.replace(CONTRACT, deterministic=True, agreement=None),
}


def _record(i: int, value: dict[str, Any] | str) -> SinkRecord:
    # Written as Spark's to_json writes (no spaces): the columnar engine's SQL decides these.
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return SinkRecord(f"id{i}", 0, b"k", text.encode(), "t", 0, i, ())


@settings(max_examples=40, deadline=None)
@given(
    edits=st.lists(st.tuples(EDITS, st.sets(st.sampled_from(list(GOOD)), max_size=1)), max_size=6),
    raw=st.lists(
        st.sampled_from(["not json", "5", "[1]", '{"bidder": 7, "num": 1e999}']), max_size=2
    ),
)
def test_both_engines_find_the_same_malformed_outputs(edits, raw) -> None:
    for contract in CONTRACTS.values():
        _same_in_both_engines(contract, edits, raw)


def _same_in_both_engines(contract: ConsistencyContract, edits: Any, raw: Any) -> None:
    good = [_record(i, {**GOOD, "num": i}) for i in range(5)]
    run = list(good)
    for n, (change, dropped) in enumerate(edits):
        value = {k: v for k, v in {**GOOD, **change}.items() if k not in dropped}
        run.append(_record(100 + n, value))
    run += [_record(200 + n, text) for n, text in enumerate(raw)]
    clock = TimeSpan(0, 50)
    columnar = judge("t", contract, run, good, True, clock=clock, reference_clock=clock)
    plain = judge_objects("t", contract, run, good, True, clock=clock, reference_clock=clock)
    fields = ("malformed", "verdict", "guarantee", "lost", "extra", "duplicated", "outputs")
    assert {f: getattr(columnar, f) for f in fields} == {f: getattr(plain, f) for f in fields}
    assert columnar.examples["malformed"] == plain.examples["malformed"]


def test_a_null_inside_an_array_is_found_where_the_structure_hides_it() -> None:
    """[1] and [1, null] have one json_structure: the columnar engine must not let the sample
    of one decide for the other."""
    schema = OutputSchema.declared({"tags": array_of("long")})
    contract = ConsistencyContract(output_schema=schema)
    run = [_record(0, {"tags": [1]}), _record(1, {"tags": [1, None]})]
    for engine in (judge, judge_objects):
        assert engine("t", contract, run, run[:1], True).malformed == 1


def test_the_clock_option_takes_two_milliseconds() -> None:
    assert time_span("5,9", "--clock") == TimeSpan(5, 9)
    assert time_span(None, "--clock") is None
    with pytest.raises(ValueError, match="--clock 'x': give FIRST_MS,LAST_MS"):
        time_span("x", "--clock")
    with pytest.raises(ValueError, match="ends before it starts"):
        time_span("9,5", "--clock")
