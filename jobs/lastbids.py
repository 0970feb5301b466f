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

from collections import Counter, defaultdict
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


class ListsSomeRunProduces:
    """Each output list is one some failure-free run could emit (paper 004, definition 5):

    1. it holds only auctions the bidder bid on (no more often than they did);
    2. it continues the bidder's previous output: after k more bids, the previous list's last
       5 - k auctions still lead it (a re-executed batch that released another order before
       breaks this, as the paper's concatenation example does);
    3. two auctions whose bids come from one input partition keep that partition's order
       (Spark never reorders a partition's rows; only partitions interleave).
    """

    name = "lastbids lists in an order some failure-free run produces"

    def check(self, outputs: Sequence[Output], inputs: InputView | None) -> InvariantResult:
        violations: Counter[Flaw] = Counter()
        examples: list[str] = []
        previous: dict[Any, tuple[int, list[str]]] = {}
        for o in outputs:  # topic order: a bidder's outputs are in one partition, in order
            bidder, bids = o.value.get("bidder"), int(o.value.get("bids") or 0)
            auctions = [a for a in str(o.value.get("last_auctions") or "").split(",") if a]
            before_n, before = previous.get(bidder, (0, []))
            k = bids - before_n
            if k <= 0:
                violations[Flaw.DUPLICATED_INPUT] += 1
                examples.append(f"bidder {bidder}: {bids} bids after {before_n}")
            elif k < KEEP:
                kept = before[-(KEEP - k) :] if len(before) > KEEP - k else before
                if auctions[: len(kept)] != kept:
                    violations[Flaw.INCONSISTENT] += 1
                    examples.append(f"bidder {bidder}: {auctions} does not continue {before}")
            previous[bidder] = (max(bids, before_n), auctions)
        if inputs is None or not inputs.has("bids"):  # the order rules need the input's positions
            return InvariantResult(self.name, checked=False, violations=+violations)
        positions: dict[tuple[Any, str], list[tuple[int, int]]] = defaultdict(list)
        for record, bid in inputs.decoded("bids"):
            if isinstance(bid, dict):
                key = (bid.get("bidder"), str(bid.get("auction")))
                positions[key].append((record.partition, record.offset))
        for o in outputs:
            bidder = o.value.get("bidder")
            auctions = [a for a in str(o.value.get("last_auctions") or "").split(",") if a]
            for auction, n in Counter(auctions).items():
                if n > len(positions.get((bidder, auction), ())):
                    violations[Flaw.INCONSISTENT] += 1
                    examples.append(f"bidder {bidder}: auction {auction} x{n} not in its bids")
            # Auctions the bidder bid on once have one position: check partition order.
            last_offset: dict[int, int] = {}
            for auction in auctions:
                pos = positions.get((bidder, auction), [])
                if len(pos) != 1:
                    continue  # bid more than once on this auction: its position is ambiguous
                partition, offset = pos[0]
                if offset < last_offset.get(partition, -1):
                    violations[Flaw.INCONSISTENT] += 1
                    examples.append(f"bidder {bidder}: {auctions} reorders partition {partition}")
                    break
                last_offset[partition] = offset
        return InvariantResult(
            self.name, checked=True, violations=+violations, examples=examples[:5]
        )


JOB = JobSpec(
    name="lastbids",
    build=build,
    inputs=("bids",),
    # Where batches end decides which running lists are emitted; the final count per bidder
    # and the lists' order rules do not depend on it.
    contract=ConsistencyContract(
        deterministic=False,
        agreement=KeyTotals("bidder", "bids", "max"),
        invariants=(ListsSomeRunProduces(),),
        ordered=True,
    ),
    default_prefix=NEXMARK_PREFIX,
    description="Last five auctions per bidder (a non-commutative stateful operator)",
)


def main(argv: list[str] | None = None) -> None:
    run(JOB, argv)


if __name__ == "__main__":
    main()
