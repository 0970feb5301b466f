"""Consistent, fast recovery for Spark Structured Streaming jobs.

Packages (one per mechanism): ``kafka`` (embedded broker, clients, topic admin),
``io`` (Kafka source with cut policies, sinks with deterministic ids),
``spark`` (session set-up), ``bench`` (benchmarks), ``cli`` (the ``recovery`` command).
"""

__version__ = "0.1.0"
