"""Errors of the source and sinks; each message names the fix."""


class IOLayerError(RuntimeError):
    pass


class InvalidSourceOption(IOLayerError, ValueError):
    pass


class InvalidSinkOption(IOLayerError, ValueError):
    pass


class OffsetsUnavailable(IOLayerError):
    """A planned offset range could not be read back (retention, broker restart)."""


class BadRecord(IOLayerError):
    """A record does not match the declared format and the policy is to fail."""


class SinkDeliveryError(IOLayerError):
    """The broker did not acknowledge every record of a sink task."""


class WriterFenced(IOLayerError):
    """A write guard refused: a newer writer took over (this one is a zombie and must stop)."""
