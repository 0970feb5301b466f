"""The flakiness check's summary (``make test-flaky``): with pytest-repeat's ``--count N``, every
test that failed in at least one of its N runs, how often, and its first error; also written to
``reports/flaky.json``. Loaded with ``-p tests.flaky``."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

# pytest-repeat names the k-th of N runs ``test[k-N]`` (``test[param-k-N]`` if parametrised).
_REPEAT_SUFFIX = re.compile(r"(?:\[|-)(\d+)-(\d+)\]$")


def base_id(nodeid: str) -> str:
    """The test a repeated run belongs to: its node id without pytest-repeat's ``k-N``."""
    match = _REPEAT_SUFFIX.search(nodeid)
    if match is None:
        return nodeid
    head = nodeid[: match.start()]
    return head if match.group(0).startswith("[") else f"{head}]"


class FlakinessSummary:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.runs: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.first_error: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = base_id(report.nodeid)
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.runs[test] += 1
        if report.failed:  # setup, call or teardown
            self.failed[test] += 1
            crash = getattr(report.longrepr, "reprcrash", None)
            error = crash.message if crash is not None else str(report.longrepr)
            self.first_error.setdefault(test, error.strip().splitlines()[0] if error else "")

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        write = terminalreporter.write_line
        flaky = sorted(self.failed, key=lambda t: (-self.failed[t], t))
        write("")
        write(
            f"flakiness check: {len(self.runs)} tests, {sum(self.runs.values())} runs; "
            f"{len(flaky)} failed at least once"
        )
        for test in flaky:
            write(f"  {self.failed[test]:>3} of {self.runs[test]:<3} {test}")
            write(f"      {self.first_error[test][:200]}")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(
            json.dumps(
                {
                    "tests": len(self.runs),
                    "runs": sum(self.runs.values()),
                    "failed_at_least_once": [
                        {
                            "test": t,
                            "failed": self.failed[t],
                            "runs": self.runs[t],
                            "first_error": self.first_error[t],
                        }
                        for t in flaky
                    ],
                },
                indent=2,
            )
        )
        write(f"  written to {self.out}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(FlakinessSummary(Path("reports") / "flaky.json"), "flaky-summary")
