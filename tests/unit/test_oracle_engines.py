"""The columnar engine (``judge``) gives the plain-Python definition's (``judge_objects``)
verdicts and counts: on every mutant and control of the mutation suite, for every job shape."""

from __future__ import annotations

import pytest

from recovery_lib.verify.contract import ConsistencyContract, Fields
from recovery_lib.verify.mutation import OPERATORS, Target
from recovery_lib.verify.oracle import judge, judge_objects
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
