"""A non-commutative stateful operator: for each bidder, the last five auctions they bid on,
in bid order.

Every micro-batch emits, per bidder who bid, the running list of their last five auctions.
The result depends on the order in which a key's rows arrive. Bids are partitioned by auction
in Kafka, so one bidder's bids come from every source partition and meet only after the
shuffle, in block fetch order: that order depends on which executor ran which map task and on
when remote fetches complete, so a re-executed batch on a cluster can emit another list under
the same output id. With
``--mode causal`` each key's rows are put in lineage order (topic, partition, offset) first
(recovery_lib.causal.order), and the re-execution emits what the first run did.

    python -m jobs.lastbids --prefix nx --output-topic nx.out.lastbids [--mode causal]
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from recovery_lib.causal.order import ordered
from recovery_lib.job import JobOptions, JobSpec, output
from recovery_lib.job.runner import run
from recovery_lib.nexmark.streams import NEXMARK_PREFIX, read_events
from recovery_lib.verify.contract import (
    ConsistencyContract,
    Flaw,
    InvariantResult,
    KeyTotals,
    Output,
    number_problem,
)
from recovery_lib.verify.inputs import InputView

KEEP = 5
OUTPUT_SCHEMA = "bidder long, last_auctions string, bids long, ingest_ms long"
STATE_SCHEMA = "last_auctions string, bids long"


def last_auctions(key: tuple, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    (bidder,) = key
    last, count = ("", 0) if not state.exists else state.get
    auctions = [a for a in last.split(",") if a]
    ingest = 0
    for frame in frames:
        auctions.extend(str(a) for a in frame["auction"].tolist())
        count += len(frame)
        ingest = max(ingest, int(frame["ingest_ms"].max()))
    auctions = auctions[-KEEP:]
    state.update((",".join(auctions), count))
    yield pd.DataFrame(
        {
            "bidder": [bidder],
            "last_auctions": [",".join(auctions)],
            "bids": [count],
            "ingest_ms": [ingest],
        }
    )


def build(spark: SparkSession, opts: JobOptions) -> DataFrame:
    bids = read_events(spark, "bids", opts).select(
        "auction", "bidder", "topic", "partition", "offset", "ingest_ms"
    )
    fn = last_auctions if opts.causal is None else ordered(last_auctions)
    result = bids.groupBy("bidder").applyInPandasWithState(
        fn, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )
    return result.select(
        *output(
            F.col("bidder"),
            [F.col("bidder"), F.col("last_auctions"), F.col("bids")],
            F.col("ingest_ms"),
        )
    )


def _auctions(value: Any) -> list[str]:
    return [a for a in str(value or "").split(",") if a]


class ListsSomeRunProduces:
    """Each output is a list some failure-free run could emit (paper 004, definition 5): the
    last ``min(n, 5)`` auctions of the ``n`` bids the run has seen of that bidder.

    Without the input:
      1. ``n`` grows from one output of a bidder to the next (else input was seen twice);
      2. the list holds ``min(n, 5)`` auctions;
      3. it continues the bidder's previous output: after k < 5 more bids, the previous list's
         last 5 - k auctions lead it (a re-executed batch that released another order before
         breaks this, as the paper's concatenation example does).
    With the input (each bid's partition and offset), ``unchecked`` without it:
      4. ``n`` is at most the bidder's bids;
      5. a run reads each partition in offset order and interleaves partitions freely, so the
         list's auctions from one partition are that partition's bids by the bidder just before
         some point c_p, contiguous and in order; and the points can add up to ``n``: the
         partitions in the list give c_p each, every other partition between what the
         bidder's earlier outputs pinned and all its bids there.
    """

    name = "lastbids lists some failure-free run emits"
    agreement_covers = False  # the agreement (final counts) says nothing about the lists
    MAX_PLACEMENTS = 4096  # auctions in several partitions make a list's placement ambiguous

    def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult:
        bids_of = self._bids(inputs)
        result = InvariantResult(self.name, checked=bids_of is not None)
        flag = result.flag
        undecided = 0
        previous: dict[Any, tuple[int, list[str]]] = {}
        pinned: dict[Any, dict[int, int]] = defaultdict(dict)  # bidder -> partition -> c_p
        for o in outputs:  # topic order: a bidder's outputs are in one partition, in order
            bidder, n = o.value.get("bidder"), o.value.get("bids")
            if number_problem(n, integer=True, nonnegative=True) is not None:
                continue  # malformed: the agreement counts it
            auctions = _auctions(o.value.get("last_auctions"))
            before_n, before = previous.get(bidder, (0, []))
            k = n - before_n
            if k <= 0:
                flag(Flaw.DUPLICATED_INPUT, f"bidder {bidder}: {n} bids after {before_n}")
            elif len(auctions) != min(n, KEEP):
                flag(Flaw.INCONSISTENT, f"bidder {bidder}: {len(auctions)} auctions after {n}")
            elif k < KEEP and before:
                kept = before[-(KEEP - k) :] if len(before) > KEEP - k else before
                if auctions[: len(kept)] != kept:
                    flag(
                        Flaw.INCONSISTENT, f"bidder {bidder}: {auctions} does not continue {before}"
                    )
            previous[bidder] = (max(n, before_n), auctions)
            if bids_of is None or k <= 0:
                continue
            partitions = bids_of.get(bidder, {})
            total = sum(len(seq) for seq in partitions.values())
            if n > total:
                flag(Flaw.DUPLICATED_INPUT, f"bidder {bidder}: {n} bids counted, {total} made")
                continue
            points = self._points(auctions, n, partitions, pinned[bidder])
            if points is UNDECIDED:
                undecided += 1
            elif points is None:
                flag(
                    Flaw.INCONSISTENT, f"bidder {bidder}: {auctions} is no run's last {KEEP} of {n}"
                )
            else:
                pinned[bidder] = points  # type: ignore[assignment]
        result.details = {"outputs": len(outputs), "undecided": undecided}
        return result

    @staticmethod
    def _bids(inputs: InputView | None) -> dict[Any, dict[int, list[str]]] | None:
        """Per bidder and partition, the auctions bid on, in offset order (None: no input)."""
        if inputs is None or not inputs.has("bids"):
            return None
        out: dict[Any, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
        for record, bid in sorted(
            inputs.decoded("bids"), key=lambda r: (r[0].partition, r[0].offset)
        ):
            if isinstance(bid, dict):
                out[bid.get("bidder")][record.partition].append(str(bid.get("auction")))
        return out

    def _points(
        self,
        auctions: list[str],
        n: int,
        partitions: dict[int, list[str]],
        low: dict[int, int],
    ) -> dict[int, int] | None | Undecided:
        """Lower bounds of every partition's point c_p after this list (rule 5), None when no
        run has the list. An auction's bids are in one partition (Kafka partitions bids by
        auction); where one was bid on in several, each way of placing it is tried."""
        owners = [[p for p, seq in partitions.items() if a in seq] for a in auctions]
        feasible: list[dict[int, int]] = []
        for tried, owner in enumerate(itertools.product(*owners)):
            if tried >= self.MAX_PLACEMENTS:
                return UNDECIDED
            blocks: dict[int, list[str]] = defaultdict(list)
            for auction, p in zip(auctions, owner, strict=True):
                blocks[p].append(auction)
            # A partition's auctions in the list are its bids just before its point c_p.
            points: dict[int, list[int]] = {}
            for p, block in blocks.items():
                seq, k = partitions[p], len(block)
                start = max(k, low.get(p, 0))
                points[p] = [c for c in range(start, len(seq) + 1) if seq[c - k : c] == block]
            if not all(points.values()):
                continue
            others = [p for p in partitions if p not in blocks]
            least = sum(low.get(p, 0) for p in others)
            most = sum(len(partitions[p]) for p in others)
            sums = {0}
            for choices in points.values():
                sums = {s + c for s in sums for c in choices if s + c + least <= n}
            if any(s + least <= n <= s + most for s in sums):
                feasible.append({p: min(c) for p, c in points.items()})
        if not feasible:
            return None
        return {
            p: min(f.get(p, low.get(p, 0)) for f in feasible)
            for p in set(low) | {p for f in feasible for p in f}
        }


class Undecided:
    """A list whose auctions were bid on in so many partitions that the placements were not
    all tried: neither a violation nor shown correct."""


UNDECIDED = Undecided()


JOB = JobSpec(
    name="lastbids",
    build=build,
    inputs=("bids",),
    # Where batches end decides which running lists are emitted; the final count per bidder
    # and the lists' order rules do not depend on it.
    contract=ConsistencyContract(
        deterministic=False,
        agreement=KeyTotals(("bidder",), "bids", "max"),
        invariants=(ListsSomeRunProduces(),),
        ordered=True,
        ordered_list="last_auctions",
    ),
    default_prefix=NEXMARK_PREFIX,
    description="Last five auctions per bidder (a non-commutative stateful operator)",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
