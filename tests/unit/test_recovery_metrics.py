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
