"""Consistent, fast recovery for Spark Structured Streaming jobs.

Packages (one per mechanism): ``kafka`` (embedded broker, clients, topic admin),
``io`` (Kafka source with cut policies, sinks with deterministic ids),
``spark`` (session set-up), ``bench`` (benchmarks), ``cli`` (the ``recovery`` command).
"""

import time as _time

# When this process began importing the library (io/worker_timing.py times Python workers).
IMPORT_STARTED_AT = _time.time()

__version__ = "0.1.0"
