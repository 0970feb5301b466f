"""The root of the errors the library raises for what a user can cause and fix.

``except RecoveryError`` tells "the recovery library refused this" from everything else; each
package's own root derives from it (io: ``IOLayerError``, kafka: ``KafkaLayerError``, cec:
``CECError``, causal: ``DeterminantError``, ...), and each message says what to do. The
subclasses keep the built-in base they had (``ValueError`` for what was given wrong,
``RuntimeError`` for what went wrong while running), so existing handlers still catch them.
The CLI turns them into one line and an exit code (cli/main.py ``run``).
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "JobError",
    "JobFailed",
    "NotStarted",
    "OracleError",
    "ProtocolError",
    "RecoveryError",
    "ReportError",
    "SparkUnavailable",
]


class RecoveryError(Exception):
    """Something the library refused or could not do; the message says what to change."""


class ConfigurationError(RecoveryError, ValueError):
    """Settings, a launch or options that cannot work together (fix the configuration)."""


class JobError(RecoveryError, ValueError):
    """A job (its spec, contract or build) the runtime cannot run as it is."""


class OracleError(RecoveryError, ValueError):
    """What the oracle was given to judge with (a schema, a contract, a span) is unusable."""


class ProtocolError(RecoveryError, RuntimeError):
    """A recovery mechanism met a state it cannot go on from (a torn log, a fenced writer)."""


class JobFailed(RecoveryError, RuntimeError):
    """A job, stage or helper process that was started died, never got ready or spent its
    restart budget; its log says why."""


class NotStarted(RecoveryError, RuntimeError):
    """A job or pipeline asked about has not started here yet (no status, no committed batch)."""


class SparkUnavailable(RecoveryError, RuntimeError):
    """Spark cannot start here: no Java, or its JVM failed; install a JDK 17 or read its output."""


class ReportError(RecoveryError, ValueError):
    """A report lacks a field that is read from it (an older format); re-run what writes it."""
