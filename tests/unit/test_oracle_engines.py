"""The columnar engine (``judge``) gives the plain-Python definition's (``judge_objects``)
verdicts and counts: on every mutant and control of the mutation suite, for every job shape,
and on mutants of every job's real run."""

from __future__ import annotations

import pytest

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
