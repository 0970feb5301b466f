"""Recovery modes: one object per way a failed job comes back, behind one interface
(base.RecoveryMode), found by name in the registry (registry.py)."""

from recovery_lib.modes.base import (
    COMMAND_LINE,
    GcNeeds,
    JobPlace,
    ModeOptions,
    ModeRefused,
    ModeRequest,
    RecoveryMode,
    job_entry,
)
from recovery_lib.modes.registry import (
    MODES,
    REFERENCE_MODE,
    UnknownMode,
    get_mode,
    mode_names,
    outage_ladder,
    register,
)

__all__ = [
    "COMMAND_LINE",
    "MODES",
    "REFERENCE_MODE",
    "GcNeeds",
    "JobPlace",
    "ModeOptions",
    "ModeRefused",
    "ModeRequest",
    "RecoveryMode",
    "UnknownMode",
    "get_mode",
    "job_entry",
    "mode_names",
    "outage_ladder",
    "register",
]
