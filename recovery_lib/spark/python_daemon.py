"""Spark's Python daemon with what every worker of ours imports imported once, before it forks.

Spark starts a daemon per executor and worker module at the first Python call of that kind
(``spark.python.daemon.module``, by default ``pyspark.daemon``) and forks each Python worker
from it; PySpark imports the worker's module after the fork, and the worker then imports the
library when it unpickles our reader or writer. In a restarted job every worker is new, so
each pays those imports (about 0.25 s each on an idle core, more while the JVM starts beside
it). This daemon imports them before it forks, so a fork finds them done: a daemon that forks
several workers (the tasks' ``pyspark.worker``) imports once instead of once per worker.

Only modules that start no thread are imported here: a fork copies only the forking thread,
so a lock another thread held would stay held in the child (the reason PySpark imports the
worker module after the fork: pyarrow and numpy start threads). tests/unit/test_python_daemon.py
checks that what is imported here starts no thread. Setting:
``RECOVERY_SPARK_PYTHON_PREIMPORT`` (spark/session.py).
"""

from __future__ import annotations

import importlib
import logging
import sys

# Spark starts one daemon per worker module (sys.argv[1]). The daemons whose workers run our
# source or sink import the library once; the others (lookup_data_sources ...) stay as they
# are. Not pyspark.sql.worker.plan_data_source_read nor the streaming source runner: they
# import pyarrow, and pyarrow and numpy start threads (so do the sink and the range reader,
# which the workers import after the fork).
WORKERS_OF_OURS = (
    "pyspark.worker",
    "pyspark.sql.worker.create_data_source",
    "pyspark.sql.worker.write_into_data_source",
    "pyspark.sql.worker.commit_data_source_write",
    "pyspark.sql.worker.python_streaming_sink_runner",
)
PREIMPORTS = ("recovery_lib.settings", "recovery_lib.io.source")
DAEMON_MODULE = __name__


def preimport(worker_module: str) -> list[str]:
    """Import ``worker_module`` and ``PREIMPORTS`` if the daemon's workers are of ours;
    returns those that could not be imported (the worker then imports them itself after the
    fork, as without this daemon)."""
    if worker_module not in WORKERS_OF_OURS:
        return []
    missing = []
    for name in (worker_module, *PREIMPORTS):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def main() -> None:
    missing = preimport(sys.argv[1] if len(sys.argv) > 1 else "pyspark.worker")
    if missing:  # logging writes to stderr: stdout carries the daemon's port to the JVM
        logging.getLogger(__name__).warning("not pre-imported (workers import them): %s", missing)
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
