"""Runs made by hand that the oracle once judged wrong (issue 34): each must get the verdict
paper 004's definitions give it."""

from __future__ import annotations

import json

from jobs.lastbids import JOB as LASTBIDS
from jobs.nexmark.q12 import JOB as Q12
from jobs.prices import JOB as PRICES
from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.verify.contract import ConsistencyContract, Fields, KeyTotals, UniqueOutputs
from recovery_lib.verify.inputs import InputRecord, InputView
from recovery_lib.verify.oracle import Guarantee, Verdict, judge


def rec(rid: str, value: dict | bytes, key: str) -> SinkRecord:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return SinkRecord(rid, 0, key.encode(), raw, "t", 0, 0, ())


def q12_out(rid: str, bidder: int, num, window: int, key: str | None = None) -> SinkRecord:
    value = {"bidder": bidder, "num": num, "window_start": window}
    return rec(rid, value, str(bidder) if key is None else key)


Q12_REFERENCE = [q12_out("0-0-0", 1000, 5, 0), q12_out("0-0-1", 1001, 4, 0)]


def judge_q12(run: list[SinkRecord]):
    return judge("q12", Q12.contract, run, Q12_REFERENCE, dedup=True)


def test_a_q12_output_under_the_kafka_key_of_another_bidder_is_inconsistent():
    run = [q12_out("0-0-0", 1000, 5, 0, key="1001"), Q12_REFERENCE[1]]
    report = judge_q12(run)
    assert report.verdict is Verdict.INCONSISTENT and report.lost and report.extra


def test_q12_windows_whose_counts_cancel_out_are_inconsistent():
    run = [*Q12_REFERENCE, q12_out("1-0-0", 1000, 3, 10), q12_out("1-0-1", 1000, -3, 20)]
    report = judge_q12(run)
    assert report.verdict is Verdict.INCONSISTENT and report.malformed == 1


def test_an_unknown_bidder_with_a_negative_count_is_inconsistent():
    report = judge_q12([*Q12_REFERENCE, q12_out("1-0-0", 4242, -5, 10)])
    assert report.verdict is Verdict.INCONSISTENT and report.malformed == 1
    assert report.guarantee is Guarantee.NONE


def test_counts_that_are_not_counts_are_verdicts_not_exceptions():
    for bad in (2.5, "5", float("nan"), True, None):
        run = [q12_out("0-0-0", 1000, bad, 0), Q12_REFERENCE[1]]
        report = judge_q12(run)
        assert report.verdict is Verdict.INCONSISTENT, bad
        assert report.malformed == 1, bad


def test_a_q12_output_that_is_not_json_is_malformed():
    report = judge_q12([rec("0-0-0", b"bidder=1000", "1000"), Q12_REFERENCE[1]])
    assert report.verdict is Verdict.INCONSISTENT and report.malformed == 1


# -- lastbids: the lists themselves ------------------------------------------------------------


def bids_input(bids: list[tuple[int, int, int]]) -> InputView:
    """(partition, bidder, auction) in offset order per partition."""
    offsets: dict[int, int] = {}
    records = []
    for p, bidder, auction in bids:
        records.append(
            InputRecord(
                p,
                offsets.get(p, 0),
                b"",
                json.dumps({"bidder": bidder, "auction": auction}).encode(),
            )
        )
        offsets[p] = offsets.get(p, 0) + 1
    return InputView({"bids": "bids"}, reader=lambda _t: records)


def lastbids_out(rid: str, bidder: int, auctions: list[int], n: int) -> SinkRecord:
    value = {"bidder": bidder, "last_auctions": ",".join(map(str, auctions)), "bids": n}
    return rec(rid, value, str(bidder))


def test_a_list_of_the_first_five_bids_instead_of_the_last_five_is_inconsistent():
    inputs = bids_input([(0, 7, a) for a in range(1, 11)])  # ten bids in one partition
    reference = [lastbids_out("0-0-0", 7, [6, 7, 8, 9, 10], 10)]
    run = [lastbids_out("0-0-0", 7, [1, 2, 3, 4, 5], 10)]
    report = judge("lastbids", LASTBIDS.contract, run, reference, True, inputs)
    assert not report.reference_problems
    assert report.verdict is Verdict.INCONSISTENT, report.to_dict()


def test_a_list_from_bids_of_other_partitions_read_first_is_consistent():
    """Partitions interleave freely: the first five of partition 0 can be a run's last five
    when the other five bids are all in partition 1 and were read before them."""
    inputs = bids_input([(0, 7, a) for a in range(1, 6)] + [(1, 7, a) for a in range(6, 11)])
    run = [lastbids_out("0-0-0", 7, [1, 2, 3, 4, 5], 10)]
    reference = [lastbids_out("0-0-0", 7, [6, 7, 8, 9, 10], 10)]
    report = judge("lastbids", LASTBIDS.contract, run, reference, True, inputs)
    assert report.verdict is Verdict.CONSISTENT, report.to_dict()


def test_a_list_in_the_wrong_order_without_the_input_is_not_consistent():
    run = [lastbids_out("0-0-0", 7, [2, 1], 2)]
    reference = [lastbids_out("0-0-0", 7, [1, 2], 2)]
    report = judge("lastbids", LASTBIDS.contract, run, reference, True, None)
    assert report.verdict is Verdict.INCONCLUSIVE, report.to_dict()
    assert "lastbids lists" in report.inconclusive_because
    inputs = bids_input([(0, 7, 1), (0, 7, 2)])
    with_input = judge("lastbids", LASTBIDS.contract, run, reference, True, inputs)
    assert with_input.verdict is Verdict.INCONSISTENT


def test_a_truncated_list_is_inconsistent_even_without_the_input():
    run = [lastbids_out("0-0-0", 7, [3, 4, 5], 5)]
    reference = [lastbids_out("0-0-0", 7, [1, 2, 3, 4, 5], 5)]
    report = judge("lastbids", LASTBIDS.contract, run, reference, True, None)
    assert report.verdict is Verdict.INCONSISTENT


# -- evidence: missing is inconclusive, shown damage is never ---------------------------------


def test_prices_without_a_reference_run_is_inconclusive_not_consistent():
    outputs = [
        rec(f"0-0-{i}", {"auction": i, "bidder": 1, "dateTime": i, "price": 10, "euro": 9.1}, "1")
        for i in range(10)
    ]  # 190 of 200 dropped: nothing without a reference can tell
    report = judge("prices", PRICES.contract, outputs, None, dedup=True)
    assert report.verdict is Verdict.INCONCLUSIVE
    assert "no reference run and no invariant" in report.inconclusive_because


def test_damage_shown_is_inconsistent_even_when_the_failure_did_not_fire():
    reference = [rec(f"0-0-{i}", {"k": i}, "a") for i in range(10)]
    report = judge("x", ConsistencyContract(), reference[3:], reference, True, None, 1)
    assert report.lost == 3 and report.verdict is Verdict.INCONSISTENT


def test_a_failure_that_did_not_fire_leaves_a_clean_run_inconclusive():
    reference = [rec(f"0-0-{i}", {"k": i}, "a") for i in range(10)]
    report = judge("x", ConsistencyContract(), reference, reference, True, None, 1)
    assert report.verdict is Verdict.INCONCLUSIVE


def test_a_reference_with_a_duplicate_under_a_new_id_is_not_failure_free():
    contract = ConsistencyContract(invariants=(UniqueOutputs(),))
    good = [rec(f"0-0-{i}", {"k": i}, "a") for i in range(10)]
    reference = [*good, rec("9-9-9", {"k": 4}, "a")]
    report = judge("x", contract, good, reference, True, None)
    assert report.verdict is Verdict.INCONCLUSIVE, report.to_dict()
    assert "reference run is not failure-free" in report.inconclusive_because
    assert "each output once" in report.inconclusive_because


def test_a_reference_with_divergent_copies_is_not_failure_free():
    good = [rec(f"0-0-{i}", {"k": i}, "a") for i in range(5)]
    reference = [*good, rec("0-0-1", {"k": 99}, "a")]
    report = judge("x", ConsistencyContract(), good, reference, True, None)
    assert report.verdict is Verdict.INCONCLUSIVE and report.reference_problems


def test_a_bad_reference_does_not_hide_the_runs_own_damage():
    contract = ConsistencyContract(invariants=(UniqueOutputs(),))
    good = [rec(f"0-0-{i}", {"k": i}, "a") for i in range(5)]
    reference = [*good, rec("9-9-9", {"k": 4}, "a")]
    run = [*good, rec("0-0-1", {"k": 99}, "a")]  # a divergent replay in the run itself
    report = judge("x", contract, run, reference, True, None)
    assert report.verdict is Verdict.INCONSISTENT and report.divergent == 1


def test_copies_whose_json_differs_only_in_key_order_are_one_value():
    a = rec("0-0-0", b'{"a": 1, "b": [1, 2]}', "k")
    b = rec("0-0-0", b'{"b":[1,2],"a":1}', "k")
    report = judge("x", ConsistencyContract(), [a, b], [a], dedup=True)
    assert report.divergent == 0 and report.verdict is Verdict.CONSISTENT
    c = rec("0-0-0", b'{"b":[2,1],"a":1}', "k")
    assert judge("x", ConsistencyContract(), [a, c], [a], dedup=True).divergent == 1


def test_free_fields_must_not_be_agreed_on():
    import pytest

    with pytest.raises(ValueError, match="both free and agreed"):
        ConsistencyContract(deterministic=False, agreement=Fields(("a",)), free=("a",))
    with pytest.raises(ValueError, match="Exact"):
        ConsistencyContract(free=("a",))
    assert KeyTotals("k", "n").keys == ("k",)
