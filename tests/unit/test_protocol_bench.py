"""The protocol bench's arithmetic: repeats averaged, capacity normalised to no protocol, the
skew suite paced from the measured capacity."""

from __future__ import annotations

import json

import pytest

from recovery_lib.bench.protocol_bench import (
    SUITES,
    Trial,
    _capacity,
    _mst,
    _paced,
    recovery_figures,
    summarize,
    sustained,
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
    assert figures["disturbance_s"] == 5  # the last slow second is second 4
    assert figures["p99_30s_before_ms"] == 200 and figures["p99_30s_after_ms"] == 1_000
    assert recovery_figures(before, kill)["disturbance_s"] is None  # no output after it
    # a restart: 12.5 s without output, then latency as before: recovered at the first output
    restart = [(kill + 12_500 + i * 100, 200) for i in range(50)]
    assert recovery_figures(before + restart, kill)["disturbance_s"] == 12.5
    assert recovery_figures(after, kill)["disturbance_s"] is None  # nothing before the kill
    # the killed stage's downstream still had input: output for 3 s, then 40 s of silence,
    # then latency as before: recovered at the end of the silence, not at the first output
    lingering = [(kill + i * 100, 200) for i in range(30)]
    back = [(kill + 43_000 + i * 100, 200) for i in range(50)]
    assert recovery_figures(before + lingering + back, kill)["disturbance_s"] == 43.0
    # pauses as long as the ones before the kill (batching) are not a failure
    batched = [(kill - 20_000 + i * 2_000, 200) for i in range(10)]
    steady = [(kill + 1_000 + i * 2_000, 200) for i in range(10)]
    assert recovery_figures(batched + steady, kill)["disturbance_s"] == 0.0


def per_second(p50s: list[float]) -> list[dict]:
    return [{"s": 2 * i, "p50": v, "p99": v, "n": 10} for i, v in enumerate(p50s)]


def test_a_run_kept_up_when_its_latency_stopped_growing():
    start_up = [30_000, 25_000, 20_000]  # the stages' first batches: left out
    assert sustained(per_second(start_up + [5_000, 4_000, 5_000, 4_500, 5_200, 4_800]))
    assert not sustained(per_second([3_000, 5_000, 8_000, 11_000, 14_000, 17_000, 20_000]))
    assert not sustained(per_second([5_000, 5_000]))  # too short to tell


def test_mst_search_steps_down_until_a_rate_keeps_up_then_records_it():
    tried: list[float] = []

    def run(t: Trial) -> dict:
        if t.rate is None:
            return {"throughput_eps": 10_000.0}  # the backlog capacity
        tried.append(t.rate)
        growing = t.rate > 2_000
        p50s = [1_000 * (i + 1) for i in range(9)] if growing else [2_000] * 9
        return {"latency_per_s": per_second(p50s), "latency_p50_ms": p50s[4]}

    report: dict = {}
    mst = _mst("q3p", report, run)
    assert tried == [5_000, 3_500, 2_450, 1_715] and mst == pytest.approx(1_715)
    assert report["mst"][0]["tries"][-1]["sustained"] is True
    assert _mst("q3p", report, run) == pytest.approx(1_715, abs=1) and len(tried) == 4  # cached


def test_mst_search_steps_up_while_the_rate_keeps_up_and_refuses_when_none_does():
    def run_up_to(limit: float):
        def run(t: Trial) -> dict:
            if t.rate is None:
                return {"throughput_eps": 10_000.0}
            p50s = [1_000 * (i + 1) for i in range(9)] if t.rate > limit else [2_000] * 9
            return {"latency_per_s": per_second(p50s)}

        return run

    assert _mst("q1p3", {}, run_up_to(8_000)) == pytest.approx(5_000 / 0.7)
    with pytest.raises(RuntimeError, match="no paced rate"):
        _mst("q1p3", {}, run_up_to(100))


def test_rederive_recomputes_recovery_from_the_per_second_series(tmp_path):
    from rich.console import Console

    from recovery_lib.bench.protocol_bench import rederive_report

    first = 1_000_000
    # output every second at 2 s latency, the kill at second 10, silence until second 30
    series = [{"s": s, "p50": 2_000, "p99": 2_000, "n": 5} for s in [*range(12), *range(30, 40)]]
    trial = {
        "trial": "q1p3/unc/50%/kill-reroute", "protocol": "unc", "pipeline": "q1p3",
        "first_output_ms": first, "killed_ms": first + 10_000, "latency_per_s": series,
        "recovery_time_s": 1.5,
    }  # fmt: skip
    (tmp_path / "r.json").write_text(json.dumps({"recovery": [trial]}))
    report = rederive_report(str(tmp_path / "r"), Console(quiet=True))
    again = report["recovery"][0]
    assert again["disturbance_s"] == 20.5 and again["disturbance_s_measured"] == 1.5
    assert "recovery_time_s" not in again  # a report written before: the key renamed
    assert (tmp_path / "r.png").exists()


def test_a_load_filter_selects_the_paced_trials_at_that_load_only():
    from recovery_lib.bench.protocol_bench import select_trials

    chosen = select_trials(["skew", "cyclic"], loads=[0.8])
    assert len(chosen["skew"]) == 9 and {t.load for t in chosen["skew"]} == {0.8}
    assert chosen["cyclic"] == SUITES["cyclic"]  # not paced by MST: unaffected
    assert select_trials(["recovery"], pipelines=["q3p"]) == {"recovery": []}


def test_a_protocol_filter_selects_that_protocols_trials_only():
    from recovery_lib.bench.protocol_bench import select_trials

    chosen = select_trials(["skew"], loads=[0.8], protocols=["unc"])
    assert [(t.protocol, t.hot_ratio) for t in chosen["skew"]] == [
        ("unc", 0.1),
        ("unc", 0.2),
        ("unc", 0.3),
    ]


def test_a_hot_ratio_filter_selects_those_skewed_trials_only():
    from recovery_lib.bench.protocol_bench import select_trials

    chosen = select_trials(
        ["skew", "cyclic"], loads=[0.8], protocols=["cic"], hot_ratios=[0.2, 0.3]
    )
    assert [(t.protocol, t.hot_ratio) for t in chosen["skew"]] == [("cic", 0.2), ("cic", 0.3)]
    assert [t.protocol for t in chosen["cyclic"]] == ["cic"]  # not skewed: only by protocol
