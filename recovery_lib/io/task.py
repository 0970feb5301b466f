"""What an executor-side function knows about the Spark task it runs in."""

from __future__ import annotations

from typing import Any


def task_info() -> dict[str, Any]:
    """Batch id, partition, attempt (number and id) of the current task (None outside one)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return {
            "batch_id": None,
            "partition": None,
            "attempt": None,
            "attempt_id": None,
            "stage": None,
            "query_id": None,
        }
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return {
        "batch_id": int(batch) if batch is not None else None,
        "partition": ctx.partitionId(),
        "attempt": ctx.attemptNumber(),
        "attempt_id": ctx.taskAttemptId(),  # unique within the SparkContext
        "stage": ctx.stageId(),
        "query_id": ctx.getLocalProperty("sql.streaming.queryId"),
    }
