"""The oracle must be able to say no (paper 004, definitions 6-8), for every kind of job.

Four job shapes are simulated from a generated input with random batch boundaries, random
interleaving of partitions within a batch and random free fields: a deterministic map, a
nondeterministic map (a random field), a windowed aggregate whose windows a run chooses
(processing time), and an order-sensitive running list (lastbids). Any failure-free run passes
against any other; each kind of damage is caught with the right guarantee class.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jobs.lastbids import JOB as LASTBIDS
from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.verify.contract import ConsistencyContract, Fields, KeyTotals
from recovery_lib.verify.inputs import InputRecord, InputView
from recovery_lib.verify.oracle import Guarantee, Verdict, judge

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DETERMINISTIC = ConsistencyContract()
NONDET_MAP = ConsistencyContract(deterministic=False, agreement=Fields(("k", "x")))
WINDOWED = ConsistencyContract(deterministic=False, agreement=KeyTotals("k", "n", "sum"))


def rec(rid: str, value: dict, key: str = "k") -> SinkRecord:
    return SinkRecord(rid, 0, key.encode(), json.dumps(value).encode(), "t", 0, 0, ())


# -- a generated input and failure-free runs of the four job shapes --------------------------


def make_input(seed: int, n: int = 60, parts: int = 3) -> list[InputRecord]:
    rng = random.Random(seed)
    per_part: dict[int, int] = defaultdict(int)
    records = []
    for i in range(n):
        p = rng.randrange(parts)
        bidder = rng.randrange(4)
        value = {"bidder": bidder, "auction": 1000 + i, "x": rng.randrange(100)}
        records.append(
            InputRecord(p, per_part[p], str(bidder).encode(), json.dumps(value).encode())
        )
        per_part[p] += 1
    return records


def batches(records: list[InputRecord], rng: random.Random) -> list[list[InputRecord]]:
    """Cut each partition at random offsets, interleave each batch's partitions at random
    (every partition keeps its order, as Spark's do)."""
    by_part: dict[int, list[InputRecord]] = defaultdict(list)
    for r in records:
        by_part[r.partition].append(r)
    n_batches = rng.randint(1, 5)
    cuts = {
        p: sorted(rng.randint(0, len(rs)) for _ in range(n_batches - 1))
        for p, rs in by_part.items()
    }
    out = []
    for b in range(n_batches):
        queues = []
        for p, rs in by_part.items():
            edges = [0, *cuts[p], len(rs)]
            queues.append(list(rs[edges[b] : edges[b + 1]]))
        merged = []
        while any(queues):
            q = rng.choice([q for q in queues if q])
            merged.append(q.pop(0))
        out.append(merged)
    return out


def run_job(shape: str, records: list[InputRecord], seed: int) -> list[SinkRecord]:
    rng = random.Random(seed)
    out: list[SinkRecord] = []
    lists: dict[int, list[str]] = defaultdict(list)
    counts: dict[int, int] = defaultdict(int)
    for b, batch in enumerate(batches(records, rng)):
        rows: list[tuple[str, dict]] = []
        if shape in ("deterministic", "nondet_map"):
            for r in batch:
                v = json.loads(r.value)
                row = {"k": v["bidder"], "x": v["x"] * 2}
                if shape == "nondet_map":
                    row["noise"] = rng.random()
                rows.append((str(v["bidder"]), row))
        elif shape == "windowed":
            windows: dict[tuple[int, int], int] = defaultdict(int)
            for r in batch:
                v = json.loads(r.value)
                windows[(v["bidder"], b * 10 + rng.randrange(2))] += 1
            rows = [(str(k), {"k": k, "w": w, "n": n}) for (k, w), n in sorted(windows.items())]
        else:  # lastbids
            touched = []
            for r in batch:
                v = json.loads(r.value)
                lists[v["bidder"]].append(str(v["auction"]))
                counts[v["bidder"]] += 1
                if v["bidder"] not in touched:
                    touched.append(v["bidder"])
            rows = [
                (
                    str(bidder),
                    {
                        "bidder": bidder,
                        "last_auctions": ",".join(lists[bidder][-5:]),
                        "bids": counts[bidder],
                    },
                )
                for bidder in sorted(touched)
            ]
        out += [rec(f"{b}-0-{i}", row, key) for i, (key, row) in enumerate(rows)]
    return out


CONTRACTS = {
    "deterministic": DETERMINISTIC,
    "nondet_map": NONDET_MAP,
    "windowed": WINDOWED,
    "lastbids": LASTBIDS.contract,
}
SHAPES = list(CONTRACTS)


def view(records: list[InputRecord]) -> InputView:
    return InputView({"bids": "bids"}, reader=lambda _topic: records)


def judge_shape(shape, run, reference, records, dedup=True, **kw):
    return judge(shape, CONTRACTS[shape], run, reference, dedup, view(records), **kw)


# -- the converse: failure-free runs pass ------------------------------------------------------


@PROPERTY
@given(shape=st.sampled_from(SHAPES), seed=st.integers(0, 10_000), other=st.integers(0, 10_000))
def test_any_failure_free_run_passes_against_another(shape, seed, other):
    records = make_input(seed)
    report = judge_shape(
        shape, run_job(shape, records, other), run_job(shape, records, seed), records
    )
    assert report.guarantee is Guarantee.EXACTLY_ONCE, report.to_dict()
    assert report.verdict is Verdict.CONSISTENT


# -- damage, each caught ------------------------------------------------------------------------


def last_per_key(run: list[SinkRecord], field: str) -> list[int]:
    """Indexes of each key's last output (the one a running result ends with)."""
    last = {}
    for i, r in enumerate(run):
        last[json.loads(r.value)[field]] = i
    return sorted(last.values())


@PROPERTY
@given(shape=st.sampled_from(SHAPES), seed=st.integers(0, 10_000), pick=st.integers(0, 10**6))
def test_a_dropped_output_is_lost(shape, seed, pick):
    records = make_input(seed)
    reference, run = run_job(shape, records, seed), run_job(shape, records, seed + 1)
    # A running list's middle output may be skipped by another batching; its last may not.
    candidates = last_per_key(run, "bidder") if shape == "lastbids" else range(len(run))
    victim = list(candidates)[pick % len(candidates)]
    damaged = run[:victim] + run[victim + 1 :]
    report = judge_shape(shape, damaged, reference, records)
    assert report.guarantee in (Guarantee.AT_MOST_ONCE, Guarantee.NONE), report.to_dict()
    assert report.lost and report.verdict is Verdict.INCONSISTENT


@PROPERTY
@given(shape=st.sampled_from(SHAPES), seed=st.integers(0, 10_000), pick=st.integers(0, 10**6))
def test_an_output_reemitted_under_a_new_id_is_a_duplicate(shape, seed, pick):
    records = make_input(seed)
    reference, run = run_job(shape, records, seed), run_job(shape, records, seed + 1)
    victim = run[pick % len(run)]
    damaged = [*run, rec("99-9-9", json.loads(victim.value), victim.key.decode())]
    report = judge_shape(shape, damaged, reference, records)
    assert report.guarantee is Guarantee.AT_LEAST_ONCE, report.to_dict()
    assert report.verdict is Verdict.INCONSISTENT


@PROPERTY
@given(shape=st.sampled_from(SHAPES), seed=st.integers(0, 10_000), pick=st.integers(0, 10**6))
def test_same_id_copies_are_duplicates_only_for_consumers_without_dedup(shape, seed, pick):
    records = make_input(seed)
    reference, run = run_job(shape, records, seed), run_job(shape, records, seed + 1)
    damaged = [*run, run[pick % len(run)]]  # a replayed write: same id, same content
    deduped = judge_shape(shape, damaged, reference, records, dedup=True)
    assert deduped.guarantee is Guarantee.EXACTLY_ONCE and deduped.duplicates_dropped == 1
    raw = judge_shape(shape, damaged, reference, records, dedup=False)
    assert raw.guarantee is Guarantee.AT_LEAST_ONCE and raw.duplicated >= 1


@PROPERTY
@given(shape=st.sampled_from(SHAPES), seed=st.integers(0, 10_000), pick=st.integers(0, 10**6))
def test_values_swapped_between_ids_on_replay_are_divergent(shape, seed, pick):
    records = make_input(seed)
    reference, run = run_job(shape, records, seed), run_job(shape, records, seed + 1)
    a = run[pick % len(run)]
    b = next((r for r in run if r.value != a.value), None)
    if b is None:
        b = rec("98-9-9", {"k": -1, "bidder": -1, "x": -1, "n": 1, "bids": 1}, "z")
        run = [*run, b]
    replayed = [
        SinkRecord(a.id, 0, b.key, b.value, "t", 0, 0, ()),
        SinkRecord(b.id, 0, a.key, a.value, "t", 0, 0, ()),
    ]
    report = judge_shape(shape, [*run, *replayed], reference, records)
    assert report.divergent == 2 and report.guarantee is Guarantee.NONE, report.to_dict()


@PROPERTY
@given(seed=st.integers(0, 10_000), pick=st.integers(0, 10**6))
def test_values_swapped_between_outputs_of_a_deterministic_job_are_lost_and_extra(seed, pick):
    records = make_input(seed)
    reference, run = run_job("deterministic", records, seed), run_job("deterministic", records, 1)
    a = pick % len(run)
    b = next(
        (i for i, r in enumerate(run) if r.key != run[a].key and r.value != run[a].value), None
    )
    assume(b is not None)  # two keys with different values (hypothesis fails if rarely so)
    damaged = list(run)
    damaged[a] = SinkRecord(run[a].id, 0, run[a].key, run[b].value, "t", 0, 0, ())
    damaged[b] = SinkRecord(run[b].id, 0, run[b].key, run[a].value, "t", 0, 0, ())
    report = judge_shape("deterministic", damaged, reference, records)
    assert report.lost == 2 and report.extra == 2 and report.guarantee is Guarantee.NONE


@PROPERTY
@given(seed=st.integers(0, 10_000), pick=st.integers(0, 10**6))
def test_a_reordered_running_list_is_caught(seed, pick):
    records = make_input(seed)
    reference, run = run_job("lastbids", records, seed), run_job("lastbids", records, seed + 1)
    partition_of = {json.loads(r.value)["auction"]: r.partition for r in records}
    candidates = []
    for i, r in enumerate(run):
        auctions = json.loads(r.value)["last_auctions"].split(",")
        for x in range(len(auctions)):
            for y in range(x + 1, len(auctions)):
                if partition_of[int(auctions[x])] == partition_of[int(auctions[y])]:
                    candidates.append((i, x, y))
    assume(candidates)  # a list holds two auctions of one partition
    i, x, y = candidates[pick % len(candidates)]
    value = json.loads(run[i].value)
    auctions = value["last_auctions"].split(",")
    auctions[x], auctions[y] = auctions[y], auctions[x]
    value["last_auctions"] = ",".join(auctions)
    damaged = list(run)
    damaged[i] = rec(run[i].id, value, run[i].key.decode())
    report = judge_shape("lastbids", damaged, reference, records)
    assert report.guarantee is Guarantee.NONE, report.to_dict()


def test_reordered_lists_are_generated_often_enough():
    """The reorder property above judges something in most examples (not only early returns)."""
    hits = 0
    for seed in range(40):
        records = make_input(seed)
        partition_of = {json.loads(r.value)["auction"]: r.partition for r in records}
        run = run_job("lastbids", records, seed)
        lists = [json.loads(r.value)["last_auctions"].split(",") for r in run]
        hits += any(len({partition_of[int(a)] for a in lst}) < len(lst) for lst in lists)
    assert hits >= 30


@PROPERTY
@given(shape=st.sampled_from(SHAPES), seed=st.integers(0, 10_000), cut=st.floats(0.0, 0.8))
def test_a_truncated_run_is_at_most_once(shape, seed, cut):
    records = make_input(seed)
    reference, run = run_job(shape, records, seed), run_job(shape, records, seed + 1)
    damaged = run[: int(len(run) * cut)]
    report = judge_shape(shape, damaged, reference, records)
    assert report.guarantee is Guarantee.AT_MOST_ONCE, report.to_dict()
    assert report.verdict is Verdict.INCONSISTENT


# -- verdicts that must not be "consistent" ---------------------------------------------------


def test_an_empty_run_is_at_most_once_not_consistent():
    records = make_input(1)
    report = judge_shape("nondet_map", [], run_job("nondet_map", records, 1), records)
    assert report.guarantee is Guarantee.AT_MOST_ONCE and report.verdict is Verdict.INCONSISTENT


def test_a_failure_that_did_not_fire_makes_the_verdict_inconclusive():
    records = make_input(2)
    ref = run_job("deterministic", records, 2)
    report = judge_shape("deterministic", ref, ref, records, failures_not_fired=1)
    assert report.guarantee is Guarantee.EXACTLY_ONCE
    assert report.verdict is Verdict.INCONCLUSIVE and "did not fire" in report.inconclusive_because
    assert report.to_dict()["verdict"] == "inconclusive"


def test_nothing_produced_on_either_side_is_inconclusive():
    report = judge("x", DETERMINISTIC, [], [], dedup=True)
    assert report.verdict is Verdict.INCONCLUSIVE


def test_lost_and_duplicated_together_is_no_guarantee():
    records = make_input(3)
    ref = run_job("deterministic", records, 3)
    damaged = [*ref[1:], rec("77-0-0", json.loads(ref[-1].value), ref[-1].key.decode())]
    report = judge_shape("deterministic", damaged, ref, records)
    assert report.lost and report.duplicated and report.guarantee is Guarantee.NONE


def test_a_count_short_against_the_input_is_missing_input():
    """Q12's invariant judges against the input itself, not only against the reference."""
    from jobs.nexmark.q12 import JOB as Q12

    bids = [
        InputRecord(0, i, b"", json.dumps({"bidder": 1000 + i % 2, "auction": 1}).encode())
        for i in range(10)
    ]
    outputs = [
        rec("0-0-0", {"bidder": 1000, "num": 5, "window_start": 0}),
        rec("0-0-1", {"bidder": 1001, "num": 4, "window_start": 0}),
    ]
    report = judge("q12", Q12.contract, outputs, None, True, view(bids))
    (result,) = report.invariants
    assert result.checked and not result.ok
    assert report.guarantee is Guarantee.AT_MOST_ONCE


def test_a_nondeterministic_contract_must_say_what_runs_agree_on():
    with pytest.raises(ValueError, match="agreement"):
        ConsistencyContract(deterministic=False)


def test_an_invariant_without_its_input_leaves_the_verdict_to_the_reference_run():
    """Q3's reference-results invariant needs the generated input; with a reference run the
    agreement still judges, without one the verdict is inconclusive."""
    from jobs.nexmark.q3 import JOB as Q3

    out = [rec("0-0-0", {"a": 1})]
    with_reference = judge("q3", Q3.contract, out, out, True, None)
    assert not with_reference.invariants[-1].checked  # the reference results
    assert with_reference.verdict is Verdict.CONSISTENT
    alone = judge("q3", Q3.contract, out, None, True, None)
    assert alone.verdict is Verdict.INCONCLUSIVE


def test_windows_past_what_every_run_must_close_are_left_out_on_both_sides() -> None:
    from recovery_lib.cec.spark import windowed_contract
    from recovery_lib.cec.windows import TimeWindows

    kind = TimeWindows(10, 5)
    contract = windowed_contract("bids", "dateTime", kind, spark_delay_ms=5, aggregate="max")
    # Two partitions whose newest event times are 40 and 33: every run closed windows ending
    # by min(33 - 0, 40 - 5) - 5 = 28.
    records = [
        InputRecord(p, o, b"a", json.dumps({"dateTime": t}).encode())
        for p, times in ((0, (1, 20, 40)), (1, (2, 33)))
        for o, t in enumerate(times)
    ]
    inputs = InputView({"bids": "bids"}, reader=lambda _topic: records)
    windows = [
        {"key": "a", "window": f"a|{s}", "count": 1, "max": 5.0, "start": s, "end": s + 10}
        for s in range(0, 30, 5)
    ]
    reference = [rec(w["window"], w) for w in windows]  # ends 10 .. 35
    # A run whose watermark closed fewer windows at the end: consistent.
    early = judge("hotbids", contract, reference[:4], reference, dedup=False, inputs=inputs)
    assert early.verdict is Verdict.CONSISTENT, early.to_dict()
    assert early.left_open == {"closed_by_ms": 28, "run": 0, "reference": 2}
    # A run that lost a window every run must have closed: lost.
    lost = judge("hotbids", contract, reference[1:], reference, dedup=False, inputs=inputs)
    assert lost.lost == 1 and lost.guarantee is Guarantee.AT_MOST_ONCE
