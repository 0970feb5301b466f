"""Nondeterministic jobs under active replication: both replicas use one writer's determinants.

Two replicas of a job that calls a service, reads the clock or draws random numbers would
compute different values under the same output ids. Both run in causal mode (recovery_lib/
causal) with one shared determinant topic, and every stream (batch, scope, partition) has one
*writer* at a time: the writer runs live and logs; the other replica replays what the writer
logged, waiting for it where it is ahead. Neither replica leads: who writes a stream is decided
by the order of the determinant topic (one partition), the same for every reader:

* A replica that needs determinant ``seq`` of a stream nobody claimed appends a *claim*
  (term 1 from seq 0). The first claim in the log wins; the other replica follows.
* A follower whose writer's lease (its driver's heartbeat file) expired claims the stream from
  the end of the logged prefix with the next term, and goes on live from there: Clonos's
  recovery of a stream, on a replica that is already running.
* The fold (``StreamFold``) reads claims and runs in log order: a claim is accepted only if it
  is the next term and starts exactly at the end of the prefix accepted so far; a run counts
  only if its writer holds the current term and it extends the prefix without a gap. A zombie
  writer's runs after a takeover, and a claim that lost the race against a run of the writer
  it meant to replace, are dropped.
* A writer checks after each flush, before the outputs that depend on it leave, that it still
  holds the stream (``check_still_writer``); a zombie's task fails instead of releasing.

Under KaZoo the leader runs ahead and usually claims first, so the follower replays the
leader's determinants; under LiveRobin whichever replica reaches a stream first writes it.
Cost: each follower read and each writer's check is a read of the determinant topic.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from recovery_lib.causal.determinants import (
    Determinant,
    DeterminantError,
    DeterminantRun,
    StreamKey,
)
from recovery_lib.causal.log import CausalConfig, DeterminantLog
from recovery_lib.errors import ConfigurationError
from recovery_lib.ha.fencing import FencedError
from recovery_lib.ha.replication.leases import incarnation, lease_expired
from recovery_lib.settings import get_settings

POLL_S = 0.05


@dataclass(frozen=True)
class WriterTerm:
    """An accepted claim: ``writer`` writes the stream from ``from_seq`` on, in ``term``."""

    writer: str
    term: int
    from_seq: int


@dataclass
class StreamFold:
    """The accepted state of one stream, folded from its runs and claims in log order."""

    terms: list[WriterTerm] = field(default_factory=list)
    values: dict[int, Determinant] = field(default_factory=dict)
    dropped: int = 0  # runs and claims not accepted

    @property
    def length(self) -> int:
        """The accepted prefix: values 0 .. length - 1 are known."""
        n = 0
        while n in self.values:
            n += 1
        return n

    @property
    def writer(self) -> WriterTerm | None:
        return self.terms[-1] if self.terms else None

    def apply(self, run: DeterminantRun) -> None:
        current = self.writer
        if run.claim:
            if run.epoch == len(self.terms) + 1 and run.first_seq == self.length:
                self.terms.append(WriterTerm(run.writer, run.epoch, run.first_seq))
            else:
                self.dropped += 1
            return
        if current is None or run.writer != current.writer or run.epoch != current.term:
            self.dropped += 1  # no claim yet, or a writer whose term is over (a zombie)
            return
        if run.first_seq > self.length:
            self.dropped += 1  # a gap: the prefix stays contiguous
            return
        for i, det in enumerate(run.determinants):
            seq = run.first_seq + i
            if seq >= current.from_seq:
                self.values.setdefault(seq, det)

    @classmethod
    def of(cls, runs: Iterable[DeterminantRun]) -> StreamFold:
        fold = cls()
        for run in runs:
            fold.apply(run)
        return fold


class ClaimedStream:
    """``DeterminantSource`` (recovery_lib/causal/services.py) of one stream shared by the
    replicas: serves the writer's values, waits for them, or claims the stream."""

    def __init__(
        self,
        key: StreamKey,
        log: DeterminantLog,
        replica: str,
        lease_dir: str | Path,
        lease_timeout_s: float,
        wait_timeout_s: float,
    ) -> None:
        self.key = key
        self.log = log
        self.replica = replica
        self.me = incarnation(replica)
        self.lease_dir = Path(lease_dir)
        self.lease_timeout_s = lease_timeout_s
        self.wait_timeout_s = wait_timeout_s
        self.term = 0  # this process's term as the stream's writer (0: it follows)
        self.claims = 0
        self.waited_s = 0.0
        self._known: dict[int, Determinant] = {}  # accepted values: they never change

    def _fold(self) -> StreamFold:
        """The stream as the log says now (a read of the determinant topic)."""
        fold = StreamFold.of(self.log.runs(self.key))
        self._known = fold.values
        return fold

    def determinant(self, seq: int) -> Determinant | None:
        if seq in self._known:  # read before: no trip to the broker
            return self._known[seq]
        deadline = time.monotonic() + self.wait_timeout_s
        while True:
            fold = self._fold()
            if seq in fold.values:
                return fold.values[seq]
            current = fold.writer
            if current is not None and current.writer == self.me:
                self.term = current.term
                return None  # ours from here: run live
            if seq != fold.length:
                raise DeterminantError(
                    f"{self.key}: asked for determinant {seq} with {fold.length} logged; the "
                    "replicas' calls must come in the same order"
                )
            if current is None or self._expired(current.writer):
                self._claim(len(fold.terms) + 1, seq)
                continue  # the log's order decides who won
            if time.monotonic() > deadline:
                raise DeterminantError(
                    f"{self.key}: waited {self.wait_timeout_s:.0f} s for determinant {seq} of "
                    f"writer {current.writer}, whose lease is still live"
                )
            time.sleep(POLL_S)
            self.waited_s += POLL_S

    def _claim(self, term: int, seq: int) -> None:
        self.log.append(DeterminantRun(self.key, seq, (), epoch=term, writer=self.me, claim=True))
        self.log.flush()
        self.claims += 1

    def _expired(self, writer: str) -> bool:
        return lease_expired(self.lease_dir, writer, self.me, self.lease_timeout_s)

    def writer(self) -> tuple[str, int]:
        return self.me, self.term

    def check_still_writer(self) -> None:
        current = self._fold().writer
        if current is None or current.writer != self.me or current.term != self.term:
            raise FencedError(
                f"{self.key}: {current.writer if current else 'nobody'} took this stream over "
                f"from {self.me}; its outputs are not released (the task is retried and "
                "follows the new writer)"
            )


SHARED_SOURCE = f"{__name__}:claimed_stream"


def claimed_stream(config: CausalConfig, key: StreamKey, log: DeterminantLog) -> ClaimedStream:
    """Causal determinant-source factory (``CausalConfig.source``) for replicas; options
    ``replicaId`` and ``leaseDir`` (the replica set sets them)."""

    opts: Mapping[str, str] = {k.lower(): v for k, v in config.source_options.items()}
    try:
        replica, lease_dir = opts["replicaid"], opts["leasedir"]
    except KeyError as missing:
        raise ConfigurationError(
            f"shared determinants need source option {missing}; set replicaId and leaseDir in "
            "the causal config's source_options (a replica set does)"
        ) from None
    settings = get_settings()
    return ClaimedStream(
        key,
        log,
        replica,
        lease_dir,
        float(opts.get("leasetimeouts", settings.replication_lease_timeout_s)),
        float(opts.get("waittimeouts", settings.replication_publish_timeout_s)),
    )
