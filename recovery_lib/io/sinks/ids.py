"""Deterministic output ids.

An output record's id is derived from where it was produced: micro-batch id, Spark partition
and its sequence number within that partition, optionally prefixed by a sink id when several
queries write the same topic. A re-executed batch produces the same ids, so consumers can
drop the second copy. The writer's fencing epoch travels beside the id, not inside it: a
standby that replays a batch in a new epoch must produce the same ids.
"""

from __future__ import annotations

from recovery_lib.kafka.headers import CONTROL_HEADER, DET_HEADER, EPOCH_HEADER, ID_HEADER

__all__ = ["CONTROL_HEADER", "DET_COLUMN", "DET_HEADER", "EPOCH_HEADER", "ID_HEADER"]

# Causal logging with piggybacked determinants: the causal operator adds a binary column that
# the sink turns into this header of the first record depending on them (see causal/log.py).
DET_COLUMN = "rl_determinants"


def output_id(batch_id: int, partition: int, seq: int, prefix: str = "") -> str:
    core = f"{batch_id}-{partition}-{seq}"
    return f"{prefix}:{core}" if prefix else core


def parse_output_id(value: str) -> tuple[str, int, int, int]:
    prefix, _, core = value.rpartition(":")
    batch, partition, seq = (int(x) for x in core.split("-"))
    return prefix, batch, partition, seq
