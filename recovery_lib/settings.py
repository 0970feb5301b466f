"""The one home of configuration: typed settings, each overridable by an environment variable.

``KAFKA_BOOTSTRAP`` points everything at an external Kafka cluster instead of the embedded
broker. A secured cluster (SASL, TLS) is named by the typed ``kafka_security_protocol``,
``kafka_sasl_mechanism``, ``kafka_sasl_username``, ``kafka_sasl_password`` (a secret: never
shown) and ``kafka_ssl_ca_location`` (``RECOVERY_KAFKA_SECURITY_PROTOCOL=SASL_SSL`` ...); any
other librdkafka property passes through ``KAFKA_CLIENT_CONFIG`` (a JSON object) or
``KAFKA_CLIENT_<PROPERTY>`` variables (``KAFKA_CLIENT_SSL_KEY_LOCATION`` ->
``ssl.key.location``). ``kafka_client_config()`` merges them for every producer, consumer and
admin client (through kafka/clients.py ``client_config``); a child process gets them through
its inherited environment.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from recovery_lib.errors import ConfigurationError

CLIENT_ENV_PREFIX = "KAFKA_CLIENT_"
CLIENT_CONFIG_ENV = "KAFKA_CLIENT_CONFIG"
# The typed client security settings: field -> (librdkafka property, environment variable).
SECURITY_SETTINGS = {
    "kafka_security_protocol": ("security.protocol", "RECOVERY_KAFKA_SECURITY_PROTOCOL"),
    "kafka_sasl_mechanism": ("sasl.mechanism", "RECOVERY_KAFKA_SASL_MECHANISM"),
    "kafka_sasl_username": ("sasl.username", "RECOVERY_KAFKA_SASL_USERNAME"),
    "kafka_sasl_password": ("sasl.password", "RECOVERY_KAFKA_SASL_PASSWORD"),
    "kafka_ssl_ca_location": ("ssl.ca.location", "RECOVERY_KAFKA_SSL_CA_LOCATION"),
}
# The settings that say which broker clients talk to, and how (chaos/private.py swaps them).
BROKER_SETTINGS = ("kafka_bootstrap", *SECURITY_SETTINGS, "kafka_client_config_json")
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
_STATE_PKG = "org.apache.spark.sql.execution.streaming.state"
STATE_STORES = {
    "rocksdb": {
        "spark.sql.streaming.stateStore.providerClass": f"{_STATE_PKG}.RocksDBStateStoreProvider",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    },
    "hdfs": {
        "spark.sql.streaming.stateStore.providerClass": f"{_STATE_PKG}.HDFSBackedStateStoreProvider"
    },
}


class Settings(BaseSettings):
    # Errors name the setting, never the input: it may hold a password.
    model_config = SettingsConfigDict(
        env_prefix="RECOVERY_", extra="ignore", hide_input_in_errors=True
    )

    home: Path = Field(
        default=Path(".recovery"),
        description="Working directory for broker state, checkpoints, tables and reports.",
    )
    benchmark_reports: Path = Field(
        default=Path("docs/benchmarks"),
        description="Benchmark reports (JSON) that `recovery reproduce` and the dashboard's "
        "Papers tab read.",
    )
    kafka_bootstrap: str | None = Field(
        default=None,
        validation_alias="KAFKA_BOOTSTRAP",
        description="External Kafka bootstrap servers; unset means the broker the project "
        "starts (broker_kind).",
    )
    kafka_client_config_json: SecretStr | None = Field(
        default=None,
        validation_alias=CLIENT_CONFIG_ENV,
        description="Further librdkafka properties as a JSON object (a secret: it may hold "
        "passwords).",
    )
    # A secured cluster; every client gets them (kafka_client_config, kafka/clients.py).
    kafka_security_protocol: SecurityProtocol | None = Field(
        default=None,
        description="librdkafka's security.protocol (unset: librdkafka's PLAINTEXT).",
    )
    kafka_sasl_mechanism: SaslMechanism | None = Field(
        default=None, description="sasl.mechanism of a SASL_* protocol's user and password."
    )
    kafka_sasl_username: str | None = Field(default=None, description="sasl.username.")
    kafka_sasl_password: SecretStr | None = Field(
        default=None, description="sasl.password; never logged, shown or written to reports."
    )
    kafka_ssl_ca_location: Path | None = Field(
        default=None,
        description="ssl.ca.location: the PEM file of the CA that signed the brokers' "
        "certificates (unset: the system's CAs).",
    )

    # Embedded broker.
    broker_host: str = "127.0.0.1"
    broker_start_timeout_s: float = 15.0
    broker_kind: Literal["kafka", "tansu"] = Field(
        default="kafka",
        description="The broker the project starts: kafka (Apache Kafka from its Maven Central "
        "jars, durable, transactions) or tansu (in memory, lighter; no aborted-record filtering, "
        "no replicas).",
    )
    # Apache Kafka (kafka/apache.py): jars fetched by `make install`, a JVM per node.
    kafka_libs_dir: Path | None = Field(
        default=None,
        description="Apache Kafka's jars; unset: <virtualenv>/share/kafka/libs (make install).",
    )
    kafka_heap_mb: int = Field(default=512, gt=63, description="Max heap of each Kafka node.")
    # Spark's own Kafka connector (format("kafka")), on every session's spark.jars.
    spark_kafka_jars_dir: Path | None = Field(
        default=None,
        description="Spark's Kafka connector jars; unset: <virtualenv>/share/spark-kafka "
        "(make install).",
    )
    kafka_start_timeout_s: float = Field(default=60.0, gt=0)

    # Clients.
    kafka_request_timeout_s: float = 10.0
    topic_wait_timeout_s: float = 10.0
    source_poll_timeout_s: float = 30.0
    source_arrow_batch_rows: int = 20_000
    source_end_probe_cap_s: float = 2.0
    # Without a record for this long under the short fetch wait (kafka/clients.py
    # RANGE_FETCHES), readers switch to the broker's usual one. A range's records exist when it
    # is read (its end was planned), so a fast fetch that brings nothing in half a second is
    # the broker's gathering, not a lull; the soak's job hit it on the first batch after a
    # restart (the backlog) and paid 2 s per task wave when this was 2.0.
    kafka_slow_fetch_after_s: float = Field(default=0.5, gt=0)
    # Readers of whole sink topics (the oracle) take blocks of records as columns from
    # librdkafka (kafka/block_consumer.py) instead of a confluent-kafka Message per record.
    kafka_block_reader: bool = True
    # On an inconsistent verdict an experiment saves its input and output topics as Parquet
    # (verify/evidence.py) under its work directory: a faulty broker's topics go with it.
    keep_evidence: bool = True
    sink_flush_timeout_s: float = 60.0
    # A broker stall or network fault shorter than this is ridden out (kafka/outage.py) by the
    # source and the readers of its ranges; a longer one fails the job (its supervisor
    # restarts it). The sinks wait sink_flush_timeout_s for their writes.
    kafka_outage_budget_s: float = Field(default=60.0, gt=0)
    # After the same micro-batch failed this many times in a row, the job looks for a poison
    # record in it and parks it (job/poison.py) instead of failing it again.
    poison_attempts: int = Field(default=3, ge=1)

    # Spark.
    spark_master: str = "local[2]"
    spark_shuffle_partitions: int = 4
    spark_driver_memory: str = "1g"
    # Start driver JVMs with the class-data archive of `recovery spark archive` (made by
    # `make install`; spark/class_archive.py): each start, so each restart, is seconds shorter.
    spark_class_archive: bool = True
    # How often Spark's state-store maintenance uploads a RocksDB snapshot (and cleans old
    # versions). A restart loads the newest snapshot and replays the changelog files after it;
    # at Spark's 60 s a job killed within a minute of a large batch replays all of it (10^7
    # keys: a 57 s first batch after the restart, docs/standby.md).
    spark_state_maintenance_interval_s: float = Field(default=10.0, gt=0)
    # Keep a spare process of each restarting job (native, causal, cec) started and built,
    # waiting: a restart starts the query in it from the checkpoint, without the process
    # start, JVM and build (runtime/spare.py). Costs a second idle driver per job.
    supervisor_spare: bool = False
    # A spare rehearses the job's own query (one batch, its sink held) on a copy of the job's
    # checkpoint this often while it waits (job/spare_warmth.py): the plan's code generation,
    # the source's and the sink's Python daemons and workers are then warm at its go. Under
    # Spark's 60 s idle-worker timeout; 0: no rehearsal.
    supervisor_spare_rehearse_every_s: float = Field(default=40.0, ge=0)
    # Python workers fork from a daemon that imported the library and PySpark's worker
    # modules once (spark/python_daemon.py): a restarted job's fresh workers skip them.
    spark_python_preimport: bool = True
    # Spark's Python processes import PySpark from site-packages' bytecode, not from its zip
    # (spark/worker_bytecode.py; ~0.5 s per worker daemon and source runner). The hook that
    # does it reads RECOVERY_SPARK_WORKER_BYTECODE from the process's environment itself.
    spark_worker_bytecode: bool = True
    # Write Spark's event log (uncompressed JSON lines, one file per application) here: what
    # metrics/event_log.py takes a restart's first micro-batch apart with. Off by default.
    spark_event_log_dir: Path | None = None
    # Spark's checkpoint files (offset and commit logs, state-store files) through Hadoop's
    # FileSystem API ("filesystem") or its FileContext API ("filecontext", Spark's default).
    # Without Hadoop's native library FileContext starts a `readlink` or `chmod` process per
    # file it renames or creates: ~60 per micro-batch of a 4-partition stateful query, a third
    # of its driver's CPU (docs/replication.md). A rename is atomic either way on a local or
    # HDFS disk; pick "filecontext" for a store where only FileContext's is.
    spark_checkpoint_file_api: Literal["filesystem", "filecontext"] = "filesystem"
    # The JVMs' JIT compiler: "quick" compiles with C1 only, "tiered" adds C2 (the JVM's
    # default). Every micro-batch runs Spark's planner, a large body of code that runs a few
    # times per batch, so C2 keeps compiling for minutes: a fifth of a small stateful query's
    # driver CPU, measured (docs/replication.md). C2's faster code pays off on large batches.
    spark_jit: Literal["quick", "tiered"] = "quick"

    # Causal logging.
    causal_keep_batches: int = Field(
        default=2, description="Committed batches whose determinants stay in the log."
    )
    causal_truncate_every: int = Field(default=5, description="Truncate every N batches.")
    causal_on_missing: str = Field(
        default="fail",
        description="A replayed batch's determinants are missing or corrupt: fail | recompute.",
    )
    jobs_file: Path | None = Field(
        default=None, description="YAML of the supervised jobs (default: dags/streaming_jobs.yaml)."
    )
    pipelines_file: Path | None = Field(
        default=None,
        description="YAML of the pipelines of stages (default: dags/pipelines.yaml).",
    )
    pipeline_placement: Literal["process", "shared"] = Field(
        default="process",
        description="Where a pipeline's stages run when its spec does not say: process (one "
        "Spark application per stage) or shared (every stage a streaming query of one Spark "
        "application, pipeline/host.py; a stage's failure is its query's).",
    )
    airflow_spark_conn_id: str = Field(
        default="spark_default", description="Airflow connection the SparkSubmitOperator uses."
    )
    job_status_every_s: float = Field(
        default=5.0, description="How often the job daemon records its status."
    )
    daemon_metrics_port: int = Field(
        default=0,
        ge=0,
        description="Port of a daemon's /metrics on 127.0.0.1 (0: a free one, named by its "
        "status; one daemon per port when set).",
    )
    daemon_output_window_s: float = Field(
        default=600.0,
        gt=0,
        description="Seconds of a supervised job's output the daemon keeps to measure the "
        "output gap and recovery time of the last failure for /metrics.",
    )
    expectations_dir: Path | None = Field(
        default=None, description="Great Expectations suites (default: the repo's expectations/)."
    )
    causal_storage: str = Field(
        default="kafka",
        description="Where determinants go: kafka (a determinant topic) | output (piggybacked "
        "on the output records; the causal operator and the sink must share a stage).",
    )

    state_store: str = Field(
        default="hdfs",
        description="Spark state store: hdfs (Spark's default: in-memory maps, a delta file per "
        "batch) | rocksdb (with changelog checkpointing: a small changelog file per batch; "
        "standby jobs use it, see docs/standby.md). On 2 cores RocksDB lowered Q3's MST from "
        "60,750 to 40,500 ev/s (a RocksDB instance per store and partition).",
    )

    # Standby jobs (recovery_lib/ha/standby).
    standby_lease_timeout_s: float = Field(
        default=3.0,
        description="The primary's heartbeat lease: older than this, the standby takes over.",
    )
    standby_heartbeat_interval_s: float = Field(
        default=0.5, description="How often a driver renews its lease (heartbeat file)."
    )
    standby_ship_interval_s: float = Field(
        default=2.0, description="How often the standby's shipper copies new checkpoint files."
    )
    standby_keep_copies: int = Field(
        default=3, description="Complete shipped copies kept (the newest one is used)."
    )
    standby_replace_after_s: float = Field(
        default=60.0,
        description="After a takeover, start the new primary's standby this long after it is "
        "ready (and after two batches): a JVM starting while the new primary works off its "
        "backlog takes cores from it on a small machine.",
    )
    standby_rehearse: bool = Field(
        default=True,
        description="An idle standby runs its query once, one batch, on a scratch copy: the "
        "first batch of a fresh query (code generation, worker imports, Kafka clients) is "
        "what a takeover otherwise waits for. Not for causally logged jobs.",
    )
    standby_rehearse_sink: bool = Field(
        default=True,
        description="The rehearsal's batch goes through the job's own sink, held (computed, "
        "nothing written), so the sink's first batch write (its Python planner workers, the "
        "writer's imports) is paid before the takeover; false: into Spark's noop sink.",
    )
    standby_hot: bool = Field(
        default=False,
        description="A hot standby runs the job's query all along on the primary's committed "
        "batches (their exact boundaries, its output held), so its state is loaded when it "
        "takes over; twice the compute, like active replication. Needs the primary's "
        "checkpoint readable (shared storage), a job that needs no causal log, and sink mode "
        "dedup or release; otherwise the standby is warm (its query starts at the takeover).",
    )
    standby_warm_every_s: float = Field(
        default=20.0,
        description="An idle standby runs a tiny job this often: Spark stops Python workers "
        "idle for 60 s, and a cold worker costs seconds at takeover.",
    )

    # Active replication (recovery_lib/ha/replication).
    replication_lease_timeout_s: float = Field(
        default=3.0,
        description="KaZoo: the leader's heartbeat lease; older than this, the follower takes "
        "the next epoch and leads.",
    )
    replication_publish_timeout_s: float = Field(
        default=60.0,
        description="KaZoo: how long a replica's sink task waits for the leader to publish its "
        "batch before it refuses to write.",
    )
    replication_heartbeat_period_s: float = Field(
        default=1.0,
        description="LiveRobin: how often the heartbeat generator writes a heartbeat into every "
        "input partition; a batch ends at a heartbeat, so this is the batch interval.",
    )
    replication_heartbeats_ahead: int = Field(
        default=2,
        ge=1,
        description="LiveRobin: the generator writes the next heartbeat only while the slowest "
        "replica in step has fewer indexed heartbeats than this still to run: replicas slower "
        "than the period then run larger batches instead of falling further behind.",
    )
    replication_replace_after_s: float = Field(
        default=30.0,
        description="Start the replacement of a dead replica this long after its death: on one "
        "host a starting JVM takes cores from the surviving replica, whose latency is what a "
        "replica's death must not move. 0 replaces at once (replicas on separate hosts).",
    )
    replication_join_lag_batches: int = Field(
        default=2,
        ge=1,
        description="A replacement has joined once it committed up to this many batches behind "
        "the survivor (the survivor goes on cutting batches while it catches up).",
    )
    replication_join_timeout_s: float = Field(
        default=300.0,
        description="A replacement that has not caught up with the survivor this long after "
        "it started is reported as stuck (the stream DAG's replica check fails).",
    )

    # Continuous eventual checkpointing (recovery_lib/cec).
    cec_extent_target: float = Field(
        default=100_000,
        description="Q: G_check the oldest windows when recovery would read more log records "
        "than this back to the oldest footprint (inf: G_open only).",
    )
    cec_replay_target: float = Field(
        default=1_000_000,
        description="U: G_check the oldest windows when recovery would replay more input "
        "tuples than this (inf: never; also bounds how much input GC must keep).",
    )
    cec_footprints: bool = Field(
        default=True,
        description="False: no G_open/G_check at all (the no-checkpointing baseline of the "
        "benchmarks; such a job cannot recover its windows).",
    )
    cec_interval_ms: float = Field(
        default=10.0, description="CI: time given to G_check writing in each period."
    )
    cec_period_ms: float = Field(
        default=100.0, description="CP: a checkpoint interval starts this often."
    )
    cec_scan_chunk: int = Field(
        default=5_000,
        description="Records read per step of the backward scan of an output partition.",
    )

    # The operations stack on one machine (`recovery ops up`, recovery_lib/ops/stack.py).
    ops_airflow_port: int = Field(
        default=8080,
        description="Airflow's api-server port on 127.0.0.1 (0: a free one; taken: a free one).",
    )
    ops_dashboard_port: int = Field(
        default=8501,
        description="The Streamlit dashboard's port on 127.0.0.1 (0 or taken: a free one).",
    )
    ops_start_timeout_s: float = Field(
        default=300.0,
        description="How long `recovery ops up` waits for Airflow's API and the dashboard.",
    )
    ops_stop_timeout_s: float = Field(
        default=30.0, description="`recovery ops down`: SIGTERM, this long, then SIGKILL."
    )
    ops_gc_every_min: float = Field(
        default=60.0, gt=0, description="The checkpoint_gc DAG's schedule (minutes)."
    )
    ops_gc_delete_input_records: bool = Field(
        default=False,
        description="The checkpoint_gc DAG's default: also delete input records no recovery "
        "can re-read (off by default: other consumers may share the input topics).",
    )
    metrics_keep_hours: float = Field(
        default=168.0,
        gt=0,
        description="The checkpoint_gc DAG deletes the metrics store's per-batch, per-second "
        "and status rows older than this (runs, events, verdicts and GC passes are kept).",
    )
    ops_consistency_every_min: float = Field(
        default=1440.0, gt=0, description="The consistency_report DAG's schedule (minutes)."
    )
    # The soak (`recovery soak`, recovery_lib/ops/soak.py) and its `chaos` DAG.
    chaos_every_min: float = Field(
        default=3.0, gt=0, description="The chaos DAG's schedule (minutes): one fault a run."
    )
    chaos_fault_s: float = Field(
        default=10.0, gt=0, description="How long a chaos fault lasts (blackhole, pause, ...)."
    )

    @field_validator("state_store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        if value not in STATE_STORES:
            raise ValueError(f"state_store must be one of {sorted(STATE_STORES)}, got {value!r}")
        return value

    @field_validator("home")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator(*SECURITY_SETTINGS, "kafka_client_config_json", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # An empty variable unsets a client setting (a child told to talk to a plain broker).
        return None if value == "" else value

    @field_validator("kafka_security_protocol", "kafka_sasl_mechanism", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("kafka_ssl_ca_location")
    @classmethod
    def _ca_file_exists(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        value = value.expanduser().resolve()
        if not value.is_file():
            raise ValueError(
                f"RECOVERY_KAFKA_SSL_CA_LOCATION names {value}, which is not a file: point it "
                "at the PEM file of the CA that signed the brokers' certificates"
            )
        return value

    @model_validator(mode="after")
    def _sasl_complete(self) -> Settings:
        """A SASL login needs its mechanism, user and password together, on a SASL_* protocol;
        a half-set login would reach the broker as something else and fail later, unnamed."""
        login = {
            "RECOVERY_KAFKA_SASL_MECHANISM": self.kafka_sasl_mechanism,
            "RECOVERY_KAFKA_SASL_USERNAME": self.kafka_sasl_username,
            "RECOVERY_KAFKA_SASL_PASSWORD": self.kafka_sasl_password,
        }
        given = [name for name, value in login.items() if value is not None]
        if not given:
            return self
        missing = [name for name, value in login.items() if value is None]
        if missing:
            raise ValueError(
                f"{', '.join(given)} set without {', '.join(missing)}: a SASL login needs "
                "mechanism, user name and password"
            )
        protocol = self.kafka_security_protocol or self.kafka_pass_through_config().get(
            "security.protocol"
        )
        if protocol is None or not protocol.upper().startswith("SASL_"):
            raise ValueError(
                f"a SASL user is set but RECOVERY_KAFKA_SECURITY_PROTOCOL is {protocol}: set it "
                "to SASL_SSL (or SASL_PLAINTEXT for a cluster without TLS)"
            )
        return self

    def kafka_security_config(self) -> dict[str, str]:
        """The librdkafka properties of the typed security settings (the password in clear:
        for a client's config only; kafka/clients.py ``redacted`` before showing one)."""
        config: dict[str, str] = {}
        for name, (prop, _env) in SECURITY_SETTINGS.items():
            value = getattr(self, name)
            if value is not None:
                config[prop] = (
                    value.get_secret_value() if isinstance(value, SecretStr) else str(value)
                )
        return config

    def with_broker_of(self, other: Settings) -> Settings:
        """These settings with ``other``'s broker and client security (BROKER_SETTINGS)."""
        return self.model_copy(update={name: getattr(other, name) for name in BROKER_SETTINGS})

    def kafka_pass_through_config(self) -> dict[str, str]:
        """librdkafka properties from ``KAFKA_CLIENT_CONFIG`` and ``KAFKA_CLIENT_<PROPERTY>``
        variables (an empty variable is no property)."""
        config: dict[str, str] = {}
        raw = self.kafka_client_config_json
        if raw is not None:
            try:
                loaded = json.loads(raw.get_secret_value())
            except json.JSONDecodeError as exc:
                # Not the text or the decoder's excerpt of it: it may hold a password.
                raise ConfigurationError(
                    f"{CLIENT_CONFIG_ENV} is not valid JSON (line {exc.lineno}, column "
                    f"{exc.colno}: {exc.msg}); set it to an object such as "
                    '{"security.protocol": "SASL_SSL"}'
                ) from None
            if not isinstance(loaded, dict):
                raise ConfigurationError(
                    f"{CLIENT_CONFIG_ENV} must be a JSON object of client properties, such as "
                    '{"security.protocol": "SASL_SSL"}'
                )
            config.update({str(k): str(v) for k, v in loaded.items()})
        for name, value in os.environ.items():
            if name.startswith(CLIENT_ENV_PREFIX) and name != CLIENT_CONFIG_ENV and value:
                config[name[len(CLIENT_ENV_PREFIX) :].lower().replace("_", ".")] = value
        return config

    def kafka_client_config(self) -> dict[str, str]:
        """Every client's librdkafka properties besides its bootstrap servers: the typed
        security settings and the pass-through ones. A property set differently by both is
        refused, naming it (not its values: either may be a password)."""
        typed = self.kafka_security_config()
        passed = self.kafka_pass_through_config()
        clashes = sorted(k for k in typed.keys() & passed.keys() if typed[k] != passed[k])
        if clashes:
            envs = {prop: env for prop, env in SECURITY_SETTINGS.values()}
            names = "; ".join(
                f"{k} by {envs[k]} and by {CLIENT_CONFIG_ENV} or "
                f"{CLIENT_ENV_PREFIX}{k.upper().replace('.', '_')}"
                for k in clashes
            )
            raise ConfigurationError(
                f"Kafka client property set twice, differently: {names}. Keep one"
            )
        return {**passed, **typed}

    @property
    def broker_state_file(self) -> Path:
        return self.home / "broker" / "broker.json"

    @property
    def ops_dir(self) -> Path:
        """Pid files, logs and Airflow's home of the operations stack."""
        return self.home / "ops"


def plaintext_client_environment() -> dict[str, str]:
    """Environment values under which this process's clients and its children's talk
    PLAINTEXT (to a broker the project started for itself, e.g. behind the fault proxy):
    every security setting and pass-through variable set now, emptied (``environment``)."""
    names = [env for _prop, env in SECURITY_SETTINGS.values()] + [CLIENT_CONFIG_ENV]
    names += [n for n in os.environ if n.startswith(CLIENT_ENV_PREFIX)]
    return {name: "" for name in names}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def reload_settings() -> Settings:
    get_settings.cache_clear()
    return get_settings()


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """This process's settings, and its children's environment, with ``values`` while inside;
    what was there before afterwards."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    reload_settings()
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        reload_settings()
