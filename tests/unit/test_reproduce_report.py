"""The reproduction report's framework: the papers' rows load with their sources, our rows
must name a paper row, a disagreement must say why, and the report lists every one."""

from __future__ import annotations

import json
from fnmatch import fnmatchcase

import pytest

from recovery_lib.reproduce import report
from recovery_lib.reproduce.measured import REPO, Measured
from recovery_lib.reproduce.papers import PAPERS, paper_rows


def test_every_paper_has_rows_with_a_source_and_unique_ids():
    rows = paper_rows()
    assert {r.paper for r in rows} == set(PAPERS)
    assert len({r.id for r in rows}) == len(rows)
    assert all(r.source and r.metric for r in rows)
    with pytest.raises(ValueError, match="choose from"):
        paper_rows("flink")


def test_a_disagreement_without_a_reason_is_refused():
    with pytest.raises(ValueError, match="must say why"):
        Measured("cec.x", 1.0, "s", "r.json", "how", agrees=False)


def test_the_report_puts_ours_beside_the_papers_and_lists_every_disagreement(tmp_path, monkeypatch):
    rows = paper_rows("checkmate")
    agree, differ, trend = rows[0], rows[1], next(r for r in rows if r.value is None)

    def extract(_reports_dir):  # noqa: ANN001, ANN202
        return [
            Measured(agree.id, 1.0, agree.unit, "docs/benchmarks/x.json", "ran q1", True),
            Measured(
                differ.id,
                0.5,
                differ.unit,
                "docs/benchmarks/x.json",
                "ran q3",
                False,
                "one host, 2 cores",
            ),  # fmt: skip
            Measured(trend.id, 3.0, "x", "docs/benchmarks/x.json", "ran skew"),
        ]

    monkeypatch.setattr(report, "extractor", lambda _key: extract)
    paths, comparisons = report.write("checkmate", tmp_path, tmp_path / "out")
    verdicts = {c.row.id: c.verdict for c in comparisons}
    assert verdicts[agree.id] == "agrees" and verdicts[differ.id] == "differs"
    assert verdicts[trend.id] == "not comparable"
    assert list(verdicts.values()).count("not measured") == len(rows) - 3
    text = paths["md"].read_text()
    assert "## Where ours disagrees, and why" in text and "one host, 2 cores" in text
    assert "recovery bench protocols" in text  # where the missing rows come from
    saved = json.loads(paths["json"].read_text())
    assert len(saved["rows"]) == len(rows) and paths["png"].stat().st_size > 5_000


def test_a_measured_row_naming_no_paper_row_is_an_error(tmp_path, monkeypatch):
    typo = [Measured("checkmate.no.such.row", 1.0, "x", "r.json", "how")]
    monkeypatch.setattr(report, "extractor", lambda _key: lambda _d: typo)
    with pytest.raises(ValueError, match="no row of the paper"):
        report.compare("checkmate", tmp_path)


def test_a_row_no_benchmark_answers_says_why_in_the_report(tmp_path, monkeypatch):
    rows = paper_rows("cec")
    monkeypatch.setattr(report, "extractor", lambda _key: lambda _d: [])
    monkeypatch.setattr(report, "unanswered", lambda _key: {"cec.baseline.cpu.*": "no CPU share"})
    paths, comparisons = report.write("cec", tmp_path, tmp_path / "out")
    cpu = [c for c in comparisons if c.row.id.startswith("cec.baseline.cpu.")]
    assert cpu and all(c.unanswered_because == "no CPU share" for c in cpu)
    assert "Not measured here: no CPU share." in paths["md"].read_text()
    saved = {r["id"]: r for r in json.loads(paths["json"].read_text())["rows"]}
    assert saved[cpu[0].row.id]["not_measured_because"] == "no CPU share"
    others = [c for c in comparisons if c not in cpu]
    assert len(others) == len(rows) - len(cpu)
    assert all(c.unanswered_because == "" for c in others)


@pytest.mark.parametrize("key", PAPERS)
def test_every_row_the_committed_reports_leave_unmeasured_says_why(key):
    """A paper row with neither a number of ours nor a reason is a gap in the reproduction;
    a reason pattern that names no row, or covers a row we measure, is stale."""
    comparisons = report.compare(key, REPO / "docs" / "benchmarks")
    silent = [c.row.id for c in comparisons if not c.ours and not c.unanswered_because]
    assert silent == []
    ids = [c.row.id for c in comparisons]
    measured = [c.row.id for c in comparisons if c.ours]
    for pattern in report.unanswered(key):
        assert any(fnmatchcase(i, pattern) for i in ids), f"{pattern} names no row"
        covered = [i for i in measured if fnmatchcase(i, pattern)]
        assert covered == [], f"{pattern} covers measured rows {covered}"
