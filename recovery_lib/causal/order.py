"""Deterministic record order before order-sensitive stateful functions (FlameStream's total
order, paper 004).

Rows reach a key through a shuffle in the order their blocks are fetched: local blocks first,
remote ones in random order (Spark randomises remote fetch requests), so a re-executed batch on
a cluster can feed a key the same rows in another order. A non-commutative function (last-N,
concatenation, running "first seen" values) then computes something else. ``ordered`` puts
each key's rows of a micro-batch into lineage order, (topic, partition, offset) of the source
record, before the user function sees them; batch boundaries are fixed by Spark's offset log,
so the order is a function of the input alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from recovery_lib.errors import JobError

LINEAGE = ("topic", "partition", "offset")


def ordered(
    fn: Callable[[Any, Iterator[Any], Any], Iterator[Any]],
    by: Sequence[str] = LINEAGE,
) -> Callable[[Any, Iterator[Any], Any], Iterator[Any]]:
    """Wrap an ``applyInPandasWithState`` function so that it sees one frame per call with
    the key's rows sorted by ``by``.

    The job must run with deterministic record order in the modes that re-execute batches
    (``ConsistencyContract(ordered=True)``).

    Args:
        fn: ``fn(key, frames, state)``, order-sensitive.
        by: The columns to sort by; default the source record's lineage (topic, partition,
            offset), which the rows must keep up to here.

    Returns:
        The wrapped function (same arguments). It raises ``JobError`` when the rows lack a
        column of ``by``.
    """
    columns = list(by)

    def wrapped(key: Any, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd

        parts = list(frames)
        if parts:
            missing = [c for c in columns if c not in parts[0].columns]
            if missing:
                raise JobError(
                    f"ordered(): rows lack the lineage columns {missing}; keep "
                    f"{', '.join(columns)} from the source until the stateful function"
                )
            whole = pd.concat(parts, ignore_index=True)
            parts = [whole.sort_values(columns, kind="stable", ignore_index=True)]
        return fn(key, iter(parts), state)

    wrapped.__name__ = getattr(fn, "__name__", "ordered")
    return wrapped
