"""The columnar engine (``judge``) gives the plain-Python definition's (``judge_objects``)
verdicts and counts: on every mutant and control of the mutation suite, for every job shape,
and on mutants of every job's real run."""

from __future__ import annotations

import pytest

from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.verify.contract import ConsistencyContract, Fields
from recovery_lib.verify.mutation import OPERATORS, Target
from recovery_lib.verify.oracle import judge, judge_objects
from tests.unit.test_contract_strength import JOBS, load
from tests.unit.test_oracle import CONTRACTS, make_input, run_job, view

SHAPES = {
    **CONTRACTS,
    "nondet_map": ConsistencyContract(
        deterministic=False, agreement=Fields(("k", "x")), free=("noise",)
    ),
}
FIELDS = (
    "verdict",
    "guarantee",
    "outputs",
    "lost",
    "duplicated",
    "divergent",
    "extra",
    "copies",
    "malformed",
    "reference_outputs",
    "duplicates_dropped",
)


@pytest.mark.parametrize("dedup", [True, False])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_both_engines_judge_every_mutant_alike(shape: str, dedup: bool) -> None:
    contract = SHAPES[shape]
    records = make_input(5, n=120)
    reference = run_job(shape, records, 5)
    target = Target.of(reference, contract, dedup, seed=1)
    judged = 0
    for name, (operator, why_not) in OPERATORS.items():
        if why_not(contract) is not None:
            continue
        for mutant in operator(target):
            for inputs in (view(records), None):
                new = judge(shape, contract, mutant.records, reference, dedup, inputs).to_dict()
                old = judge_objects(
                    shape, contract, mutant.records, reference, dedup, inputs
                ).to_dict()
                assert {f: new[f] for f in FIELDS} == {f: old[f] for f in FIELDS}, (name, mutant)
                judged += 1
    assert judged >= 20


@pytest.mark.parametrize("name", JOBS)
def test_both_engines_judge_a_real_runs_mutants_alike(name: str) -> None:
    spec, reference, inputs = load(name)
    target = Target.of(reference, spec.contract, True, seed=2)
    judged = 0
    for operator, why_not in OPERATORS.values():
        if why_not(spec.contract) is not None:
            continue
        mutant = next(operator(target), None)  # one per operator: the suite has the rest
        if mutant is None:
            continue
        new = judge(name, spec.contract, mutant.records, reference, True, inputs).to_dict()
        old = judge_objects(name, spec.contract, mutant.records, reference, True, inputs)
        assert {f: new[f] for f in FIELDS} == {f: old.to_dict()[f] for f in FIELDS}, mutant.what
        judged += 1
    assert judged >= 4


def test_unique_outputs_found_in_sql_are_the_python_definition_s():
    """UniqueOutputs with fields is decided on the outputs sharing a coarse SQL hash
    (columnar.unique_sql): equal values spelled differently (an escaped string, a number with
    more digits) share it and are duplicates; values Python tells apart (5 and 5.0, a missing
    field and a present one) share it or not, and Python decides."""
    from recovery_lib.verify.contract import KeyTotals, UniqueOutputs

    contract = ConsistencyContract(
        deterministic=False,
        agreement=KeyTotals(("a",), "n", "max"),
        invariants=(UniqueOutputs(("a", "n")),),
    )
    values = [
        b'{"a": "\\u00e9", "n": 1}',
        b'{"a": "\xc3\xa9", "n": 1}',  # the same as the first: a re-emitted output
        b'{"a": "x", "n": 2.50}',
        b'{"a": "x", "n": 2.5}',  # the same value, spelled shorter
        b'{"a": "y", "n": 5}',
        b'{"a": "y", "n": 5.0}',  # Python tells 5 from 5.0: not a duplicate
        b'{"a": "z"}',
        b'{"a": "z", "n": null}',  # a missing field reads as null: a duplicate
        b'{"a": "w", "n": 7}',
    ]
    run = [SinkRecord(f"id{i}", None, b"k", v, "t", 0, i, ()) for i, v in enumerate(values)]
    for dedup in (True, False):
        new = judge("u", contract, run, None, dedup).to_dict()
        old = judge_objects("u", contract, run, None, dedup).to_dict()
        inv_new = next(i for i in new["invariants"] if i["name"].startswith("each output once"))
        inv_old = next(i for i in old["invariants"] if i["name"].startswith("each output once"))
        assert inv_new["violations"] == inv_old["violations"] == {"duplicated-input": 3}
        assert sorted(inv_new["examples"]) == sorted(inv_old["examples"])
        assert new["verdict"] == old["verdict"] == "inconsistent"
