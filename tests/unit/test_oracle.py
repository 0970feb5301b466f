"""The oracle must be able to say 'inconsistent': each kind of damage is detected."""

from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.verify.oracle import check, check_running_values


def rec(rid, value, key=b"k"):
    return SinkRecord(rid, 0, key, value, "t", 0, 0, ())


REFERENCE = [rec("0-0-0", b"a"), rec("0-0-1", b"b"), rec("1-0-0", b"c")]


def test_identical_output_is_consistent():
    report = check(
        "q1", [rec("9-1-0", b"a"), rec("9-1-1", b"b"), rec("9-1-2", b"c")], REFERENCE, dedup=False
    )
    assert report.verdict == "consistent"
    assert (report.outputs, report.reference_outputs) == (3, 3)


def test_replayed_batch_is_duplicated_without_dedup_and_clean_with_it():
    run = [
        rec("0-0-0", b"a"),
        rec("0-0-1", b"b"),
        rec("0-0-0", b"a"),
        rec("0-0-1", b"b"),
        rec("1-0-0", b"c"),
    ]
    raw = check("q1", run, REFERENCE, dedup=False)
    assert raw.verdict == "inconsistent" and raw.duplicated == 2 and raw.lost == 0
    deduped = check("q1", run, REFERENCE, dedup=True)
    assert deduped.verdict == "consistent" and deduped.duplicates_dropped == 2


def test_lost_and_unexpected_outputs_are_counted_by_content():
    report = check("q1", [rec("0-0-0", b"a"), rec("0-0-1", b"zzz")], REFERENCE, dedup=True)
    assert (report.lost, report.unexpected) == (2, 1)
    assert report.verdict == "inconsistent"


def test_a_replay_with_different_content_under_the_same_id_is_divergent():
    run = [rec("0-0-0", b"a"), rec("0-0-0", b"a2"), rec("0-0-1", b"b"), rec("1-0-0", b"c")]
    report = check("rand", run, None, dedup=True, deterministic=False)
    assert report.divergent == 1 and report.examples["divergent_ids"] == ["0-0-0"]
    assert report.verdict == "inconsistent"


def test_failed_invariants_make_a_nondeterministic_run_inconsistent():
    report = check(
        "q12",
        [rec("0-0-0", b"x")],
        None,
        dedup=True,
        deterministic=False,
        invariants={"ok": False, "bidders_wrong": 3},
    )
    assert report.verdict == "inconsistent"


def test_reference_results_mismatch_is_reported():
    report = check("q2", [rec("0-0-0", b"a")], None, dedup=True, reference_results=[b"a", b"b"])
    assert report.reference_results_mismatch == 1 and report.verdict == "inconsistent"


def test_running_values_that_skip_or_repeat_an_input_are_caught():
    assert check_running_values([("a", 1, 5), ("a", 2, 7), ("b", 1, 1)])["ok"]
    bad = check_running_values([("a", 1, 5), ("a", 1, 5), ("a", 3, 9)])
    assert (bad["repeated"], bad["skipped"], bad["ok"]) == (1, 1, False)
