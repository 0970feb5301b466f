"""``recovery reproduce <paper|all>``: the paper's key results beside ours (reproduce/)."""

from __future__ import annotations

from pathlib import Path

import typer

from recovery_lib.cli.output import abort, console


def reproduce(
    paper: str = typer.Argument(
        ..., help="clonos | checkmate | active-replication | cec | flamestream | all"
    ),
    reports: Path = typer.Option(
        None,
        help="Where the benchmark reports (JSON) are read from (default: the setting "
        "RECOVERY_BENCHMARK_REPORTS, docs/benchmarks).",
    ),
    out: Path = typer.Option(
        Path("reports/reproduction"), help="Where <paper>.md, .json and .png are written."
    ),
    run: bool = typer.Option(
        False,
        "--run",
        help="Run the benchmarks behind the paper first (hours: the estimate is printed "
        "before anything starts), writing their reports to --reports.",
    ),
    scale: float = typer.Option(
        1.0,
        help="With --run: multiplies the size of the runs that have one (seconds of input per "
        "run, backlog events, CEC's scale); the fault campaigns and protocol suites keep theirs.",
    ),
) -> None:
    """Put each paper's own numbers (with their table or figure) beside ours, read from the
    benchmark reports, and list every row where ours disagrees and why. Rows no report answers
    yet are marked "not measured", with the benchmark command that produces them; --run runs
    those benchmarks first."""
    from recovery_lib.reproduce.papers import PAPERS
    from recovery_lib.reproduce.report import VERDICTS, write
    from recovery_lib.reproduce.runs import bench_commands
    from recovery_lib.settings import get_settings

    reports = reports or get_settings().benchmark_reports
    keys = list(PAPERS) if paper == "all" else [paper]
    unknown = [k for k in keys if k not in PAPERS]
    if unknown:
        abort(ValueError(f"unknown paper {unknown[0]!r}; choose from {', '.join(PAPERS)}, all"))
    if scale <= 0:
        abort(ValueError(f"--scale must be positive, got {scale}"))
    if run:
        from recovery_lib.reproduce.runs import plan, run_plan

        reports.mkdir(parents=True, exist_ok=True)
        logs = get_settings().home / "reproduce" / "logs"
        run_plan(plan(keys), reports, scale, console, logs)
    if not reports.is_dir():
        abort(ValueError(f"no reports directory {reports}; run the benchmarks (--run) first"))
    for key in keys:
        try:
            paths, comparisons = write(key, reports, out)
        except (ValueError, KeyError) as exc:
            abort(exc)
            return
        verdicts = [c.verdict for c in comparisons]
        summary = ", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS)
        console.print(f"[bold]{key}[/]: {summary} -> {paths['md']}")
        waiting = [c for c in comparisons if not c.ours and not c.unanswered_because]
        if waiting:  # the others say in the report why no benchmark of ours answers them
            console.print(
                f"  {len(waiting)} rows wait for a report: run "
                f"{', '.join(bench_commands(key))} (or --run)"
            )
