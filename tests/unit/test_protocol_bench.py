"""The protocol bench's arithmetic: repeats averaged, capacity normalised to no protocol, the
skew suite paced from the measured capacity."""

from __future__ import annotations

import pytest

from recovery_lib.bench.protocol_bench import (
    SUITES,
    Trial,
    _capacity,
    _paced,
    recovery_figures,
    summarize,
)


def trial(pipeline: str, protocol: str, eps: float, ok: bool = True) -> dict:
    return {"pipeline": pipeline, "protocol": protocol, "throughput_eps": eps,
            "message_overhead": 1.0, "invalid_pct": 0.0, "verdict": {"ok": ok}}  # fmt: skip


def test_repeats_are_averaged_and_normalised_to_no_protocol():
    runs = [("none", 100, True), ("cic", 60, True), ("cic", 80, False), ("none", 120, True)]
    report = {"uniform": [trial("q1p", proto, eps, ok) for proto, eps, ok in runs]}
    summary = summarize(report)["q1p"]
    assert summary["none"]["throughput_eps"] == 110
    assert summary["cic"]["throughput_runs"] == [60, 80]
    assert summary["cic"]["normalised"] == pytest.approx(70 / 110, abs=1e-3)
    assert summary["cic"]["verdict_ok"] is False  # one failed verdict fails the protocol


def test_uniform_runs_every_protocol_twice_in_mirrored_order():
    q1 = [t.protocol for t in SUITES["uniform"] if t.pipeline == "q1p"]
    assert q1 == ["none", "coor", "unc", "cic", "cic", "unc", "coor", "none"]


def test_skew_is_paced_from_the_measured_capacity():
    measured: list[Trial] = []

    def run(t: Trial) -> dict:
        measured.append(t)
        return {"throughput_eps": 5_000.0}

    report: dict = {}
    assert _capacity("q3p", report, run) == 5_000.0 and measured[0].protocol == "none"
    report = {"uniform": [trial("q3p", "none", 4_000)]}
    assert _capacity("q3p", report, run) == 4_000.0 and len(measured) == 1  # no second run
    skew = next(t for t in SUITES["skew"] if t.load == 0.8)
    paced = _paced(skew, 4_000.0)
    assert paced.rate == 3_200 and paced.events == int(3_200 * skew.paced_s)
    assert paced.name.startswith("q3p/") and "80%" in paced.name


def test_recovery_time_ends_when_latency_stays_under_twice_the_p50_before_the_kill():
    kill = 100_000
    before = [(kill - 20_000 + i * 100, 200) for i in range(200)]  # p50 200 ms
    # after the kill: 3 s slow (1 s latency), one good second, one slow, then good
    slow = {0, 1, 2, 4}
    after = [(kill + i * 100, 1_000 if (i // 10) in slow else 250) for i in range(100)]
    figures = recovery_figures(before + after, kill)
    assert figures["recovery_time_s"] == 5  # the last slow second is second 4
    assert figures["p99_30s_before_ms"] == 200 and figures["p99_30s_after_ms"] == 1_000
    assert recovery_figures(before, kill)["recovery_time_s"] is None  # no output after it
    # a restart: 12.5 s without output, then latency as before: recovered at the first output
    restart = [(kill + 12_500 + i * 100, 200) for i in range(50)]
    assert recovery_figures(before + restart, kill)["recovery_time_s"] == 12.5
    assert recovery_figures(after, kill)["recovery_time_s"] is None  # nothing before the kill
