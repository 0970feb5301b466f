"""The benchmark runs behind each paper's rows, and running them (``recovery reproduce
<paper> --run``): a time estimate up front, a progress bar while each runs, the comparison
report at the end.

Each run is a ``recovery bench`` command in its own process (a benchmark starts and stops
Spark applications, brokers and clusters; a crash of one must not take the others along),
writing its report under the reports directory that the paper's extractor reads.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

from recovery_lib.errors import ConfigurationError
from recovery_lib.runtime.progress import progress_display


@dataclass(frozen=True)
class BenchRun:
    """One ``recovery bench`` invocation: its arguments, the report it writes (a prefix under
    the reports directory) and how long it took on this machine (2 cores) at scale 1.
    ``scale`` names the option that ``--scale`` multiplies (None: the run has one size)."""

    args: tuple[str, ...]
    report: str
    minutes: float
    scale: str | None = None
    # Options whose value (given at scale 1) ``--scale`` multiplies: input seconds, events.
    scaled: tuple[tuple[str, float], ...] = ()

    @property
    def scalable(self) -> bool:
        return self.scale is not None or bool(self.scaled)

    def command(self, reports_dir: Path, scale: float) -> list[str]:
        cmd = [sys.executable, "-m", "recovery_lib.cli.main", "bench", *self.args]
        if scale != 1.0:
            if self.scale is not None:
                cmd += [self.scale, f"{scale:g}"]
            for option, base in self.scaled:
                cmd += [option, f"{round(base * scale, 3):g}"]
        return [*cmd, "--out", str(reports_dir / self.report)]

    def estimate_min(self, scale: float) -> float:
        return self.minutes * (scale if self.scalable else 1.0)


# What each paper's extractor reads, and what it cost here (the benchmarks' own reports and
# the closing notes of the sessions that ran them).
PLANS: dict[str, tuple[BenchRun, ...]] = {
    "clonos": (
        BenchRun(
            ("causal",), "bench_causal", 40, scaled=(("--events", 200_000), ("--duration", 30))
        ),
        BenchRun(("campaign", "--suite", "causal"), "causal_campaign", 120),
        BenchRun(
            ("standby",), "bench_standby", 100, scaled=(("--duration", 150), ("--fail-at", 20))
        ),
    ),
    "checkmate": (
        BenchRun(
            (
                "protocols",
                "--suite",
                "uniform",
                "--suite",
                "recovery",
                "--suite",
                "cyclic",
                "--suite",
                "skew",
            ),
            "bench_protocols",
            300,
        ),  # fmt: skip
    ),
    "active-replication": (
        BenchRun(
            ("replication",),
            "bench_replication",
            150,
            scaled=(("--duration", 120), ("--fail-at", 40)),  # the kill keeps its place
        ),
    ),
    "cec": (BenchRun(("cec",), "bench_cec", 90, scale="--scale"),),
    "flamestream": (
        BenchRun(("sinks",), "bench_sinks", 30, scaled=(("--duration", 40),)),
        BenchRun(("campaign", "--suite", "release"), "release_campaign", 170),
    ),
}


def bench_commands(key: str) -> list[str]:
    """The commands that write paper ``key``'s reports, as a person would type them."""
    return [f"recovery bench {' '.join(r.args)}" for r in PLANS[key]]


def plan(papers: list[str]) -> list[BenchRun]:
    """The runs behind ``papers``, each once (papers may share a report)."""
    runs: list[BenchRun] = []
    for key in papers:
        if key not in PLANS:
            raise ConfigurationError(f"unknown paper {key!r}; choose from {', '.join(PLANS)}")
        runs += [r for r in PLANS[key] if r not in runs]
    return runs


def _execute(cmd: list[str], log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def run_plan(
    runs: list[BenchRun],
    reports_dir: Path,
    scale: float,
    console: Console,
    logs_dir: Path,
    start: Callable[[list[str], Path], subprocess.Popen] = _execute,
) -> list[tuple[BenchRun, int]]:
    """Run each benchmark in turn (the machine's cores go to one at a time). Says the total
    estimate first; a bar per run advances with its elapsed time against its estimate; each
    run's output goes to ``logs_dir/<report>.log``; a failed run is reported and the next
    one runs (its rows stay "not measured"). Returns each run's exit code."""
    total = sum(r.estimate_min(scale) for r in runs)
    logs_dir.mkdir(parents=True, exist_ok=True)
    console.print(
        f"{len(runs)} benchmark run(s), about {total:.0f} min on a 2-core machine at scale "
        f"{scale:g}; reports to {reports_dir}, logs to {logs_dir}. Nothing else should run "
        "meanwhile."
    )
    results = []
    with progress_display(
        console,
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} min (estimate)"),
        TimeElapsedColumn(),
    ) as progress:
        for run in runs:
            estimate = run.estimate_min(scale)
            task = progress.add_task(f"bench {' '.join(run.args)[:40]}", total=estimate)
            log = logs_dir / f"{run.report}.log"
            began = time.monotonic()
            proc = start(run.command(reports_dir, scale), log)
            while (code := proc.poll()) is None:
                elapsed = (time.monotonic() - began) / 60
                progress.update(task, completed=min(elapsed, estimate * 0.99))
                time.sleep(1.0)
            progress.update(task, completed=estimate)
            took = (time.monotonic() - began) / 60
            if code != 0:
                console.print(
                    f"[red]bench {' '.join(run.args)} failed (exit {code}) after "
                    f"{took:.1f} min[/]: its rows stay not measured; see {log}"
                )
            results.append((run, code))
    return results
