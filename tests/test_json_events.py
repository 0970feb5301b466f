"""Our listeners read a progress event from its JSON (metrics/json_events.py): the event they
get is the one PySpark's field-by-field bridge builds."""

from __future__ import annotations

import json
import threading
import time

import pytest

from recovery_lib.metrics.json_events import JsonEventsListener

pytestmark = pytest.mark.spark


class _Progress:
    def __init__(self) -> None:
        self.events: dict[int, object] = {}
        self.changed = threading.Condition()

    def onQueryStarted(self, event) -> None:  # noqa: ANN001, N802
        pass

    def onQueryProgress(self, event) -> None:  # noqa: ANN001, N802
        with self.changed:
            self.events[event.progress.batchId] = event.progress
            self.changed.notify_all()

    def onQueryIdle(self, event) -> None:  # noqa: ANN001, N802
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: ANN001, N802
        pass


def _listeners():
    from pyspark.sql.streaming import StreamingQueryListener

    class Pyspark(_Progress, StreamingQueryListener):
        pass

    class Json(_Progress, JsonEventsListener):
        pass

    return Pyspark(), Json()


FIELDS = ("id", "runId", "name", "batchId", "numInputRows", "durationMs", "timestamp")


def test_a_stateful_querys_progress_is_the_same_event_as_pysparks(spark, tmp_path) -> None:
    from pyspark.sql import functions as F

    pyspark_side, json_side = _listeners()
    spark.streams.addListener(pyspark_side)
    spark.streams.addListener(json_side)
    rows = spark.readStream.format("rate").option("rowsPerSecond", 50).load()
    counts = (
        rows.observe("seen", F.count(F.lit(1)).alias("rows"))
        .groupBy((F.col("value") % 7).alias("k"))
        .count()
    )
    query = (
        counts.writeStream.format("noop")
        .outputMode("update")
        .queryName("json_events_test")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 60
        with json_side.changed:
            json_side.changed.wait_for(
                lambda: (
                    any(p.numInputRows for p in json_side.events.values())
                    or time.monotonic() > deadline
                ),
                timeout=60,
            )
    finally:
        query.stop()
        spark.streams.removeListener(pyspark_side)
        spark.streams.removeListener(json_side)
    time.sleep(1)  # the stopped query's last events reach both listeners
    both = sorted(set(pyspark_side.events) & set(json_side.events))
    assert any(json_side.events[b].numInputRows for b in both), "no batch with rows arrived"
    for batch in both:
        ours, theirs = json_side.events[batch], pyspark_side.events[batch]
        for field in FIELDS:
            assert getattr(ours, field) == getattr(theirs, field), field
        assert len(ours.stateOperators) == len(theirs.stateOperators) == 1
        mine, pys = ours.stateOperators[0], theirs.stateOperators[0]
        assert (mine.numRowsTotal, mine.commitTimeMs) == (pys.numRowsTotal, pys.commitTimeMs)
        assert mine.customMetrics == pys.customMetrics
        # The offsets are JSON either way, spaced differently.
        ends = [[json.loads(s.endOffset) for s in p.sources] for p in (ours, theirs)]
        assert ends[0] == ends[1]
        assert dict(ours.observedMetrics)["seen"][0] == dict(theirs.observedMetrics)["seen"][0]
