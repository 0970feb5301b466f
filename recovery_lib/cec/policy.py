"""When an aggregate writes G_check footprints (paper 003, section III.A).

Targets: the extent q (log records recovery would scan back to the oldest footprint) and u
(input tuples it would replay from there). When q > Q or u > U the oldest windows are
checkpointed, oldest first, but only inside a checkpoint interval of CI ms that starts every
CP ms, so checkpointing never takes more than CI/CP of the operator's time. The knobs change
recovery cost only: a window without a recent G_check rolls back to an older footprint."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from recovery_lib.errors import ConfigurationError


@dataclass(frozen=True)
class CheckpointPolicy:
    """``extent_target`` is Q, ``replay_target`` is U (``math.inf``: never; G_open only),
    ``interval_ms`` is CI, ``period_ms`` is CP. ``check_every`` tuples pass between
    two looks at q and u. ``footprints=False`` turns CEC off altogether
    (no G_open either: the no-checkpointing baseline, which cannot recover)."""

    extent_target: float = math.inf
    replay_target: float = math.inf
    interval_ms: float = 10.0
    period_ms: float = 100.0
    footprints: bool = True
    check_every: int = 64  # input tuples between two looks at the targets

    def __post_init__(self) -> None:
        if self.extent_target < 1 or self.replay_target < 1:
            raise ConfigurationError(
                "Q and U (RECOVERY_CEC_EXTENT_TARGET, RECOVERY_CEC_REPLAY_TARGET) must be at "
                "least 1 (math.inf: no G_check)"
            )
        if not 0 < self.interval_ms <= self.period_ms:
            raise ConfigurationError(
                f"CI {self.interval_ms} ms, CP {self.period_ms} ms: need 0 < CI <= CP "
                "(RECOVERY_CEC_INTERVAL_MS, RECOVERY_CEC_PERIOD_MS)"
            )

    @property
    def checks(self) -> bool:
        return self.footprints and (
            math.isfinite(self.extent_target) or math.isfinite(self.replay_target)
        )

    def wants_check(self, extent: int, replay: int) -> bool:
        return extent > self.extent_target or replay > self.replay_target


@dataclass
class CheckpointSlices:
    """The CI-within-CP time budget, on an injectable clock (ms)."""

    policy: CheckpointPolicy
    clock: Callable[[], float] = field(default=lambda: time.monotonic() * 1000.0)
    _period_start: float = -math.inf

    def open_slice(self) -> float | None:
        """The end (clock ms) of a checkpoint interval starting now, or None while the current
        period's interval is used up."""
        now = self.clock()
        if now - self._period_start < self.policy.period_ms:
            return None
        self._period_start = now
        return now + self.policy.interval_ms

    def within(self, deadline: float) -> bool:
        return self.clock() < deadline
