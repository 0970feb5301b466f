"""Errors of the CEC mechanism, each saying what to fix."""

from __future__ import annotations

from recovery_lib.errors import ProtocolError


class CECError(ProtocolError):
    """Base of CEC's errors."""


class LogTooShort(CECError):
    """The backward scan reached the start of the output log without a footprint of every open
    window: the log was truncated below the eventual checkpoint."""


class InconsistentReplay(CECError):
    """Replayed input contradicts the log (a window would close where the log says it was
    open)."""


class InputTruncated(CECError):
    """The input topic no longer holds the offsets the replay from T needs."""


class KeySpansPartitions(CECError):
    """A count window's key arrives on several input partitions (its order would depend on
    batch cuts)."""
