"""``recovery reproduce --run``: the plan behind each paper, the estimate said first, every
run in turn with its output in a log, a failed run reported and the next one run."""

from __future__ import annotations

import subprocess
import sys

from rich.console import Console

from recovery_lib.reproduce.papers import PAPERS
from recovery_lib.reproduce.runs import PLANS, BenchRun, bench_commands, plan, run_plan


def test_every_paper_has_a_plan_and_shared_runs_run_once():
    assert set(PLANS) == set(PAPERS)
    runs = plan(["clonos", "clonos", "cec"])
    assert len(runs) == len(PLANS["clonos"]) + 1
    assert bench_commands("checkmate")[0].startswith("recovery bench protocols --suite")


def test_scale_multiplies_each_runs_size_and_leaves_fixed_runs_alone(tmp_path):
    cec = PLANS["cec"][0]
    assert cec.command(tmp_path, 0.1)[-4:] == [
        "--scale",
        "0.1",
        "--out",
        str(tmp_path / "bench_cec"),
    ]
    assert cec.estimate_min(0.1) == cec.minutes * 0.1
    sinks = PLANS["flamestream"][0]
    assert sinks.command(tmp_path, 2)[-4:-2] == ["--duration", "80"]
    assert "--duration" not in sinks.command(tmp_path, 1.0)  # scale 1: the bench's defaults
    assert sinks.estimate_min(2) == 2 * sinks.minutes
    causal = PLANS["clonos"][0].command(tmp_path, 0.5)
    assert causal[causal.index("--events") + 1] == "100000"
    campaign = PLANS["flamestream"][1]  # 20 failures per variant: one size
    assert not campaign.scalable and campaign.estimate_min(3) == campaign.minutes
    assert "--duration" not in campaign.command(tmp_path, 3)
    replication = PLANS["active-replication"][0].command(tmp_path, 0.25)  # the kill stays in
    duration = float(replication[replication.index("--duration") + 1])
    assert float(replication[replication.index("--fail-at") + 1]) < duration == 30
    scalable = {r.report for runs in PLANS.values() for r in runs if r.scalable}
    assert {"bench_causal", "bench_standby", "bench_replication", "bench_sinks"} <= scalable


def test_runs_go_one_after_another_and_a_failure_does_not_stop_the_rest(tmp_path):
    started: list[list[str]] = []

    def start(cmd: list[str], log):  # noqa: ANN001, ANN202 - a real process per run
        started.append(cmd)
        code = 3 if "bad" in cmd else 0
        script = f"import sys; print('ran', {cmd[-1]!r}); sys.exit({code})"
        with log.open("ab") as out:
            return subprocess.Popen([sys.executable, "-c", script], stdout=out)

    runs = [BenchRun(("bad",), "first", 0.01), BenchRun(("good",), "second", 0.01)]
    console = Console(record=True, width=120)
    results = run_plan(runs, tmp_path / "reports", 1.0, console, tmp_path / "logs", start)
    assert [code for _, code in results] == [3, 0]
    assert [cmd[-1] for cmd in started] == [
        str(tmp_path / "reports" / n) for n in ("first", "second")
    ]
    text = console.export_text()
    assert "2 benchmark run(s), about 0 min" in text  # the estimate comes first
    assert "bench bad failed (exit 3)" in text
    assert "ran" in (tmp_path / "logs" / "second.log").read_text()
