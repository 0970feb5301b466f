"""Latency and output throughput of a job that writes a lakehouse table (io/sinks/table_target.py).

The table's counterpart of ``LatencyCollector``, with the same surface (``samples``,
``per_second``, ``start``/``stop``): a thread polls the table's commits, and for each new commit
of a micro-batch reads that batch's ``ingest_ms`` column. visible_ms = the commit's time (its rows
became visible together), latency = visible - ingest. A commit the sink skipped never happens,
so a re-run batch adds nothing; ``batches_twice`` counts batches committed more than once (a
broken sink), which the report shows beside the oracle's verdict.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from recovery_lib.io.sinks.table_target import TableTarget
from recovery_lib.metrics.latency import OutputFollower
from recovery_lib.metrics.store import MetricsStore

log = logging.getLogger(__name__)

INGEST_COL = "ingest_ms"


class TableLatencyCollector(OutputFollower):
    max_batches_kept = 10_000  # a windowed follower's memory of which batches it has seen

    def __init__(
        self,
        target: TableTarget,
        run_id: str,
        store: MetricsStore | None,
        poll_s: float = 0.5,
        max_samples_per_s: int = 500,
        from_beginning: bool = True,
        window_s: float | None = None,
    ) -> None:
        """``from_beginning`` False: only commits after the first poll (a daemon's view);
        ``window_s``: keep only that many seconds of samples and counts (a long-lived one)."""
        self.target = target
        self.run_id = run_id
        self.store = store
        self.poll_s = poll_s
        self.max_samples_per_s = max_samples_per_s
        self.samples: list[tuple[int, int]] = []  # (visible_ms, latency_ms), all of them
        self.per_second: dict[int, int] = defaultdict(int)
        self.commits_seen: dict[int, int] = {}  # batch id -> commits of it (1 when correct)
        self._version = -1
        self.from_beginning = from_beginning
        self.window_s = window_s
        super().__init__("latency-table")

    @property
    def batches_twice(self) -> list[int]:
        return sorted(b for b, n in self.commits_seen.items() if n > 1)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - not created yet (the first batch does),
                # or a read racing a commit: the next poll
                log.debug("table %s not read now: %r", self.target.where, exc)

    def poll(self) -> int:
        """Read the commits landed since the last poll; the outputs they added."""
        added = 0
        commits = self.target.commits()
        if not self.from_beginning and self._version < 0 and commits:
            self._version = commits[-1].version  # what the table held before we looked
        for commit in commits:
            if commit.version <= self._version:
                continue
            self._version = commit.version
            if commit.mark is None:  # not a batch of a sink (a compaction, a vacuum)
                continue
            batch = commit.mark.batch_id
            self.commits_seen[batch] = self.commits_seen.get(batch, 0) + 1
            if self.commits_seen[batch] > 1:
                continue  # its rows were counted with its first commit
            rows = self.target.batch_rows(batch, [INGEST_COL]).column(INGEST_COL).to_pylist()
            added += self._record(commit.timestamp_ms, rows)
        return added

    def _trim(self) -> None:
        if self.window_s is None or not self.samples:
            return
        oldest_ms = self.samples[-1][0] - self.window_s * 1000
        keep = next((i for i, s in enumerate(self.samples) if s[0] >= oldest_ms), 0)
        del self.samples[:keep]
        for second in [s for s in self.per_second if s * 1000 < oldest_ms]:
            del self.per_second[second]
        for batch in sorted(self.commits_seen)[: -self.max_batches_kept]:
            del self.commits_seen[batch]

    def _record(self, visible: int, ingests: list[int | None]) -> int:
        second = visible // 1000
        self.per_second[second] += len(ingests)
        samples = [(visible, visible - int(i)) for i in ingests if i is not None]
        self.samples.extend(samples)
        if self.store is not None and ingests:
            kept = samples[: self.max_samples_per_s]
            self.store.add(
                "latency_samples", [(self.run_id, v, v - lat, lat, None) for v, lat in kept]
            )
            self.store.add("throughput", [(self.run_id, second, 0, len(ingests))])
        self._trim()
        return len(ingests)
