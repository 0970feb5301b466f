"""`recovery bench realtime`'s summary: the pipeline against q1 alone in real-time mode (goal:
within 2x and below 1 s), real-time against micro-batch, and the killed stage's verdicts, from
one run's figures (the bench itself runs in `make bench-realtime`)."""

from __future__ import annotations

from recovery_lib.bench.realtime_bench import STAGES, summarize


def row(trigger: str, stages: int, rate: float, p50: float) -> dict:
    return {"trigger": trigger, "stages": stages, "rate_eps": rate, "p50_ms": p50, "p99_ms": p50}


KILL = {
    "restart_s": 14.2,
    "output_gap_ms": 15_000,
    "plain_consumer": {"guarantee": "at-least-once"},
    "dedup_reader": {"guarantee": "exactly-once"},
}


def test_a_pipeline_within_twice_q1_and_under_a_second_meets_the_goal():
    rows = [
        row("realtime", 1, 1000.0, 10.0),
        row("realtime", STAGES, 1000.0, 20.0),
        row("microbatch", 1, 1000.0, 300.0),
        row("microbatch", STAGES, 1000.0, 900.0),
    ]
    out = summarize(rows, KILL)
    assert out["1000"]["pipeline_over_q1_realtime"] == 2.0 and out["1000"]["within_goal"]
    assert out["1000"]["pipeline_realtime_over_microbatch"] == round(20 / 900, 3)
    assert out["stage_kill"] == {
        "restart_s": 14.2, "output_gap_ms": 15_000,
        "plain_consumer": "at-least-once", "dedup_reader": "exactly-once",
    }  # fmt: skip


def test_a_slow_pipeline_misses_it_either_way():
    too_slow = summarize(
        [row("realtime", 1, 5000.0, 600.0), row("realtime", STAGES, 5000.0, 1100.0)], None
    )
    assert too_slow["5000"]["pipeline_over_q1_realtime"] < 2 and not too_slow["5000"]["within_goal"]
    too_far = summarize(
        [row("realtime", 1, 5000.0, 5.0), row("realtime", STAGES, 5000.0, 50.0)], None
    )
    assert not too_far["5000"]["within_goal"] and "stage_kill" not in too_far


def test_the_stages_in_one_application_are_judged_by_the_same_goal():
    app = {**row("realtime", STAGES, 1000.0, 15.0), "one_app": True}
    out = summarize(
        [row("realtime", 1, 1000.0, 10.0), row("realtime", STAGES, 1000.0, 200.0), app], None
    )
    assert not out["1000"]["within_goal"] and out["1000"]["within_goal_one_app"]
    assert out["1000"]["realtime_pipeline_one_app_p50_ms"] == 15.0
    assert out["1000"]["pipeline_one_app_over_q1_realtime"] == 1.5


def test_each_added_stage_is_what_the_pipeline_adds_to_q1_over_the_stages_after_the_first():
    """The 2x goal holds only when each stage after the first adds under half of q1's p50."""
    one, pipe = row("realtime", 1, 1000.0, 2.0), row("realtime", STAGES, 1000.0, 8.0)
    out = summarize([one, pipe], None)["1000"]
    assert out["added_stage_ms_realtime"] == (8.0 - 2.0) / (STAGES - 1)
    assert out["pipeline_over_q1_realtime"] == 4.0 and not out["within_goal"]
    assert out["added_stage_ms_one_app"] is None  # that layout did not run


def test_the_output_gap_and_its_end_come_from_one_pause():
    """Stage 3 emits what it had for a moment after the kill, then pauses: the gap is that
    pause measured from the last output before the kill's side, and output resumes at its end."""
    from recovery_lib.bench.realtime_bench import _longest_pause

    killed = 10_000
    arrivals = [9_000, 9_500, 10_200, 10_300, 25_000, 25_100]
    assert _longest_pause(arrivals, killed) == (10_300, 25_000)
    assert _longest_pause([9_000, 9_800], killed) is None  # nothing after the kill
    assert _longest_pause([10_500, 12_000], killed) is None  # nothing before it
