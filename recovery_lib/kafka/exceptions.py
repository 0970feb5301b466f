"""Errors of the Kafka layer; each message says what to do about it."""

from recovery_lib.errors import RecoveryError


class KafkaLayerError(RecoveryError, RuntimeError):
    """Base class of errors raised by recovery_lib.kafka."""


class BrokerBinaryNotFound(KafkaLayerError):
    pass


class BrokerStartError(KafkaLayerError):
    pass


class BrokerAlreadyRunning(KafkaLayerError):
    pass


class BrokerOwnedByRun(KafkaLayerError):
    pass


class BrokerUnreachable(KafkaLayerError):
    pass


class NoBrokerConfigured(KafkaLayerError):
    pass


class TopicMissing(KafkaLayerError):
    pass


class RecordsNotAcknowledged(KafkaLayerError):
    """The broker did not acknowledge every produced record in time, or refused some."""


class RecordsUnreadable(KafkaLayerError):
    """Offsets the log should hold could not be read in time (broker down, or records gone)."""


class BrokerAuthenticationFailed(KafkaLayerError):
    """The broker refused this client's SASL login (user, password or mechanism); retrying
    cannot help, so it is raised at once instead of after a timeout."""


class BrokerTlsFailed(KafkaLayerError):
    """The TLS handshake with the broker failed (its certificate not trusted by the CA file,
    or a TLS client on a plain port); raised at once, like a refused login."""
