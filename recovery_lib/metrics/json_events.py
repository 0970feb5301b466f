"""A StreamingQueryListener whose progress events cross from the JVM as one JSON string.

PySpark's bridge rebuilds a progress event from the JVM object field by field: one Py4J round
trip per field, per source, per state operator and per custom metric (~100 for q3's join),
and an observed metric looks a class up by name through every jar on the class path. That
runs for every listener and every micro-batch on the driver's listener thread, beside the
batches. The JVM's event writes itself as JSON (what Spark Connect sends its clients), and
PySpark parses that JSON into the same event classes: one round trip.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from recovery_lib.errors import SparkUnavailable

__all__ = ["JsonEventsListener"]


class JsonEventsListener(StreamingQueryListener):
    """Base class of our listeners: the same callbacks and event classes as PySpark's, with
    progress events read from their JSON. Started, idle and terminated events come once per
    query or while it idles: they keep PySpark's own conversion."""

    @property
    def _jlistener(self) -> Any:  # noqa: ANN401 - a Py4J JavaObject
        # PySpark's StreamingQueryManager.addListener and removeListener take this wrapper.
        if getattr(self, "_json_jlistener", None) is None:
            from pyspark import SparkContext

            jvm = SparkContext._jvm
            if jvm is None:
                raise SparkUnavailable("no SparkContext: start a session before adding a listener")
            self._json_jlistener = jvm.PythonStreamingQueryListenerWrapper(_JsonBridge(self))
        return self._json_jlistener


class _JsonBridge:
    """The Py4J proxy the JVM calls, one per listener (PySpark's JStreamingQueryListener
    with progress events read from JSON)."""

    def __init__(self, listener: StreamingQueryListener) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: ANN401, N802 - Spark's names
        self.listener.onQueryStarted(QueryStartedEvent.fromJObject(jevent))

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: ANN401, N802
        self.listener.onQueryProgress(QueryProgressEvent.fromJson(json.loads(jevent.json())))

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: ANN401, N802
        self.listener.onQueryIdle(QueryIdleEvent.fromJObject(jevent))

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: ANN401, N802
        self.listener.onQueryTerminated(QueryTerminatedEvent.fromJObject(jevent))

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]
