"""A SparkSession for our jobs and tests: loopback only, small shuffles, sources registered."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from recovery_lib.io.source import KafkaDataSource
from recovery_lib.settings import STATE_STORES, Settings, get_settings
from recovery_lib.spark.class_archive import DUMP_JAVA_OPTION, driver_java_options
from recovery_lib.spark.python_daemon import DAEMON_MODULE

# spark_checkpoint_file_api -> Spark's CheckpointFileManager class (None: Spark's choice).
_CHECKPOINTING = "org.apache.spark.sql.execution.streaming.checkpointing"
CHECKPOINT_FILE_MANAGERS = {
    "filesystem": f"{_CHECKPOINTING}.FileSystemBasedCheckpointFileManager",
    "filecontext": None,
}
# spark_jit -> the JVM options that choose it.
JIT_JAVA_OPTIONS = {"quick": "-XX:TieredStopAtLevel=1", "tiered": ""}


def spark_env() -> None:
    """Environment Spark reads at JVM start: loopback, and workers on this interpreter."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Quiet the pandas-3 / pyarrow timezone warnings nobody can act on.
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


# Executors of a standalone cluster do not inherit the driver's environment: forward ours
# (settings, Kafka client overrides, fault-hook arming) so tasks see what the driver sees.
FORWARDED_ENV_PREFIXES = ("RECOVERY_", "KAFKA_")


def executor_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIXES)}


def build_session(
    app_name: str = "recovery",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    settings: Settings | None = None,
):  # noqa: ANN201 - pyspark types are imported lazily
    settings = settings or get_settings()
    spark_env()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit the master comes from --master; do not override it.
    if master or not os.environ.get("PYSPARK_GATEWAY_PORT"):
        builder = builder.master(master or settings.spark_master)
    builder = (
        builder.config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", settings.spark_driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(settings.spark_shuffle_partitions))
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        .config(
            "spark.sql.streaming.stateStore.maintenanceInterval",
            f"{settings.spark_state_maintenance_interval_s:g}s",
        )
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Executors of a standalone cluster run their Python workers on this interpreter.
        .config("spark.pyspark.python", sys.executable)
    )

    if settings.spark_python_preimport:
        builder = builder.config("spark.python.daemon.module", DAEMON_MODULE)
    if settings.spark_event_log_dir is not None:
        Path(settings.spark_event_log_dir).mkdir(parents=True, exist_ok=True)
        builder = (
            builder.config("spark.eventLog.enabled", "true")
            .config("spark.eventLog.dir", Path(settings.spark_event_log_dir).resolve().as_uri())
            .config("spark.eventLog.compress", "false")  # read back without a zstd codec
        )
    for key, value in STATE_STORES[settings.state_store].items():
        builder = builder.config(key, value)
    for key, value in executor_env().items():
        builder = builder.config(f"spark.executorEnv.{key}", value)
    given = [jar for jar in (conf or {}).get("spark.jars", "").split(",") if jar]
    jars = [*kafka_connector_jars(settings), *given]
    if jars:  # format("kafka") works in every session, driver and executors
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in (conf or {}).items():
        if key != "spark.jars":
            builder = builder.config(key, value)
    for key, value in jvm_and_checkpoint_conf(settings, conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register_data_sources(spark)
    return spark


def jvm_and_checkpoint_conf(settings: Settings, conf: Mapping[str, str]) -> dict[str, str]:
    """The Spark conf a session adds for its JVMs and its checkpoint files: the driver maps
    Spark's classes (class_archive.py), driver and executors run the chosen JIT, and
    checkpoints go through the chosen Hadoop file API. Options the caller gave come first.

    Args:
        settings: Whose ``spark_class_archive``, ``spark_jit`` and
            ``spark_checkpoint_file_api`` to follow.
        conf: The caller's own Spark conf for the session.

    Returns:
        The entries to set, by Spark conf key.
    """
    out: dict[str, str] = {}
    manager = CHECKPOINT_FILE_MANAGERS[settings.spark_checkpoint_file_api]
    if manager is not None and "spark.sql.streaming.checkpointFileManagerClass" not in conf:
        out["spark.sql.streaming.checkpointFileManagerClass"] = manager
    jit = JIT_JAVA_OPTIONS[settings.spark_jit]
    given = conf.get("spark.driver.extraJavaOptions", "")
    archive = None if DUMP_JAVA_OPTION in given else driver_java_options(settings)
    driver = " ".join(o for o in (given, archive, jit) if o)
    if driver:
        out["spark.driver.extraJavaOptions"] = driver
    given = conf.get("spark.executor.extraJavaOptions", "")
    executor = " ".join(o for o in (given, jit) if o)
    if executor:  # a standalone cluster's executors
        out["spark.executor.extraJavaOptions"] = executor
    return out


def kafka_connector_jars(settings: Settings | None = None) -> list[str]:
    """Spark's Kafka connector and the jars it needs beyond pyspark's, as `make install` put
    them (recovery_lib/spark/kafka_connector_pom.xml); empty when they are not installed. On
    ``spark.jars``, not the JVM's class path: the class-data archive stays valid."""
    settings = settings or get_settings()
    where = settings.spark_kafka_jars_dir or Path(sys.prefix) / "share" / "spark-kafka"
    return sorted(str(p.resolve()) for p in Path(where).glob("*.jar"))


def stop_session(spark) -> None:  # noqa: ANN001
    """Stop a session the quiet way: its streaming queries, then the state stores' maintenance
    task, then the session.

    ``spark.stop()`` alone leaves Spark's state-store maintenance task scheduled in the JVM
    (PySpark's JVM lives as long as the Python process). Its next tick, by default within 60 s,
    finds SparkEnv gone and logs ``WARN StateStore: Error running maintenance thread`` with the
    stack trace of ``IllegalStateException: SparkEnv not active, cannot do maintenance on
    StateStores`` on the console, in the middle of whatever the process does next (the demo's
    second part). ``StateStore.stop()`` cancels that task while SparkEnv still exists."""
    from py4j.protocol import Py4JError

    try:
        for query in spark.streams.active:
            query.stop()
        jvm = getattr(spark, "_jvm", None)  # None under Spark Connect: no JVM in this process
        if jvm is not None:
            try:
                jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()
            except Py4JError as exc:  # another Spark version moved it: only the quiet is lost
                logging.getLogger(__name__).warning(
                    "could not stop the state store maintenance task: %s", exc
                )
    finally:
        spark.stop()


def register_data_sources(spark) -> None:  # noqa: ANN001

    spark.dataSource.register(KafkaDataSource)


def use_in_this_thread(spark) -> None:  # noqa: ANN001
    """Make ``spark`` the active session of this Python thread's JVM thread. PySpark pins each
    Python thread to a JVM thread of its own, and Spark looks a Python data source up through
    the JVM thread's active session: in a thread of our own, ``df.write.format("rlkafka")``
    fails with DATA_SOURCE_NOT_FOUND until this is called (measured: a standby's warm loop)."""
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def archive_classes(dump_to: str) -> None:
    """A session and a small streaming aggregate in a JVM that writes its class-data archive
    to ``dump_to`` when it exits (class_archive.create runs this in a child process)."""
    import tempfile

    from pyspark.sql import functions as F

    spark = build_session(
        "class-archive", conf={"spark.driver.extraJavaOptions": f"{DUMP_JAVA_OPTION}={dump_to}"}
    )
    with tempfile.TemporaryDirectory() as checkpoint:
        rows = spark.readStream.format("rate").option("rowsPerSecond", 100).load()
        totals = rows.groupBy((F.col("value") % 10).alias("k")).agg(F.count("*"), F.max("value"))
        query = (
            totals.writeStream.outputMode("update")
            .format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    stop_session(spark)


if __name__ == "__main__" and sys.argv[1:2] == ["--archive-classes-to"]:
    archive_classes(sys.argv[2])
