"""Spark's Python processes import PySpark from this environment's compiled bytecode, not from
its zip.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on the ``PYTHONPATH``
of every Python process it starts: each worker daemon (one per worker module: the source's
and the sink's planners, the tasks' workers) and each streaming source runner. For a
pip-installed PySpark those zips hold the same modules as the installed package, but Python
compiles a module imported from a zip from source at every start (it cannot write the
bytecode back), so each of these processes spends about half a second more on its imports
(measured: ``import pyspark.sql.streaming.python_streaming_source_runner`` 0.69-0.75 s from
the zip, 0.22-0.26 s from the installed package, on an idle core). A restart starts about
seven of them one after the other while its first micro-batch waits.

``install`` writes a ``.pth`` file into this environment's site-packages (``make install``
runs ``recovery spark worker-bytecode``): at every start of this environment's Python it takes
the zips of the installed PySpark (``.../site-packages/pyspark/python/lib/``) off
``sys.path``, so the same modules come from site-packages with their compiled bytecode. Zips of
another Spark installation stay. ``RECOVERY_SPARK_WORKER_BYTECODE=false`` in a process's
environment leaves its path alone (the hook reads the variable itself: it runs before any
library code).
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

__all__ = ["ENV", "PTH_NAME", "install", "installed", "pth_path"]

ENV = "RECOVERY_SPARK_WORKER_BYTECODE"
PTH_NAME = "recovery_spark_worker_bytecode.pth"
# The installed PySpark's own zips: a path entry under this directory.
_BUNDLED_ZIPS = os.sep + os.path.join("site-packages", "pyspark", "python", "lib") + os.sep
# One line: site executes .pth lines that start with "import", before the process's own code.
PTH_LINE = (
    "import os, sys; sys.path[:] = sys.path if os.environ.get("
    f"{ENV!r}, 'true').lower() in ('0', 'false', 'no', 'off') else "
    f"[p for p in sys.path if {_BUNDLED_ZIPS!r} not in p]\n"
)


def pth_path(site_packages: Path | None = None) -> Path:
    """Where the hook goes: this environment's site-packages (or ``site_packages``)."""
    return Path(site_packages or sysconfig.get_paths()["purelib"]) / PTH_NAME


def install(site_packages: Path | None = None) -> Path:
    """Write the hook (again); returns its path."""
    path = pth_path(site_packages)
    path.write_text(PTH_LINE)
    return path


def installed(site_packages: Path | None = None) -> bool:
    """The hook is in place and current."""
    path = pth_path(site_packages)
    return path.exists() and path.read_text() == PTH_LINE
