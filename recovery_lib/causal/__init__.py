"""Causal logging of nondeterminism (Clonos, paper 000, sections 3.3-3.4 and 5.5).

Spark re-executes a failed micro-batch and assumes the same result; clocks, random numbers and
external calls break that. Functions get their nondeterminism from a ``CausalContext``
(services.py); its determinants go to a ``DeterminantLog`` (log.py) and are durable before any
output that depends on them leaves the function (operators.py); a re-executed batch replays
them in order. ``driver.enable`` prepares a (re)started query; ``driver.truncate`` forgets
committed batches. ``ordered`` (order.py) feeds an order-sensitive stateful function its rows
in lineage order, so a re-executed batch computes what the first run did.

A job in mode causal gets its ``CausalConfig`` as ``opts.causal`` (``JobOptions``) and passes
it to the wrappers here.
"""

from recovery_lib.causal.determinants import (
    CorruptDeterminants,
    DeterminantError,
    DeterminantMismatch,
    MissingDeterminants,
)
from recovery_lib.causal.log import CausalConfig
from recovery_lib.causal.operators import (
    carried,
    current,
    foreach_batch,
    map_in_arrow,
    map_in_pandas,
    pandas_udf,
    with_processing_time,
)
from recovery_lib.causal.order import ordered
from recovery_lib.causal.services import CausalClock, CausalContext

__all__ = [
    "CausalClock",
    "CausalConfig",
    "CausalContext",
    "CorruptDeterminants",
    "DeterminantError",
    "DeterminantMismatch",
    "MissingDeterminants",
    "carried",
    "current",
    "foreach_batch",
    "map_in_arrow",
    "map_in_pandas",
    "ordered",
    "pandas_udf",
    "with_processing_time",
]
