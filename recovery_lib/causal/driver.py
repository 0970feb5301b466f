"""Driver side of causal logging: prepare a (re)started query, and truncate the log.

``enable`` runs before the query starts: it creates the determinant topic and the causal state
directory, and reports which batch a restart re-executes (planned in the offset log, absent
from the commit log); the tasks themselves find out from stream markers (log.py) whether they
replay. ``TruncatingListener`` moves the log's low-water mark behind committed batches,
keeping the newest few; ``truncate`` is the same as an API for the checkpoint-GC DAG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recovery_lib.causal.log import CausalConfig, open_log
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.metrics.json_events import JsonEventsListener
from recovery_lib.runtime.checkpoint import batch_ids


def uncommitted_batch(checkpoint: str | Path) -> int:
    """The batch a restart re-executes (planned, not committed), or -1."""
    planned = batch_ids(Path(checkpoint) / "offsets")
    committed = batch_ids(Path(checkpoint) / "commits")
    if planned and (not committed or planned[-1] > committed[-1]):
        return planned[-1]
    return -1


def enable(spark: Any, config: CausalConfig, checkpoint: str | Path) -> int:
    """Call before ``writeStream.start()``; returns the batch that will be replayed (or -1)."""

    if config.storage == "kafka":
        TopicAdmin(config.kafka).create(config.topic, 1)
    Path(config.state_dir).mkdir(parents=True, exist_ok=True)
    return uncommitted_batch(checkpoint)


def truncate(config: CausalConfig, committed_batch: int) -> int:
    """Forget determinants of batches <= ``committed_batch`` (must be committed)."""
    return open_log(config).truncate(committed_batch)


class TruncatingListener(JsonEventsListener):
    """Every ``every`` batches, truncate all but the newest ``keep`` committed batches."""

    def __init__(self, config: CausalConfig, keep: int, every: int) -> None:
        self.config = config
        self.keep = keep
        self.every = max(1, every)
        self._last = -1

    def onQueryStarted(self, event) -> None:  # noqa: ANN001, N802
        pass

    def onQueryProgress(self, event) -> None:  # noqa: ANN001, N802
        batch = event.progress.batchId - self.keep
        if batch >= 0 and batch - self._last >= self.every:
            truncate(self.config, batch)
            self._last = batch

    def onQueryIdle(self, event) -> None:  # noqa: ANN001, N802
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: ANN001, N802
        pass
