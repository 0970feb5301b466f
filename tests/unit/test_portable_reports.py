"""Committed reports read the same on every clone: no path of the machine they ran on."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest

from recovery_lib.files import portable_paths, write_json_report

REPO = Path(__file__).resolve().parents[2]
# An absolute path at the start of a value or after a separator (``delta:/work/…``, an error
# text): the machine's repository, home and temporary directories, and the usual roots.
MACHINE_PATH = re.compile(
    r"(?:^|[\s\"'=:(,])/(?:work|tmp|root|home|Users|var|opt|mnt|srv|private)/"
    + "|"
    + "|".join(re.escape(str(p)) for p in {REPO, Path.home(), Path(tempfile.gettempdir())})
)


def committed_reports() -> list[Path]:
    return sorted(
        p for p in (REPO / "docs").rglob("*") if p.suffix in {".json", ".md"} and p.is_file()
    )


def test_the_repository_has_committed_reports_to_check():
    assert len([p for p in committed_reports() if p.suffix == ".json"]) > 20


@pytest.mark.parametrize("path", committed_reports(), ids=lambda p: str(p.relative_to(REPO)))
def test_a_committed_report_holds_no_absolute_path_of_a_machine(path: Path):
    found = [m.group(0) for m in MACHINE_PATH.finditer(path.read_text(errors="replace"))]
    assert not found, f"{path.relative_to(REPO)} holds machine paths: {found[:3]}"


def test_the_pattern_sees_the_paths_reports_used_to_hold():
    for text in (
        '"workdir": "/work/main/.recovery/experiments/q3-native-1"',
        '"table": "delta-append:/work/main/.recovery/x/table"',
        f'"error": "cannot read {Path.home()}/x"',
    ):
        assert MACHINE_PATH.search(text), text
    assert not MACHINE_PATH.search('"url": "http://127.0.0.1:8080/api/v2/dags"')


def test_paths_under_the_root_become_relative_and_others_lose_the_machine(tmp_path):
    root = tmp_path / "repo"
    report = {
        "workdir": root / ".recovery" / "experiments" / "q3-native-1",
        "table": f"delta:{root}/.recovery/t",
        "scratch": [f"{Path(tempfile.gettempdir())}/spark-1"],
        f"{root}/key": f"failed in {Path.home()}/jobs/x.py",
        "count": 3,
    }
    shown = portable_paths(report, root)
    assert shown == {
        "workdir": ".recovery/experiments/q3-native-1",
        "table": "delta:.recovery/t",
        "scratch": ["$TMPDIR/spark-1"],
        "key": "failed in ~/jobs/x.py",
        "count": 3,
    }


def test_a_written_report_holds_no_path_of_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = write_json_report(tmp_path / "reports" / "r.json", {"workdir": tmp_path / "w"})
    assert json.loads(out.read_text()) == {"workdir": "w"}
