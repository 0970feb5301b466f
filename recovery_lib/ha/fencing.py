"""Fencing epochs: whoever holds the newest epoch may write; everyone older is a zombie.

The epoch store is a directory on storage shared by the primary, its standbys and their
executors (the checkpoint's filesystem). Epoch ``n`` exists once the file ``<n>`` was created
with O_EXCL, so two standbys racing for the same epoch cannot both win. Writers (the Kafka
sink, the determinant log) check their epoch before and while they write and stop with
``FencedError`` once a newer one exists.

A writer paused between its check and its write (SIGSTOP, a GC pause) can still get records
out. Readers close that gap: at takeover the new holder writes a *fence record* (header
``rl.fence`` = epoch, no id) into every partition of its output topics, and readers drop every
later record in that partition whose epoch is older (``FenceFilter``), as Kafka brokers do for
fenced producers.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery_lib.io.exceptions import WriterFenced
from recovery_lib.io.hooks import writer_epoch
from recovery_lib.io.sinks.fences import FENCE_HEADER, FenceFilter
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged
from recovery_lib.settings import Settings, get_settings

# Readers' side of fencing, defined by io (fence records, the filter); re-exported here.
__all__ = ["FENCE_HEADER", "EpochStore", "FenceFilter", "FencedError", "epoch_guard"]


class FencedError(WriterFenced):
    """A newer epoch exists: this writer is a zombie and must stop."""


class EpochStore:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def current(self) -> int:
        """The newest epoch (0 when none was ever taken)."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return 0
        return max((int(n) for n in names if n.isdigit()), default=0)

    def holder(self, epoch: int) -> dict[str, Any]:
        try:
            return json.loads((self.directory / str(epoch)).read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def advance(self, holder: str, expected: int | None = None) -> int:
        """Take the next epoch. With ``expected``, only if the current one is still it (a
        standby that saw epoch 3 expire must not jump over a takeover that already won)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        current = self.current()
        if expected is not None and current != expected:
            raise FencedError(
                f"epoch moved from {expected} to {current} (held by "
                f"{self.holder(current).get('holder', '?')}): someone else took over"
            )
        new = current + 1
        try:
            fd = os.open(self.directory / str(new), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            raise FencedError(f"epoch {new} was taken by a concurrent takeover") from None
        with os.fdopen(fd, "w") as handle:
            info = {"holder": holder, "host": socket.gethostname(), "pid": os.getpid()}
            json.dump({**info, "ts_ms": int(time.time() * 1000)}, handle)
        return new

    def check(self, mine: int, what: str = "write") -> None:
        current = self.current()
        if current > mine:
            raise FencedError(
                f"{what} refused: this writer holds epoch {mine} but epoch {current} was taken "
                f"by {self.holder(current).get('holder', '?')} (a standby took over). This "
                "process is a zombie primary; stop it"
            )


@dataclass(frozen=True)
class EpochGuard:
    """The sink's write guard (io.hooks.WriteGuard) under fencing epochs."""

    store_dir: str
    epoch: int

    def check(self, what: str, batch_id: int | None = None) -> None:
        EpochStore(self.store_dir).check(self.epoch, what)


def epoch_guard(options: Mapping[str, str]) -> EpochGuard | None:
    """Sink option ``writeGuard`` hook: fencing by ``epochStore`` (a directory) and the
    writer's epoch (``epoch``, or ``epochFile``'s when there is one)."""
    opts = {k.lower(): v for k, v in options.items()}
    store = opts.get("epochstore")
    return EpochGuard(store, writer_epoch(options)) if store else None


EPOCH_GUARD_HOOK = f"{__name__}:epoch_guard"


def write_fences(
    topics: Iterable[str],
    epoch: int,
    config: Mapping[str, str] | None = None,
    settings: Settings | None = None,
) -> int:
    """A fence record into every partition of ``topics``; returns how many were written.

    Raises:
        RecordsNotAcknowledged: The broker did not acknowledge every fence within the sink's
            flush timeout (``settings``, the environment's if None).
    """
    from confluent_kafka import Producer

    config = dict(config) if config is not None else client_config()
    admin = TopicAdmin(config)
    producer = Producer({**config, "enable.idempotence": "true"})
    written = 0
    for topic in topics:
        for part in admin.partitions(topic):
            producer.produce(topic, b"", None, part, headers=[(FENCE_HEADER, str(epoch).encode())])
            written += 1
    remaining = producer.flush((settings or get_settings()).sink_flush_timeout_s)
    if remaining:
        raise RecordsNotAcknowledged(
            f"{remaining} fence records not acknowledged; check the broker is up"
        )
    return written
