"""Errors of the Kafka layer; each message says what to do about it."""


class KafkaLayerError(RuntimeError):
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
