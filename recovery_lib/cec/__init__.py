"""Continuous eventual checkpointing (CEC, paper 003) for windowed aggregates on Spark.

An aggregate's state is never snapshotted as a whole: every window writes its own footprint
into the operator's output log (the output topic) between the results, a G_open when it opens
and, when the policy asks, a G_check with its partial result. Recovery reads the log backwards
until it holds a footprint of every window open at the end of the log (the eventual
checkpoint), then replays the input from the oldest footprint, each window ignoring the input
its footprint already holds.

  windows.py    window kinds (count, time) and the aggregate's accumulator
  records.py    the log record (R, G_open, G_check) with its fingerprint; Kafka encoding
  policy.py     when to write G_check: targets Q (extent) and U (replay), CI within CP
  operator.py   one shard of the aggregate (one output partition): process, checkpoint, load
  recovery.py   the backward scan to the eventual checkpoint, and the replay's start
  log.py        the output topic as the log: appended in order, read backwards in chunks
  aggregate.py  all shards of an aggregate (one per output partition) and their recovery
  spark.py      what a job's build returns (cec_aggregate) and the driver's batch writer
  native.py     the same aggregate on Spark's state store (mode native, the comparison)
docs/cec.md tells the design and why the open windows live in the Spark driver.
"""

from recovery_lib.cec.aggregate import AggregateSpec
from recovery_lib.cec.policy import CheckpointPolicy
from recovery_lib.cec.spark import CECPlan, cec_aggregate
from recovery_lib.cec.windows import CountWindows, TimeWindows

__all__ = [
    "AggregateSpec",
    "CECPlan",
    "CheckpointPolicy",
    "CountWindows",
    "TimeWindows",
    "cec_aggregate",
]
