"""The batch-cost benchmark's logic (recovery_lib/bench/batch_cost_bench.py): each variant in
a process of its own with its settings, its figures over Spark's defaults', a clear failure.
The measurement itself runs Spark (`recovery bench batch-cost`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from recovery_lib.bench import batch_cost_bench
from recovery_lib.bench.batch_cost_bench import BatchCost, run_batch_cost_bench, run_variant
from recovery_lib.errors import JobFailed


def test_each_variant_runs_in_its_own_process_with_its_settings(monkeypatch) -> None:
    seen: list[dict[str, str]] = []

    def fake_run(cmd, env, **kwargs):  # noqa: ANN001, ANN003
        seen.append(env)
        Path(cmd[-1]).write_text(json.dumps(BatchCost(cmd[-4], 10, 0.3, 0.3, 200.0).__dict__))
        return subprocess.CompletedProcess(cmd, 0, stdout="spark says hi\n", stderr="")

    monkeypatch.setattr(batch_cost_bench.subprocess, "run", fake_run)
    assert run_variant("spark", 1, 2) == BatchCost("spark", 10, 0.3, 0.3, 200.0)
    run_variant("both", 1, 2)
    assert [(e["RECOVERY_SPARK_CHECKPOINT_FILE_API"], e["RECOVERY_SPARK_JIT"]) for e in seen] == [
        ("filecontext", "tiered"),
        ("filesystem", "quick"),
    ]


def test_a_failed_variant_says_which_and_why(monkeypatch) -> None:
    def failed(cmd, env, **kwargs):  # noqa: ANN001, ANN003
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="java not found")

    monkeypatch.setattr(batch_cost_bench.subprocess, "run", failed)
    with pytest.raises(JobFailed, match="quick-jit failed .*java not found"):
        run_variant("quick-jit", 1, 2)


def test_the_report_gives_each_variant_over_sparks_defaults(monkeypatch, tmp_path: Path) -> None:
    cpu = {"spark": 0.5, "filesystem": 0.35, "quick-jit": 0.4, "both": 0.25}
    monkeypatch.setattr(
        batch_cost_bench, "run_variant", lambda v, w, s: BatchCost(v, 60, cpu[v], cpu[v], 250.0)
    )
    done: list[str] = []
    report = run_batch_cost_bench(tmp_path / "r", progress=lambda i, v: done.append(v))
    assert done == ["spark", "filesystem", "quick-jit", "both"]
    ratios = {r["variant"]: r["cpu_vs_spark"] for r in report["results"]}
    assert ratios == {"spark": 1.0, "filesystem": 0.7, "quick-jit": 0.8, "both": 0.5}
    assert json.loads((tmp_path / "r.json").read_text())["results"] == report["results"]
    assert (tmp_path / "r.png").stat().st_size > 0
