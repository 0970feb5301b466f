"""How a pipeline stage's query reaches its protocol: the sink's commit hook records each
checkpoint, the source's cut policy decides where batches end (coordinated.MarkerCut,
communication_induced.ForcedCut), and the sink's record-headers hook piggybacks the
communication-induced clocks. The pipeline runner names them in the stage's source and sink
options (``stage_options``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from recovery_lib.errors import ProtocolError
from recovery_lib.io.client_cache import cached
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.protocols.communication_induced import CIC_HEADER, batch_state
from recovery_lib.protocols.coordinated import epochs_completed
from recovery_lib.protocols.header_ranges import tail_probe
from recovery_lib.protocols.stage_log import CheckpointRecord, StageLog, register_epoch
from recovery_lib.runtime.checkpoint import batch_ids, source_offsets

COMMIT_HOOK = f"{__name__}:StageCommitHook"
RECORD_HEADERS = f"{__name__}:StageHeaders"


def _kafka(options: Mapping[str, str]) -> dict[str, str]:
    kafka = {k[len("kafka.") :]: v for k, v in options.items() if k.startswith("kafka.")}
    if "bootstrap.servers" not in kafka:
        from recovery_lib.kafka.clients import client_config

        kafka = {**client_config(), **kafka}
    return kafka


def topic_ends(kafka: dict[str, str], topic: str) -> dict[int, int]:
    """Exact end offset of every partition of ``topic``."""

    parts = cached("admin:protocol", kafka, TopicAdmin).partitions(topic)
    ends = cached("probe:protocol", kafka, tail_probe).ends([(topic, p) for p in parts], exact=True)
    return {p: ends[(topic, p)] for p in parts}


class StageCommitHook:
    """Sink ``commitHook`` of a stage: after batch b's records are acknowledged, record
    checkpoint b (the output topic's ends = what the stage had sent) and do the protocol's
    part: COOR registers the epochs b completed on the output topic (forwards the markers);
    CIC keeps the clocks its cut policy computed for b."""

    def __init__(self, options: Mapping[str, str]) -> None:
        opts = {k.lower(): v for k, v in options.items()}
        self.on_epochs = opts.get("checkpointonepochs", "false") == "true"  # COOR
        self.keep_clocks = opts.get("keepclocks", "false") == "true"  # CIC
        self.log = StageLog(opts["protocoldir"], opts["protocolstage"])
        self.protocol_dir = opts["protocoldir"]
        self.checkpoint = Path(opts["stagecheckpoint"])
        self.topic = opts["topic"]
        self.aligned = [t for t in opts.get("markertopics", "").split(",") if t]
        self.receivers = [int(r) for r in opts.get("protocolreceivers", "").split(",") if r]
        self.interval_ms = int(opts.get("checkpointintervalms", "0"))
        self.kafka = _kafka(opts)

    def committed(self, batch_id: int) -> None:
        sent = topic_ends(self.kafka, self.topic)
        record = CheckpointRecord(
            batch=batch_id,
            sent={self.topic: {str(p): o for p, o in sent.items()}},
            taken_ms=int(time.time() * 1000),
        )
        if self.on_epochs:
            self._forward_epochs(record)
            record.checkpoint = bool(record.epochs)
        else:
            record.checkpoint = self._interval_elapsed(record)
        if self.keep_clocks:
            self._advance_clocks(record)
        self.log.write(record)

    def _previous(self, batch: int) -> CheckpointRecord | None:
        earlier = [b for b in batch_ids(self.checkpoint / "commits") if b < batch]
        return self.log.read(earlier[-1]) if earlier else None

    def _interval_elapsed(self, record: CheckpointRecord) -> bool:
        """UNC and CIC: a checkpoint per ``checkpointIntervalMs`` (0: every batch)."""
        if self.interval_ms <= 0:
            return True
        last = max(
            (r.taken_ms for r in self.log.records() if r.checkpoint and r.batch < record.batch),
            default=None,
        )
        return last is None or record.taken_ms - last >= self.interval_ms

    def _advance_clocks(self, record: CheckpointRecord) -> None:
        """CIC: the clocks after the batch's deliveries (its cut policy's file), then its
        sends, then its checkpoint if it is one."""

        state = batch_state(self.protocol_dir, self.log.stage, record.batch)
        if state is None:
            raise ProtocolError(
                f"stage {self.log.stage}: no CIC clocks for batch {record.batch}; run the "
                "stage's inputs with cutPolicy forced"
            )
        clocks = state.clocks
        previous = self._previous(record.batch)
        before = _ints(previous.sent) if previous is not None else {}
        if any(o > before.get(p, 0) for p, o in _ints(record.sent).items()):
            for receiver in self.receivers:
                clocks.send(receiver)
        record.forced = state.forced
        record.checkpoint = record.checkpoint or state.forced
        if record.checkpoint:
            clocks.checkpoint()
        record.clocks = clocks.to_json()

    def _forward_epochs(self, record: CheckpointRecord) -> None:
        # Only batches before this one count: a re-run (or rewound) batch completes its
        # epochs again.
        earlier = {b for b in batch_ids(self.checkpoint / "commits") if b < record.batch}
        done = set().union(*(r.epochs for r in self.log.records() if r.batch in earlier))
        # Epochs whose marker sits where the previous batch ended: no record came between, so
        # that batch completed them (they were registered after it committed).
        before = self._previous(record.batch)
        if before is not None:
            ends = source_offsets(self.checkpoint, before.batch)
            late = epochs_completed(self.protocol_dir, self.aligned, ends, done)
            for epoch in late:
                register_epoch(self.protocol_dir, self.topic, epoch, _ints(before.sent))
            if late:
                before.epochs = sorted({*before.epochs, *late})
                before.checkpoint = True
                self.log.write(before)
                done.update(late)
        ends = source_offsets(self.checkpoint, record.batch)
        record.epochs = epochs_completed(self.protocol_dir, self.aligned, ends, done)
        for epoch in record.epochs:
            register_epoch(self.protocol_dir, self.topic, epoch, _ints(record.sent))


def _ints(sent: Mapping[str, Mapping[str, int]]) -> dict[int, int]:
    (parts,) = sent.values()
    return {int(p): o for p, o in parts.items()}


class StageHeaders:
    """Sink ``recordHeaders`` of a CIC stage: the clocks after the batch's deliveries."""

    def __init__(self, options: Mapping[str, str]) -> None:
        opts = {k.lower(): v for k, v in options.items()}
        self.protocol_dir = opts["protocoldir"]
        self.stage = opts["protocolstage"]

    def for_batch(self, batch_id: int) -> list[tuple[str, bytes]]:
        state = batch_state(self.protocol_dir, self.stage, batch_id)
        if state is None:
            raise ProtocolError(
                f"stage {self.stage}: no CIC clocks for batch {batch_id} (the cut policy "
                "writes them before the batch is planned); run the stage's inputs with cutPolicy "
                "forced"
            )
        return [(CIC_HEADER, state.clocks.piggyback())]
