"""The pre-importing Python daemon (spark/python_daemon.py) imports only what starts no thread.

A fork copies only the forking thread: a thread started by an import before the daemon forks
could hold a lock the worker then waits on forever. Each daemon of ours is checked in a fresh
interpreter, as Spark starts it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from recovery_lib.spark.python_daemon import PREIMPORTS, WORKERS_OF_OURS

PROBE = """
import json, os, sys
from recovery_lib.spark.python_daemon import preimport
missing = preimport(sys.argv[1])
print(json.dumps({"threads": len(os.listdir("/proc/self/task")), "missing": missing,
                  "imported": sorted(m for m in sys.modules if m.startswith("recovery_lib.io"))}))
"""


def _probe(worker_module: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, worker_module], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("worker_module", WORKERS_OF_OURS)
def test_a_daemon_of_ours_imports_the_library_and_starts_no_thread(worker_module: str) -> None:
    seen = _probe(worker_module)
    assert seen["missing"] == []
    assert seen["threads"] == 1, f"{worker_module}: a thread before the fork"
    assert "recovery_lib.io.source" in seen["imported"]


def test_other_daemons_import_nothing_of_ours() -> None:
    seen = _probe("pyspark.sql.worker.lookup_data_sources")
    assert seen["imported"] == [] and seen["threads"] == 1


def test_the_preimports_are_modules_of_the_library() -> None:
    assert all(m.startswith("recovery_lib.") for m in PREIMPORTS)
