"""CIC: communication-induced checkpointing with HMNR (Helary, Mostefaoui, Netzer, Raynal),
as CheckMate runs it, on a pipeline of Spark queries.

Every stage keeps a Lamport clock ``lc``, the vector ``ckpt`` (checkpoints of each stage it
knows of), and the boolean vectors ``taken`` (a Z-path from that stage's last known checkpoint
reached here), ``greater`` (this clock exceeds that stage's) and ``sent_to`` (sent to that
stage since the last checkpoint). ``lc``, ``ckpt``, ``taken`` and ``greater`` travel on every
record (header ``rl.cic``). Before delivering a record, a stage takes a forced checkpoint if
  C1: it sent to some stage k in this interval, the record's sender knows a clock greater than
      k's, and the record's clock exceeds its own; or
  C2: the record carries a Z-path that started in this stage's current interval
      (``m.ckpt[i] == ckpt[i]`` and ``m.taken[i]``): delivering it would close a Z-cycle.

Mapping onto micro-batches. A batch delivers its input range (fixed in the offset log before
any of its outputs is written), then sends its outputs; a checkpoint is a committed batch the
stage keeps as one (every batch, or one per checkpoint interval, see stage_log). The cut
policy ``ForcedCut`` reads the headers of the range it is about to hand to Spark, delivers
the records in a fixed order (partitions in order, offsets in order) to the clocks, and at the
first record that meets C1 or C2 ends the batch just before it (on that partition, and every
partition after it in the order) and marks the batch a forced checkpoint; if that record is
the batch's first, the previous batch (committed, so recoverable) becomes the forced
checkpoint instead. The clocks after the batch's deliveries go to a file the sink's tasks read
for their headers and the commit hook continues from.

When a stage checkpoints every batch, no interval has a receive after a send (Spark plans
the whole input of a batch before writing any output), so Z-cycles cannot form and neither
condition ever holds: the protocol costs its headers and nothing else. The conditions fire
when checkpoints are further apart than batches.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from recovery_lib.io.cut_policies import CutPolicy, FreeCut
from recovery_lib.io.exceptions import InvalidSourceOption
from recovery_lib.io.offsets import Offsets
from recovery_lib.kafka.headers import CIC_HEADER
from recovery_lib.protocols.header_ranges import read_headers
from recovery_lib.protocols.stage_log import StageLog, write_atomic
from recovery_lib.runtime.checkpoint import batch_ids


@dataclass
class Clocks:
    me: int
    lc: int
    ckpt: list[int]
    taken: list[bool]
    greater: list[bool]
    sent_to: list[bool]

    @classmethod
    def initial(cls, me: int, n: int) -> Clocks:
        """The initial state is a stage's first checkpoint: it knows one of its own, none of
        the others' (0 means "no causal path from that stage yet")."""
        ckpt = [1 if k == me else 0 for k in range(n)]
        return cls(me, 0, ckpt, [False] * n, [False] * n, [False] * n)

    # -- what travels --------------------------------------------------------------------------

    def piggyback(self) -> bytes:
        bits = lambda v: "".join("1" if x else "0" for x in v)  # noqa: E731
        ckpt = ",".join(str(c) for c in self.ckpt)
        return f"{self.lc}|{ckpt}|{bits(self.taken)}|{bits(self.greater)}".encode()

    @staticmethod
    def parse(value: bytes) -> tuple[int, list[int], list[bool], list[bool]]:
        lc, ckpt, taken, greater = value.decode().split("|")
        return (
            int(lc),
            [int(c) for c in ckpt.split(",")],
            [c == "1" for c in taken],
            [c == "1" for c in greater],
        )

    # -- HMNR -----------------------------------------------------------------------------------

    def must_force(self, m: tuple[int, list[int], list[bool], list[bool]]) -> bool:
        m_lc, m_ckpt, m_taken, m_greater = m
        i = self.me
        c1 = m_lc > self.lc and any(s and g for s, g in zip(self.sent_to, m_greater, strict=True))
        c2 = m_ckpt[i] == self.ckpt[i] and m_taken[i]
        return c1 or c2

    def deliver(self, m: tuple[int, list[int], list[bool], list[bool]]) -> None:
        m_lc, m_ckpt, m_taken, m_greater = m
        i = self.me
        if m_lc > self.lc:
            self.lc = m_lc
            self.greater = list(m_greater)
            self.greater[i] = False
        elif m_lc == self.lc:
            self.greater = [a and b for a, b in zip(self.greater, m_greater, strict=True)]
        for k in range(len(self.ckpt)):
            if k == i:
                continue
            if m_ckpt[k] > self.ckpt[k]:
                self.ckpt[k] = m_ckpt[k]
                self.taken[k] = m_taken[k]
            elif m_ckpt[k] == self.ckpt[k]:
                self.taken[k] = self.taken[k] or m_taken[k]

    def send(self, to: int) -> None:
        self.sent_to[to] = True

    def checkpoint(self) -> None:
        i = self.me
        self.sent_to = [False] * len(self.ckpt)
        self.taken = [k != i for k in range(len(self.ckpt))]
        self.lc += 1
        self.greater = [k != i for k in range(len(self.ckpt))]
        self.ckpt[i] += 1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Clocks:
        return cls(**raw)


@dataclass
class BatchClocks:
    """What the cut policy decided for batch b: the clocks after its deliveries, and whether
    it must be a (forced) checkpoint."""

    clocks: Clocks
    forced: bool = False
    delivered: int = 0
    force_previous: bool = False  # the first record forced: the previous batch checkpoints

    def to_json(self) -> str:
        return json.dumps(
            {"clocks": self.clocks.to_json(), "forced": self.forced, "delivered": self.delivered}
        )


def _state_path(protocol_dir: str | Path, stage: str, batch: int, source: str = "") -> Path:
    """Where a source's cut policy leaves batch ``batch``'s clocks: one file per source (its
    topics), since a stage with several inputs has one cut policy per input; ``source`` ""
    is the single file of earlier versions."""
    cic = Path(protocol_dir) / "stages" / stage / "cic"
    return cic / str(batch) / f"{source}.json" if source else cic / f"{batch}.json"


def source_key(start: Offsets) -> str:
    """A source's name among a stage's inputs: the topics it reads."""
    return "+".join(sorted(start)).replace("/", "_") or "none"


def _read_state(path: Path) -> BatchClocks:
    raw = json.loads(path.read_text())
    return BatchClocks(Clocks.from_json(raw["clocks"]), raw["forced"], raw.get("delivered", 0))


def batch_state(protocol_dir: str | Path, stage: str, batch: int) -> BatchClocks | None:
    """The stage's clocks after batch ``batch``'s deliveries, from every input: each source's
    cut policy started from the same clocks and delivered its own records, and HMNR's deliver
    is a merge (max of the Lamport clock and ckpt, taken/greater by the rule), so delivering
    each source's result into the one that checkpointed most gives the clocks after all of
    them. Forced if any source forced the batch."""
    per_source = sorted(_state_path(protocol_dir, stage, batch, "x").parent.glob("*.json"))
    states = [_read_state(p) for p in per_source]
    legacy = _state_path(protocol_dir, stage, batch)
    if not states and legacy.exists():
        states = [_read_state(legacy)]
    if not states:
        return None
    me = states[0].clocks.me
    states.sort(key=lambda st: st.clocks.ckpt[me], reverse=True)
    merged = states[0]
    for other in states[1:]:
        c = other.clocks
        merged.clocks.deliver((c.lc, c.ckpt, c.taken, c.greater))
        merged.forced = merged.forced or other.forced
        merged.delivered += other.delivered
    return merged


def clocks_after(log: StageLog, batch: int, me: int, n: int) -> Clocks:
    """The stage's clocks once batch ``batch`` committed (its record), or the initial ones."""
    record = log.read(batch) if batch >= 0 else None
    if record is None or not record.clocks:
        return Clocks.initial(me, n)
    return Clocks.from_json(record.clocks)


class ForcedCut(CutPolicy):
    """Free cuts, ended early before a record whose delivery HMNR forbids without a forced
    checkpoint."""

    name = "forced"

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        opts = {k.lower(): v for k, v in options.items()}
        try:
            self.protocol_dir = opts["protocoldir"]
            self.stage = opts["protocolstage"]
            self.checkpoint = Path(opts["stagecheckpoint"])
            self.me = int(opts["protocolstageindex"])
            self.n = int(opts["protocolstages"])
        except (KeyError, ValueError):
            raise InvalidSourceOption(
                "cutPolicy forced needs protocolDir, protocolStage, stageCheckpoint, "
                "protocolStageIndex and protocolStages (the pipeline runner sets them)"
            ) from None
        self.free = FreeCut(options)
        self.log = StageLog(self.protocol_dir, self.stage)
        self.kafka = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}

    def cut(self, start: Offsets, available: Offsets, max_rows: int | None) -> Offsets:
        end = self.free.cut(start, available, max_rows)
        planned = batch_ids(self.checkpoint / "offsets")
        batch = planned[-1] + 1 if planned else 0
        clocks = clocks_after(self.log, batch - 1, self.me, self.n)
        decided = decide(clocks, self._headers(start, end), start, end)
        if decided.force_previous and batch > 0:
            self._force_previous(batch - 1)
        path = _state_path(self.protocol_dir, self.stage, batch, source_key(start))
        write_atomic(path, decided.to_json())
        return end

    def _force_previous(self, batch: int) -> None:
        record = self.log.read(batch)
        if record is not None and not record.checkpoint:
            record.forced = record.checkpoint = True
            clocks = Clocks.from_json(record.clocks) if record.clocks else None
            if clocks is not None:
                clocks.checkpoint()
                record.clocks = clocks.to_json()
            self.log.write(record)

    def _headers(
        self, start: Offsets, end: Offsets
    ) -> dict[tuple[str, int], list[tuple[int, bytes | None]]]:
        """(offset, ``rl.cic`` header) of every record in [start, end), per partition."""
        ranges = {
            (t, int(p)): (start[t][p], end[t][p])
            for t, parts in end.items()
            for p in parts
            if end[t][p] > start[t][p]
        }
        return read_headers(self.kafka, ranges, CIC_HEADER)


def decide(
    clocks: Clocks,
    headers: Mapping[tuple[str, int], list[tuple[int, bytes | None]]],
    start: Offsets,
    end: Offsets,
) -> BatchClocks:
    """Deliver the records to ``clocks`` in order; shorten ``end`` (in place) at the first
    record that forces a checkpoint. Records without the header (from outside the pipeline)
    carry no dependency."""
    result = BatchClocks(clocks)
    cut_here = False
    for topic in sorted(end):
        for part in sorted(end[topic], key=int):
            begin = start[topic][part]
            if cut_here:
                end[topic][part] = begin
                continue
            for offset, value in headers.get((topic, int(part)), []):
                if value is None:
                    result.delivered += 1
                    continue
                m = Clocks.parse(value)
                if clocks.must_force(m):
                    if result.delivered == 0:
                        # The state before this record is the previous batch's: force that one.
                        result.force_previous = True
                        clocks.checkpoint()
                    else:
                        end[topic][part] = offset
                        result.forced = True
                        cut_here = True
                        break
                clocks.deliver(m)
                result.delivered += 1
    return result
