"""The reader side of fenced topics: which records a consumer must drop.

A writer that takes over a topic (a standby, a new leader) first writes a *fence record*
(header ``rl.fence`` = its epoch, no id) into every partition. Every later record of an older
epoch in that partition comes from a zombie and is dropped, as Kafka brokers do for fenced
producers. Writers and epochs live in recovery_lib/ha/fencing.py; this is what readers need.
"""

from __future__ import annotations

from collections.abc import Mapping

from recovery_lib.kafka.headers import FENCE_HEADER

__all__ = ["FENCE_HEADER", "FenceFilter"]


class FenceFilter:
    """Reader side: drop records written in an older epoch after a fence record."""

    def __init__(self) -> None:
        self.fences: dict[tuple[str, int], int] = {}
        self.dropped = 0

    def accept(
        self, topic: str, partition: int, epoch: int | None, headers: Mapping[str, bytes]
    ) -> bool:
        """False for fence records themselves and for fenced records."""
        fence = headers.get(FENCE_HEADER)
        key = (topic, partition)
        if fence is not None:
            self.fences[key] = max(self.fences.get(key, 0), int(fence))
            return False
        if epoch is not None and epoch < self.fences.get(key, 0):
            self.dropped += 1
            return False
        return True
