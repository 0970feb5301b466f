"""Every Kafka record header this project writes or reads, by name, in one place.

A consumer of a job's output (the oracle, the latency collector, a user's reader) finds here
what each header means; the modules that write them import the names from here.
"""

from __future__ import annotations

# Outputs (io/sinks): the deterministic output id, and the writer's fencing epoch beside it (a
# standby that replays a batch in a new epoch produces the same ids).
ID_HEADER = "rl.id"
EPOCH_HEADER = "rl.epoch"
# Causal logging with piggybacked determinants: on the first record depending on them.
DET_HEADER = "rl.det"
# A record carrying a mechanism's state rather than an output: readers skip it unless asked.
CONTROL_HEADER = "rl.control"
# A fence record: writers of older epochs are ignored from here on.
FENCE_HEADER = "rl.fence"
# The two-phase sink: a record's transaction, and the commit record of a batch.
TXN_HEADER = "rl.txn"
COMMIT_HEADER = "rl.commit"
# Ingest time (ms) of the newest input an output depends on: where latency is measured.
INGEST_HEADER = "rl.ingest_ms"
# Dead letters: why the record was refused, and where it came from (topic/partition@offset).
REASON_HEADER = "rl.reason"
SOURCE_POSITION_HEADER = "rl.source"
# Communication-induced checkpointing: the sender's checkpoint index piggybacked on a record.
CIC_HEADER = "rl.cic"
# Continuous eventual checkpointing: a log record's kind, its metadata and state fingerprint.
CEC_KIND_HEADER = "rl.cec"
CEC_META_HEADER = "rl.cec.meta"
CEC_FINGERPRINT_HEADER = "rl.cec.fp"
# Active replication: the gate's input position of a copied output, the replica that wrote
# it, and a LiveRobin heartbeat's sequence number.
GATE_SOURCE_HEADER = "rl.src"
REPLICA_HEADER = "rl.replica"
HEARTBEAT_HEADER = "rl.hb"
