from recovery_lib.metrics.recovery import output_gap_s, recovery_time_s


def steady(start_s, end_s, latency):
    return [(s * 1000 + k * 100, latency) for s in range(start_s, end_s) for k in range(10)]


def test_recovery_time_is_when_p50_returns_within_ten_percent_and_stays():
    samples = steady(0, 10, 500) + steady(10, 14, 5000) + steady(14, 30, 520)
    assert recovery_time_s(samples, failure_ms=10_000) == 4.0


def test_no_recovery_when_latency_never_returns():
    samples = steady(0, 10, 500) + steady(10, 30, 3000)
    assert recovery_time_s(samples, failure_ms=10_000) is None


def test_output_gap_is_the_longest_silence_after_the_failure():
    visible = [1000, 2000, 10_000, 10_500, 25_000, 25_100]
    assert output_gap_s(visible, failure_ms=10_200) == 14.5


def test_baseline_is_the_steady_state_before_the_failure_not_the_warm_up():
    # 20 s of slow warm-up (first batches), then 10 s at 500 ms before the failure at 30 s.
    samples = steady(0, 20, 20_000) + steady(20, 30, 500) + steady(30, 33, 9000)
    samples += steady(33, 40, 510)
    assert recovery_time_s(samples, failure_ms=30_000) == 3.0
    # With the warm-up in the baseline, 9 s latencies would count as "recovered" at once.
    assert recovery_time_s(samples, failure_ms=30_000, baseline_s=30) == 0.0


def test_each_failure_is_measured_until_the_next_one():
    from recovery_lib.metrics.recovery import each_failure

    # Failure at 10 s: 4 s of high latency then steady; failure at 30 s: 6 s of silence, steady
    # after; the third at 50 s has no output at all after it.
    samples = steady(0, 10, 500) + steady(10, 14, 5000) + steady(14, 30, 500)
    samples += steady(36, 50, 500)
    figures = each_failure(samples, [30_000, 10_000, 50_000])
    assert [f["fired_ms"] for f in figures] == [10_000, 30_000, 50_000]
    assert figures[0]["recovery_time_s"] == 4.0 and figures[0]["output_gap_s"] == 0.1
    assert figures[1]["output_gap_s"] == 6.0 and figures[1]["recovery_time_s"] == 6.0
    assert figures[2] == {"fired_ms": 50_000, "output_gap_s": None, "recovery_time_s": None}


def test_a_failure_without_output_before_the_next_has_the_whole_interval_as_gap():
    from recovery_lib.metrics.recovery import each_failure

    samples = steady(0, 10, 500) + steady(25, 40, 500)
    first, _ = each_failure(samples, [10_000, 20_000])
    assert first["output_gap_s"] == 10.0 and first["recovery_time_s"] is None
