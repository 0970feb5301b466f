"""The recovery modes, by name: the one place a mode is registered. A new mode is one module
with a ``RecoveryMode`` subclass and one ``register`` line here (docs/architecture.md)."""

from __future__ import annotations

from recovery_lib.errors import ConfigurationError
from recovery_lib.ha.replication.strategies import LeaderBased, Leaderless
from recovery_lib.modes.base import RecoveryMode
from recovery_lib.modes.native import CausalMode, CECMode, NativeMode
from recovery_lib.modes.replication import ReplicationMode
from recovery_lib.modes.standby import StandbyMode

MODES: dict[str, RecoveryMode] = {}


def register(mode: RecoveryMode) -> RecoveryMode:
    if mode.name in MODES:
        raise ValueError(f"recovery mode {mode.name!r} is registered twice")
    MODES[mode.name] = mode
    return mode


class UnknownMode(ConfigurationError):
    """A mode name nobody registered."""


def get_mode(name: str) -> RecoveryMode:
    try:
        return MODES[name]
    except KeyError:
        raise UnknownMode(f"unknown mode {name!r}; available: {', '.join(MODES)}") from None


def mode_names(replicated: bool | None = None) -> tuple[str, ...]:
    """Every mode's name (``replicated``: only those with, or without, live replicas)."""
    return tuple(
        name for name, mode in MODES.items() if replicated is None or mode.replicated == replicated
    )


def outage_ladder() -> list[RecoveryMode]:
    """The modes that bound a job's outage, cheapest first (the advisor climbs it)."""
    rungs = [m for m in MODES.values() if m.outage_rank is not None]
    return sorted(rungs, key=lambda m: m.outage_rank or 0)


register(NativeMode())
register(CausalMode())
register(StandbyMode())
register(CECMode())
register(
    ReplicationMode(LeaderBased, "KaZoo: a leader publishes its cuts, a follower runs them", 2)
)
register(ReplicationMode(Leaderless, "LiveRobin: both replicas cut at the same heartbeats", 3))

REFERENCE_MODE: RecoveryMode = MODES["native"]  # the failure-free run
