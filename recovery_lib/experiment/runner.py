"""``recovery experiment run``: a faulty run and a failure-free reference run of one job on the
same input, the oracle's verdict, recovery metrics, a JSON report and a PNG timeline.

The job is any ``JobSpec`` (recovery_lib.job): a job of this repository by name, or a user's
``module:attr``. Input: the NexMark generator, or recorded records of existing topics replayed
into fresh ones (experiment/inputs.py).

Phases: input (paced, during the faulty run) -> faulty run (supervised job process, failures
injected from --fail-at) -> reference run (same job, fresh checkpoint, same topics, no failure)
-> oracle (the job's consistency contract). Every process started is stopped, also on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from rich.console import Console

from recovery_lib.chaos.disk import UnwritableTree
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import JobFailed
from recovery_lib.experiment.failures import ArmedHook, FailureStatus, InjectedFailure
from recovery_lib.experiment.inputs import (
    ExperimentInput,
    GeneratedInput,
    KeyedInput,
    RecordedInput,
)
from recovery_lib.experiment.network_faults import (
    NETWORK_KINDS,
    PROXY_KINDS,
    RESET_APIS,
    NetworkFaultOptions,
    NetworkFaults,
    needs_cluster,
    needs_network,
)
from recovery_lib.files import write_json_report
from recovery_lib.io.parked import park, read_parked
from recovery_lib.io.sinks.dedup_reader import SinkRecord, read_topic
from recovery_lib.io.sinks.lakehouse import TableKind, zombie_commits
from recovery_lib.io.sinks.modes import (
    NEEDS_BROKER_TRANSACTIONS,
    SINK_MODES,
    consumer_dedups,
    consumer_records,
    output_partitions,
    sink_flag,
    visibility_gate,
)
from recovery_lib.io.sinks.table_target import PLAIN_APPEND, TableTarget
from recovery_lib.job.spec import JobSpec, resolve_job
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.capabilities import require_hidden_aborts
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.outage import is_transient
from recovery_lib.kafka.tail_probe import TailProbe
from recovery_lib.metrics.latency import LatencyCollector, OutputFollower
from recovery_lib.metrics.openmetrics import JobMetrics, LiveMetrics
from recovery_lib.metrics.recovery import (
    each_failure,
    output_gap_s,
    p99_around,
    per_second_p50,
    recovery_time_s,
)
from recovery_lib.metrics.stats import percentile
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.metrics.table_latency import TableLatencyCollector
from recovery_lib.modes import (
    REFERENCE_MODE,
    ModeOptions,
    ModeRequest,
    RecoveryMode,
    get_mode,
)
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.runtime import cluster as cluster_mod
from recovery_lib.runtime.checkpoint import committed_offsets
from recovery_lib.runtime.faults import (
    ARM_DIR_ENV,
    MIDPAUSE_ARM,
    MIDWRITE_ARM,
    POISON_FIELD,
    POISON_FIRED,
    TASKFAIL_ARM,
    TORN_ARM,
    WRITEFAIL_ARM,
    arm,
    resume_when_paused,
)
from recovery_lib.runtime.launch import JobLaunch, LaunchRefused
from recovery_lib.runtime.logs import ProgressThrottle
from recovery_lib.runtime.supervision import JobSupervisor
from recovery_lib.runtime.supervisor import ProcessSpec
from recovery_lib.settings import Settings, get_settings
from recovery_lib.verify.contract import TimeSpan
from recovery_lib.verify.evidence import save_topics
from recovery_lib.verify.oracle import Verdict, judge, judge_topics
from recovery_lib.verify.schema import recorded_schema

# task-retry: a task fails before it writes; write-retry: a sink task fails after writing
# --midwrite-rows records. Spark retries both (a task-level failure, the driver lives on).
FAILURE_KINDS = (
    "driver-kill",
    "mid-write",
    "executor-kill",
    "task-retry",
    "write-retry",
    "pause",
    "torn-write",  # mode cec: a window footprint written torn, then the driver killed
    "pause-mid-write",  # the job stopped (SIGSTOP) in the middle of a sink write, resumed later
    *NETWORK_KINDS,  # the network and the broker (experiment/network_faults.py)
    "checkpoint-unwritable",  # the checkpoint directory refuses writes for --pause s
    "poison",  # a record the job's code raises on, every attempt (found and parked)
)
# Failures a hook in the job fires when a task or the driver reaches it, armed by a file:
# kind -> (arm file, marker the hook writes when it fires, armed with --midwrite-rows).
HOOK_FAULTS = {
    "mid-write": (MIDWRITE_ARM, "midwrite.fired", True),
    "task-retry": (TASKFAIL_ARM, "taskfail.fired", False),
    "write-retry": (WRITEFAIL_ARM, "writefail.fired", True),
    "torn-write": (TORN_ARM, "torn.fired", True),
    "pause-mid-write": (MIDPAUSE_ARM, "midpause.fired", True),
}
# The sink modes an experiment's faulty run can use (io/sinks/modes.py), by their command-line
# spelling; the oracle reads the output as each mode's consumer does. (transactional needs a
# broker that hides aborted records: the experiment tries its broker first.)
SINKS = {sink_flag(m): m for m in SINK_MODES}
# Or a lakehouse table (io/sinks/table_target.py): the oracle reads the table's rows. The
# "-append" ones append every attempt of a batch (no guard): a campaign's contrast.
TABLE_SINKS = (*(k.value for k in TableKind), *(k.value + PLAIN_APPEND for k in TableKind))


log = logging.getLogger(__name__)


@dataclass
class ExperimentConfig:
    """What an experiment runs: the job, its recovery mode and sink, the failures, the input.

    Attributes:
        query: the job: one of this repository's jobs/ by name (q3, prices) or a JobSpec's
            ``module:attr``.
        mode: the recovery mode (modes/ registry: native, causal, cec, standby, kazoo,
            liverobin).
        fail: the failure kind, or several comma-separated that take turns; None: no failure.
        fail_at_s: seconds into the faulty run of the first failure.
        repeat: failures per faulty run: at fail_at_s, + every_s, + 2 every_s, ...
        every_s: seconds between repeated failures.
        jitter_s: each failure up to this much later (random, from ``seed``).
        inject_grace_s: failures still due when the timed input ends (the job was not back
            from the previous one in time) get up to this much more input, at the same rate,
            to come in; 0: none (they are recorded as not injected).
        rate: input events per second.
        duration_s: seconds of timed input.
        seed: the generator's and the jitter's seed.
        sink: how outputs reach the topic (io/sinks/modes.py: dedup, release, transactional,
            two-phase, at-least-once) or a table sink (delta, iceberg).
        table: a table sink's location (default: the run's own).
        cluster: run on the local standalone cluster instead of local mode.
        executor_cores: on a cluster, cores per executor (1: one executor per worker core).
        pause_s: how long a pause, a network fault or a broker outage lasts.
        heartbeat_timeout_s: how long a silent job counts as alive.
        midwrite_rows: mid-write failures fire after this many rows of a batch's write.
        quiet_s: the quiet time that ends the drain after the input.
        q12_window_s: q12's processing-time window.
        warmup_s: seconds of input, unpaced, processed and committed before the timed phase,
            so the measured run does not include the first batches' warm-up.
        catch_up_timeout_s: how long the warm-up's processing, and the drain after the input,
            may take.
        keys: keyed input instead of the generator: events {account, amount} over this many
            distinct keys, each once in the warm-up (a job with one JSON input of them).
        keep_input: keep the input topics when the experiment ends (an in-memory broker keeps
            every record: 150 s at 100k ev/s is ~5 GB).
        keep_output: keep every topic of the experiment once judged (False: delete them; a
            benchmark of many points needs that on the in-memory broker).
        replay: recorded input instead of the generator: the job's input name -> a topic.
        replay_start: the offsets to replay from, {topic: {partition: offset}}.
        replay_end: the offsets to replay up to (exclusive); default: everything present.
        params: the job's ``--param name=value`` (besides its services').
        victim: active replication: which replica a failure hits (leader, follower, a, b).
        heartbeat_period_s: LiveRobin's heartbeat period.
        trigger_s: the job's processing-time trigger in seconds (None: each batch as soon as
            the last ended); a KaZoo replacement catches up only with slack in it.
        replace_after_s: active replication: when a dead replica is replaced.
        slow_delay_s: LiveRobin: one input partition's heartbeats this late.
        net_latency_ms: net-latency: the added latency.
        net_jitter_ms: net-latency: up to this much more.
        net_reset_api: net-reset: the request whose answer is cut off (produce, fetch, any).
    """

    query: str = "q3"
    mode: str = "native"
    fail: str | None = "driver-kill"
    fail_at_s: float = 20.0
    repeat: int = 1
    every_s: float = 20.0
    jitter_s: float = 0.0
    inject_grace_s: float = 0.0
    rate: float = 2_000.0
    duration_s: float = 60.0
    seed: int = 42
    sink: str = "dedup"
    table: str | None = None
    cluster: bool = False
    executor_cores: int | None = None
    pause_s: float = 5.0
    heartbeat_timeout_s: float = 10.0
    midwrite_rows: int = 20
    quiet_s: float = 6.0
    q12_window_s: int = 10
    warmup_s: float = 2.0
    catch_up_timeout_s: float = 300.0
    keys: int | None = None
    keep_input: bool = False
    keep_output: bool = True
    replay: dict[str, str] | None = None
    replay_start: dict[str, dict[int, int]] | None = None
    replay_end: dict[str, dict[int, int]] | None = None
    params: dict[str, str] | None = None
    victim: str | None = None
    heartbeat_period_s: float | None = None
    trigger_s: float | None = None
    replace_after_s: float | None = None
    slow_delay_s: float = 0.0
    net_latency_ms: float = 200.0
    net_jitter_ms: float = 50.0
    net_reset_api: str = "produce"

    @property
    def job(self) -> JobSpec:
        """The job ``query`` names (raises JobError saying how to name one)."""
        return resolve_job(self.query)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The failure kinds; with several (``"driver-kill,mid-write"``) the repeated failures
        take turns."""
        return tuple(k.strip() for k in self.fail.split(",")) if self.fail else ()

    def validate(self, settings: Settings | None = None) -> None:
        """Refuse what cannot run, before anything starts.

        Args:
            settings: The caller's settings (the environment's if None).

        Raises:
            LaunchRefused: options that do not work together (the message says what to
                change).
        """
        job = self.job  # raises saying how to name a job
        if self.replay:
            unknown = sorted(set(self.replay) - set(job.inputs))
            if unknown:
                raise LaunchRefused(
                    f"--replay {unknown}: job {job.name} has inputs {job.inputs}; replay only those"
                )
        recovery = self.recovery_mode  # raises naming the modes there are
        for kind in self.kinds:
            if kind not in FAILURE_KINDS:
                raise LaunchRefused(
                    f"unknown failure kind {kind!r}; choose one of {', '.join(FAILURE_KINDS)} "
                    "(several, comma-separated, take turns)"
                )
        if self.rate <= 0:
            raise LaunchRefused(f"--rate must be positive, got {self.rate}")
        if self.duration_s <= 0 or not 0 <= self.fail_at_s < self.duration_s:
            raise LaunchRefused("--fail-at must lie within [0, --duration)")
        if self.repeat < 1 or self.every_s <= 0:
            raise LaunchRefused("--repeat must be >= 1 and --every positive")
        if self.jitter_s < 0 or self.jitter_s >= self.every_s:
            raise LaunchRefused("--jitter must lie within [0, --every)")
        last = self.fail_at_s + (self.repeat - 1) * self.every_s + self.jitter_s
        if last >= self.duration_s:
            raise LaunchRefused(
                f"{self.repeat} failures every {self.every_s:g} s from {self.fail_at_s:g} s do "
                f"not fit in --duration {self.duration_s:g} s"
            )
        if self.keys is not None:
            if self.keys < 1:
                raise LaunchRefused(f"--keys must be at least 1, got {self.keys}")
            if self.replay or len(job.inputs) != 1:
                raise LaunchRefused(
                    f"--keys generates one keyed input; job {job.name} reads {job.inputs}"
                    + (" and --replay gives recorded input" if self.replay else "")
                    + ": drop --keys or choose a job with one generated input"
                )
        if self.catch_up_timeout_s <= 0:
            raise LaunchRefused("--catch-up-timeout must be positive")
        kinds = self.kinds
        poisons = sum(1 for k in range(self.repeat) if kinds and kinds[k % len(kinds)] == "poison")
        if poisons > 1:
            raise LaunchRefused(
                f"{poisons} poison records in one run: the job parks one per search; use one "
                "poison per run (--repeat with other kinds between is fine if it comes once)"
            )
        if needs_network(self.kinds):
            if self.net_reset_api not in RESET_APIS:
                raise LaunchRefused(
                    f"--net-reset-api must be one of {', '.join(RESET_APIS)}, "
                    f"got {self.net_reset_api!r}"
                )
            if self.replay:
                raise LaunchRefused(
                    "network faults run on the experiment's own broker behind its fault proxy; "
                    "a --replay reads recorded topics of your broker: record the input into "
                    "generated topics or choose another failure kind"
                )
            if self.cluster:
                raise LaunchRefused(
                    "network faults need every client on the experiment's own broker; a "
                    "standalone cluster's executors keep the broker they started with: drop "
                    "--cluster for these failure kinds"
                )
            if self.pause_s <= 0:
                raise LaunchRefused("--pause (how long a network fault lasts) must be positive")
            mixed = sorted(set(self.kinds) & set(PROXY_KINDS))
            if needs_cluster(self.kinds) and mixed:
                raise LaunchRefused(
                    f"broker-kill runs on a private three-node Kafka cluster, {', '.join(mixed)} "
                    "on one broker behind the fault proxy: run them in separate experiments"
                )
        if self.sink not in SINKS and self.sink not in TABLE_SINKS:
            raise LaunchRefused(
                f"--sink must be one of {', '.join([*SINKS, *TABLE_SINKS])}, got {self.sink!r}"
            )
        if self.table and self.sink not in TABLE_SINKS:
            raise LaunchRefused("--table is where a table sink writes: add --sink delta or iceberg")
        recovery.validate(self.request(settings))

    @property
    def sink_mode(self) -> str:
        """The Kafka sink's mode (a table run's topic sink is unused: dedup)."""
        return SINKS.get(self.sink, "dedup")

    def table_target(self, workdir: Path) -> TableTarget | None:
        """The faulty run's table.

        Args:
            workdir: the experiment's work directory (the default table lives there).

        Returns:
            The table, or None when the run writes its output topic.
        """
        if self.sink not in TABLE_SINKS:
            return None
        return TableTarget.parse(f"{self.sink}:{self.table or workdir / 'faulty' / 'table'}")

    @property
    def recovery_mode(self) -> RecoveryMode:
        """The registered mode ``mode`` names."""
        return get_mode(self.mode)

    def request(self, settings: Settings | None = None) -> ModeRequest:
        """What the experiment's faulty run asks of its mode.

        Args:
            settings: The caller's settings (the environment's if None).

        Returns:
            The request, with the settings for the mode's supervisors.
        """
        return ModeRequest(
            job=self.job,
            sink_mode=self.sink_mode,
            table_sink=self.sink in TABLE_SINKS,
            failures=self.kinds,
            cluster=self.cluster,
            options=self.mode_options,
            settings=settings or get_settings(),
        )

    @property
    def mode_options(self) -> ModeOptions:
        """What the mode's supervisor is told beyond the job's process."""
        return ModeOptions(
            self.victim, self.heartbeat_period_s, self.replace_after_s, self.slow_delay_s
        )


@dataclass
class _Run:
    """One run of the experiment while it goes on (faulty or reference)."""

    name: str
    run_id: str
    out_topic: str
    arm_dir: Path
    sup: JobSupervisor
    collector: OutputFollower
    t0: float  # start of the timed phase (monotonic, and wall clock ms)
    t0_ms: int
    failures: list[InjectedFailure] = field(default_factory=list)
    not_injected: list[dict[str, Any]] = field(default_factory=list)
    extended_s: float = 0.0  # input added for failures still due (inject_grace_s)
    unprocessed: int = 0  # input records the job had not committed when the drain gave up
    metrics: LiveMetrics | None = None  # the faulty run's /metrics
    metrics_url: str | None = None
    table: TableTarget | None = None  # the output's table (None: its topic)
    # Wall clock ms when the job was launched: where the run's processing-time windows begin.
    launched_ms: int = field(default_factory=now_ms)

    def result(self) -> dict[str, Any]:
        return {
            "clock_ms": [self.launched_ms, now_ms()],  # the run's wall-clock span
            "table": self.table.spell() if self.table is not None else None,
            "name": self.name,
            "run_id": self.run_id,
            "out_topic": self.out_topic,
            "t0_ms": self.t0_ms,
            "failures": [f.to_dict() for f in self.failures],
            "not_injected": self.not_injected,
            "input_extended_s": round(self.extended_s, 1),
            "input_unprocessed": self.unprocessed,
            "samples": [s for s in self.collector.samples if s[0] >= self.t0_ms],  # no warm-up
            "restarts": [
                asdict(r) | {"restart_time_s": r.restart_time_s} for r in self.sup.restarts
            ],
            "takeovers": list(self.sup.takeovers),
            "elapsed_s": time.monotonic() - self.t0,
            "metrics_url": self.metrics_url,
        }


class Experiment:
    """A faulty run and a failure-free reference run of one job on the same input, judged by
    the oracle (``run`` returns the report).

    Args:
        cfg: what to run; validated here.
        console: where progress and tables go (default: a new rich console).
        progress: a line-per-event progress callback (default: throttled lines on the
            console, at most one per 10 s).
        on_run: ``on_run(name, "start" | "end")`` around each run (faulty, reference), e.g.
            to measure what the faulty run alone costs.
        settings: The caller's settings (the environment's if None), read once: the work
            directory, metrics store, broker, the runs' supervisors and the oracle's reads.

    Raises:
        LaunchRefused: ``cfg`` asks for something that cannot run (the message says what to
            change).
    """

    def __init__(
        self,
        cfg: ExperimentConfig,
        console: Console | None = None,
        progress: Callable[[str], None] | None = None,
        on_run: Callable[[str, str], None] | None = None,
        settings: Settings | None = None,
    ) -> None:
        # Read once, here or by the caller: the runs, their supervisors and modes get them.
        self.settings = settings = settings or get_settings()
        cfg.validate(settings)
        self.cfg = cfg
        self.job = cfg.job
        self.console = console or Console()
        self.progress = progress or ProgressThrottle(self.console.log)
        self.on_run = on_run or (lambda _name, _phase: None)
        self.id = f"{self.job.name}-{cfg.mode}-{uuid.uuid4().hex[:6]}"
        self.workdir = settings.home / "experiments" / self.id
        self.store = MetricsStore(settings.home / "metrics.duckdb").start_background_flush()
        self._exits = contextlib.ExitStack()
        try:
            self._set_up(cfg)
        except BaseException:  # e.g. a broker that refused the login: nothing left running
            self._exits.close()
            self.store.close()
            raise

    def _set_up(self, cfg: ExperimentConfig) -> None:
        # Network faults: the whole experiment (this process and the job's) on a private
        # broker behind the fault proxy, from here until run() ends.
        self._disk = UnwritableTree()  # checkpoint-unwritable
        self._exits.callback(self._disk.stop)  # never left frozen
        self.network: NetworkFaults | None = None
        if needs_network(cfg.kinds):
            self.network = NetworkFaults(
                self.workdir,
                NetworkFaultOptions(
                    cfg.pause_s, cfg.net_latency_ms, cfg.net_jitter_ms, cfg.net_reset_api
                ),
                cfg.seed,
                cluster=needs_cluster(cfg.kinds),
                settings=self.settings,
            )
            self.network.start()
            self._exits.callback(self.network.stop)
            self._exits.enter_context(self.network.use())
            # use() pointed this process's settings at the private broker: the caller's
            # settings with its broker.
            self.settings = self.settings.with_broker_of(get_settings())
            where = (
                "a private three-node Kafka cluster at"
                if self.network.cluster
                else ("a private broker behind")
            )
            self.progress(f"network faults: {where} {self.network.bootstrap}")
        if cfg.sink_mode in NEEDS_BROKER_TRANSACTIONS:  # before any run, not in the job's
            require_hidden_aborts(
                client_config(settings=self.settings),
                "--sink transactional",
                "--sink dedup, release or two-phase",
            )
        self.gen = GeneratorConfig(
            topic_prefix=f"exp.{self.id}", seed=cfg.seed, event_time_rate=cfg.rate, partitions=2
        )
        self.admin = TopicAdmin(settings=self.settings)
        self._started_cluster = False
        self._cluster_url: str | None = None
        self._supervisors: list[JobSupervisor] = []
        self._stop = threading.Event()
        self.input: ExperimentInput
        if cfg.replay:
            self.input = RecordedInput(
                cfg.replay, f"exp.{self.id}", cfg.replay_start, cfg.replay_end
            )
        elif cfg.keys is not None:
            self.input = KeyedInput(self.job.inputs[0], cfg.keys, f"exp.{self.id}", cfg.seed)
        else:
            self.input = GeneratedInput(self.gen, self.job.inputs)
        self.params: dict[str, str] = dict(cfg.params or {})
        self.events = 0
        settings = self.settings
        self._probe = TailProbe.from_settings(client_config(settings=settings), settings)

    # -- the whole experiment --------------------------------------------------------------

    def _spark_conf(self, cfg: ExperimentConfig) -> dict[str, str]:
        """spark-submit settings of the cluster runs."""
        if not self._cluster_url:
            return {}
        # The single-host cluster stands in for several hosts: the other executors' shuffle
        # blocks come over the network in the order the fetches complete (Spark would read them
        # straight from the local disk, in a fixed order, on one host).
        conf = {"spark.shuffle.readHostLocalDisk": "false"}
        if cfg.executor_cores:
            conf["spark.executor.cores"] = str(cfg.executor_cores)
        return conf

    def run(self) -> dict[str, Any]:
        """Run both, judge the faulty run's output against the reference's, stop everything
        started.

        Returns:
            The report: failures (fired or not), throughput, latency, restarts and takeovers,
            output gap and recovery time, and ``consistency`` (the oracle's verdict, with
            ``evidence`` when inconsistent); ``write_report`` saves it.
        """
        started = time.monotonic()
        try:
            if self.cfg.cluster:
                self._ensure_cluster()
            with self.job.services() as service_params:  # e.g. a local HTTP service
                self.params = {**service_params, **self.params}
                self._prepare_input()
                faulty = self._run("faulty", inject=self.cfg.fail)
                reference = self._run("reference", inject=None)
            report = self._report(faulty, reference)
        finally:
            self._stop.set()
            for sup in self._supervisors:
                sup.stop()
            if self._started_cluster:
                cluster_mod.stop_cluster()
            self._probe.close()
            self.store.close()
            if not self.cfg.keep_input:
                self._delete_input()
            if not self.cfg.keep_output:
                self._delete_topics()
            self._exits.close()  # the faulty network, if any (its topics go with it)
        report["elapsed_s"] = round(time.monotonic() - started, 1)
        return report

    def _keep_evidence(self, faulty: dict[str, Any], reference: dict[str, Any]) -> str | None:
        """Both runs' output topics and the input, raw, under evidence/ (verify/evidence.py)."""
        if not self.settings.keep_evidence:
            return None
        where = self.workdir / "evidence"
        topics = {
            "faulty": faulty["out_topic"],
            "reference": reference["out_topic"],
            **{f"input-{name}": topic for name, topic in self.input.topics.items()},
        }
        try:
            saved = save_topics(topics, where, client_config(settings=self.settings))
        except Exception as exc:  # noqa: BLE001 - the verdict stands without its evidence
            self.progress(f"could not keep the evidence of the inconsistent verdict: {exc}")
            return None
        self.progress(f"evidence kept in {where}: {saved}")
        return str(where)

    def _prepare_input(self) -> None:
        if isinstance(self.input, RecordedInput):
            count = self.input.load()
            self.progress(
                f"recorded input: {count:,} records of {', '.join(self.input.sources.values())}"
            )
            # The replay lasts as long as its records take at the rate.
            self.cfg.duration_s = max(self.cfg.duration_s, count / self.cfg.rate)
        self.input.create_topics(self.admin)

    def _delete_input(self) -> None:
        topics = self.gen.topics if isinstance(self.input, GeneratedInput) else []
        self._delete([*topics, *(() if topics else self.input.topics.values())], "input topic")

    def _delete_topics(self) -> None:
        """Every topic named after this experiment (its input, outputs and logs)."""
        try:
            listed = self.admin.list()
        except Exception as exc:  # noqa: BLE001 - cleanup must not mask the run's error
            self.progress(f"could not list the experiment's topics: {exc}")
            return
        self._delete([t for t in listed if t.startswith(f"{self.gen.topic_prefix}.")], "topic")

    def _delete(self, topics: list[str], what: str) -> None:
        for topic in topics:
            try:
                self.admin.delete(topic)
            except Exception as exc:  # noqa: BLE001 - cleanup must not mask the run's error
                self.progress(f"could not delete {what} {topic}: {exc}")

    def _ensure_cluster(self) -> None:
        state = cluster_mod.cluster_state()
        if state is None:
            self.progress("starting a Spark standalone cluster (master + worker) ...")
            state = cluster_mod.start_cluster()
            self._started_cluster = True
        self._cluster_url = state.url

    # -- one run -----------------------------------------------------------------------------

    def _run(self, name: str, inject: str | None) -> dict[str, Any]:
        """One run, as its phases: start the job and the latency collector; (faulty run only)
        warm up, then feed the timed input and inject the failures; drain; stop."""
        self.on_run(name, "start")
        run = self._start(name, inject)
        try:
            if name == "faulty":
                warmup = self._warm_up(run.sup, name)
                run.t0, run.t0_ms = time.monotonic(), now_ms()
                self._feed_and_inject(run, warmup, inject)
            run.unprocessed = self._drain(run.sup, run.collector, name)
            if self.job.closing_ticks is not None:  # processing-time windows need ticks
                run.unprocessed = self._tick_and_drain(run.sup, run.collector, name)
        finally:
            run.sup.stop()
            run.collector.stop()
            if run.metrics is not None:
                run.metrics.stop()
            self.store.finish_run(run.run_id)
            self.on_run(name, "end")
        self._settle_failures(run)
        return run.result()

    def _start(self, name: str, inject: str | None) -> _Run:
        """Phase 1: output topic, metrics run, the job under its mode's supervisor, ready."""
        cfg = self.cfg
        out_topic = f"{self.gen.topic_prefix}.out.{name}"
        sink = cfg.sink_mode if name == "faulty" else "dedup"
        table = cfg.table_target(self.workdir) if name == "faulty" else None
        if table is None:  # a table sink's first batch creates its table
            self.admin.create(out_topic, output_partitions(sink, self.gen.partitions))
        mode = cfg.recovery_mode if name == "faulty" else REFERENCE_MODE
        run_id = self.store.start_run(
            self.job.name,
            cfg.mode if name == "faulty" else "reference",
            {**asdict(cfg), "run": name, "experiment": self.id},
        )
        arm_dir = self.workdir / name / "arm"
        if name == "reference":  # the failure-free run skips what the faulty run parked
            self._share_parked()
        # The failure-free reference asks for no extras (no spare).
        request = cfg.request(self.settings) if name == "faulty" else ModeRequest(self.job)
        base = JobLaunch(
            job=self.job.ref,
            name=self.job.name,
            inputs={n: t for n, t in self.input.topics.items() if n in self.job.inputs},
            prefix=self.gen.topic_prefix,  # the output and dead-letter topics are the experiment's
            partitions=self.gen.partitions,
            checkpoints=str(self.workdir / name / "ck"),
            output_topic=out_topic,
            sink_mode=sink,  # the reference run is read deduplicated, whatever the sink
            table_sink=table.spell() if table is not None else None,
            metrics=str(self.store.path),
            run_id=run_id,
            params=dict(self.params),
            task_retries=4
            if inject is not None and {"task-retry", "write-retry"} & set(cfg.kinds)
            else 1,
            **({"trigger_interval": f"{cfg.trigger_s:g} seconds"} if cfg.trigger_s else {}),
        )
        spec = ProcessSpec.for_job(
            mode.launch(base, request),
            cluster_url=self._cluster_url,
            env={ARM_DIR_ENV: str(arm_dir)},
            spark_conf=self._spark_conf(cfg),
            heartbeat_timeout_s=cfg.heartbeat_timeout_s,
            # Every injected failure may cost a restart; the default budget covers the rest.
            max_restarts=ProcessSpec.max_restarts + (cfg.repeat if inject is not None else 0),
        )
        if self.network is not None and name == "faulty":  # broker-kill: the job's leaders
            self.network.watch((*base.inputs.values(), out_topic))
        sup = mode.supervisor(spec, request, self.workdir / name, self.store, run_id)
        self._supervisors.append(sup)
        self.progress(
            f"[{name}] starting the {self.job.name} job "
            f"({'cluster' if self._cluster_url else 'local'}) ..."
        )
        sup.start()
        sup.wait_ready()
        collector: OutputFollower
        if table is not None:
            collector = TableLatencyCollector(table, run_id, self.store).start()
        else:
            gate = visibility_gate(sink) if name == "faulty" else None
            collector = LatencyCollector(out_topic, run_id, self.store, gate=gate).start()
        run = _Run(name, run_id, out_topic, arm_dir, sup, collector, time.monotonic(), now_ms())
        run.table = table
        if name == "faulty":  # where Prometheus looks, as for a job under a daemon
            run.metrics = LiveMetrics(
                JobMetrics(self.job.name, mode.name),
                sup,
                collector,
                self.settings.job_status_every_s,
            )
            run.metrics_url = f"http://127.0.0.1:{run.metrics.start()}/metrics"
            self.progress(f"[{name}] metrics (OpenMetrics): {run.metrics_url}")
        return run

    def _feed_and_inject(self, run: _Run, warmup: int, inject: str | None) -> None:
        """Phase 3: the timed input in a thread; each failure when it is due and the job is
        back from the previous one; failures still due when the input ends are recorded as
        not injected."""
        cfg = self.cfg
        produced = [warmup]

        def feed(first: int, seconds: float, done: Callable[[], bool]) -> threading.Thread:
            # A daemon: joined below when the input ends; an interrupted run (Ctrl-C, SIGTERM)
            # exits without waiting on its producer's final flush to a broker already stopped.
            thread = threading.Thread(
                name="input feeder",
                daemon=True,
                target=lambda: self.input.produce(
                    first,
                    cfg.rate,
                    seconds,
                    on_progress=lambda n: produced.__setitem__(0, first + n),
                    stop=lambda: self._stop.is_set() or done(),
                ),
            )
            thread.start()
            return thread

        feeder = feed(warmup, cfg.duration_s, lambda: False)
        kinds = cfg.kinds if inject is not None else ()
        jitter = random.Random(cfg.seed)
        due = [
            (
                cfg.fail_at_s + k * cfg.every_s + jitter.uniform(0, cfg.jitter_s),
                kinds[k % len(kinds)],
            )
            for k in range(cfg.repeat if kinds else 0)
        ]
        extended_at: float | None = None  # when the input was extended for failures still due
        while True:
            if not feeder.is_alive():
                if not due or cfg.inject_grace_s <= 0:
                    break
                if extended_at is None:  # more input, until the failures are in
                    extended_at = time.monotonic()
                    feeder.join()
                    feeder = feed(produced[0], cfg.inject_grace_s, lambda: not due)
                elif time.monotonic() - extended_at >= cfg.inject_grace_s:
                    break
            run.sup.tick()
            elapsed = time.monotonic() - run.t0
            if due and elapsed >= due[0][0] and self._recovered(due[0][1], run.sup, run.arm_dir):
                if run.failures:
                    run.failures[-1].settle(run.t0_ms, rearm=True)
                run.failures.append(
                    self._inject(due[0][1], run.sup, run.arm_dir, elapsed, run.run_id)
                )
                due.pop(0)
            self.progress(
                f"[{run.name}] {elapsed:5.1f} s, {produced[0]:,} input records, "
                f"{len(run.collector.samples):,} outputs, restarts {len(run.sup.restarts)}"
            )
            time.sleep(0.5)
        feeder.join()
        if extended_at is not None:
            run.extended_s = time.monotonic() - extended_at
        self.events = produced[0]
        run.not_injected = [{"at_s": round(at, 1), "kind": kind} for at, kind in due]
        if run.not_injected:  # the job was not back from the previous failure in time
            self.progress(
                f"[{run.name}] {len(due)} failure(s) not injected before the input ended "
                "(the job was still recovering): the verdict will be inconclusive; "
                "raise --duration or --inject-grace, or lower --repeat"
            )

    def _settle_failures(self, run: _Run) -> None:
        """Phase 5: whether and when the last armed hook fired (said for every failure)."""
        if not run.failures:
            return
        run.failures[-1].settle(run.t0_ms, rearm=False)
        if self.network is not None:
            self.network.refresh()
        for failure in run.failures:
            if failure.status is FailureStatus.NOT_FIRED:
                self.progress(
                    f"[{run.name}] the {failure.kind} failure armed at {failure.at_s} s "
                    "never fired (no batch reached the armed point): the verdict will be "
                    "inconclusive; use more input per batch or another failure kind"
                )

    def _recovered(self, kind: str, sup: JobSupervisor, arm_dir: Path) -> bool:
        """The next failure waits until the job is back from the previous one (and an armed
        hook has fired), so each failure hits a running job."""
        if not sup.ready_for_next_failure():
            return False
        if self.network is not None and not self.network.over():
            return False  # the last network fault still lasts
        if self._disk.frozen():
            return False  # the checkpoint still refuses writes
        for armed, fired, _rows in HOOK_FAULTS.values():
            for path in arm_dir.rglob(armed):  # a replica set arms one replica's directory
                if not (path.parent / fired).exists():
                    return False  # an armed hook has not fired yet
        if kind == "executor-kill":
            state = cluster_mod.cluster_state()
            return bool(state and cluster_mod.executor_pids(state))
        return True

    def _inject(
        self, kind: str, sup: JobSupervisor, arm_dir: Path, elapsed: float, run_id: str
    ) -> InjectedFailure:
        at_ms = now_ms()
        # Signals fire when sent; armed hooks (mid-write, task-retry) when a task reaches them.
        failure = InjectedFailure(kind, round(elapsed, 2), FailureStatus.FIRED, at_ms)
        self.progress(f"injecting {kind} at {elapsed:.1f} s")
        if kind == "driver-kill":
            if not sup.is_ready():  # nothing to kill: the job is not up
                failure.status, failure.fired_ms = FailureStatus.NOT_FIRED, None
            sup.kill_group(signal.SIGKILL)
        elif kind in HOOK_FAULTS:
            armed, fired, after_rows = HOOK_FAULTS[kind]
            target = sup.fault_dir(arm_dir)  # a replica set: the victim replica's
            arm(target, armed, f"rows={self.cfg.midwrite_rows}" if after_rows else "")
            failure.hook = ArmedHook(target, armed, fired)
            failure.status, failure.fired_ms = FailureStatus.ARMED, None  # until it fires
            if kind == "pause-mid-write":
                failure.pause_s = self.cfg.pause_s
                threading.Thread(
                    target=resume_when_paused,
                    args=(target, self.cfg.pause_s, self.cfg.duration_s),
                    daemon=True,
                ).start()
        elif kind == "executor-kill":
            state = cluster_mod.cluster_state()
            pids = cluster_mod.executor_pids(state) if state else []
            if not pids:
                raise cluster_mod.ClusterError(
                    "no executor process found to kill; start the standalone cluster "
                    "(`recovery cluster start`) and run with --cluster"
                )
            for pid in pids:
                import os

                os.kill(pid, signal.SIGKILL)
            failure.pids = pids
        elif kind == "pause":
            threading.Thread(target=sup.pause, args=(self.cfg.pause_s,), daemon=True).start()
            failure.pause_s = self.cfg.pause_s
        elif kind == "poison":
            failure.status, failure.fired_ms = FailureStatus.ARMED, None  # until the job hits it
            failure.detail = {"position": self._send_poison(elapsed)}
            marker = arm_dir / POISON_FIRED
            failure.probe = lambda: int(marker.stat().st_mtime * 1000) if marker.exists() else None
        elif kind == "checkpoint-unwritable":
            frozen = self._disk.freeze(sup.live_checkpoints, self.cfg.pause_s)
            failure.pause_s = self.cfg.pause_s
            failure.detail = {"directories": frozen.directories}
        elif kind in NETWORK_KINDS:
            assert self.network is not None  # started in __init__ for these kinds
            self.network.inject(kind, failure)
        self.store.event(run_id, "failure_injected", failure.to_dict(), at_ms)
        return failure

    def _parked_path(self, name: str) -> Path:
        """A run's parked records (job/options.py parked_path: beside its checkpoint)."""
        return self.workdir / name / "ck" / f"{self.job.name}.parked.json"

    def _share_parked(self) -> None:
        parked = read_parked(self._parked_path("faulty"))
        if parked:
            park(self._parked_path("reference"), parked)
            self.progress(f"[reference] skips the {len(parked)} record(s) the faulty run parked")

    def _send_poison(self, elapsed: float) -> str:
        """A record of the job's first input that its code raises on (runtime/faults.py's
        poison hook): the position it was written at."""
        topic = self.input.topics[self.job.inputs[0]]
        producer = Producer(client_config(settings=self.settings))
        written: list[str] = []
        producer.produce(
            topic,
            value=json.dumps({POISON_FIELD: True, "at_s": round(elapsed, 1)}).encode(),
            partition=0,
            on_delivery=lambda err, msg: written.append(
                f"{msg.topic()}/{msg.partition()}@{msg.offset()}" if err is None else str(err)
            ),
        )
        producer.flush(self.settings.sink_flush_timeout_s)
        return written[0] if written else "not acknowledged"

    def _warm_up(self, sup: JobSupervisor, name: str) -> int:
        """Produce ``warmup_s`` worth of events unpaced and wait until they are committed."""
        count = self.input.warm_up(int(self.cfg.warmup_s * self.cfg.rate))
        if count <= 0:
            return 0
        self.progress(f"[{name}] warm-up: {count:,} input records ...")
        timeout = self.cfg.catch_up_timeout_s
        deadline = time.monotonic() + timeout
        # The warm-up processed, and the mode's standby (if any) ready for the first failure.
        while not (self._drained(self._checkpoint(sup, name)) and sup.ready_for_next_failure()):
            sup.tick()
            if time.monotonic() > deadline:
                raise JobFailed(
                    f"the job did not process its {count:,} warm-up events (or its standby or "
                    f"replica was not ready) within {timeout:g} s; see the job's log (job.log) "
                    f"under {self.workdir / name}"
                )
            time.sleep(0.5)
        return count

    def _drain(self, sup: JobSupervisor, collector: OutputFollower, name: str) -> int:
        """Until the committed offsets reach the end of every input partition, then until the
        output has been quiet for quiet_s (late windows), supervising all the while. Returns
        how many input records were still not committed when catch_up_timeout_s ran out (0:
        all were): the run's output then lacks what they would give, which the report says."""
        deadline = time.monotonic() + self.cfg.catch_up_timeout_s
        while time.monotonic() < deadline and not self._drained(self._checkpoint(sup, name)):
            sup.tick()
            self.progress(f"[{name}] catching up: {len(collector.samples):,} outputs so far")
            time.sleep(0.5)
        if time.monotonic() >= deadline:
            left = self._unprocessed(self._checkpoint(sup, name))
            log.warning(
                "[%s] the job had not processed %s input records after %g s of catching up: "
                "its output lacks what they give (raise catch_up_timeout_s, or the job is too "
                "slow for the rate here)",
                name,
                f"{left:,}" if left is not None else "some",
                self.cfg.catch_up_timeout_s,
            )
            return left if left is not None else -1
        last_count, last_change = -1, time.monotonic()
        while time.monotonic() < deadline:
            sup.tick()
            count = len(collector.samples)
            if count != last_count:
                last_count, last_change = count, time.monotonic()
            if sup.is_ready() and time.monotonic() - last_change >= self.cfg.quiet_s:
                return 0
            self.progress(f"[{name}] draining: {count:,} outputs so far")
            time.sleep(0.5)
        return 0

    def _checkpoint(self, sup: JobSupervisor, name: str) -> Path:
        """The live checkpoint of the query (after a takeover, the new primary's)."""
        return sup.live_checkpoints / self.job.name

    def _drained(self, checkpoint: Path) -> bool:
        """Every input record committed (not known yet, e.g. the broker did not answer: no)."""
        return self._unprocessed(checkpoint) == 0

    def _unprocessed(self, checkpoint: Path) -> int | None:
        """Input records past the checkpoint's committed offsets (None: not known)."""
        committed = committed_offsets(checkpoint)
        if not committed:
            return None
        try:
            ends = self._probe.ends((t, int(p)) for t, parts in committed.items() for p in parts)
        except Exception as exc:
            if is_transient(exc):  # e.g. a killed leader's handle dropped: asked again later
                return None
            raise
        return sum(max(0, end - committed[t][str(p)]) for (t, p), end in ends.items())

    def _tick_and_drain(self, sup: JobSupervisor, collector: OutputFollower, name: str) -> int:
        """Processing-time windows close only when later input arrives: send ticks. Returns
        the last drain's unprocessed input (``_drain``)."""
        ticks = self.job.closing_ticks
        assert ticks is not None
        producer = Producer(client_config(settings=self.settings))
        left = 0
        for _ in range(ticks.count):
            time.sleep(ticks.every_s)
            producer.produce(self.input.topics[ticks.input], value=ticks.value, partition=0)
            producer.flush(10)
            left = self._drain(sup, collector, name)
        return left

    # -- judging -----------------------------------------------------------------------------

    def _faulty_outputs(self, faulty: dict[str, Any]) -> list[SinkRecord]:
        """What a consumer of the faulty run's output reads: its topic as the sink mode's
        consumer does, or every row of its table."""
        if faulty["table"]:
            return TableTarget.parse(faulty["table"]).read_outputs()
        return list(consumer_records(faulty["out_topic"], self.cfg.sink_mode))

    def _report(self, faulty: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
        cfg = self.cfg
        not_fired = len(faulty["not_injected"]) + sum(
            1 for f in faulty["failures"] if f.get("fired") is False
        )
        dedup = consumer_dedups(cfg.sink_mode) and not faulty["table"]
        inputs = self.input.view(self.events)
        # The output's Spark type, as the runs' writers recorded it (verify/schema.py).
        contract = self.job.contract.with_schema(
            recorded_schema(
                self.settings.home, faulty["table"] or faulty["out_topic"], reference["out_topic"]
            )
        )
        clocks = {
            "clock": TimeSpan(*faulty["clock_ms"]),
            "reference_clock": TimeSpan(*reference["clock_ms"]),
        }
        if faulty["table"] or visibility_gate(cfg.sink_mode) is not None:
            report = judge(
                self.job.name,
                contract,
                self._faulty_outputs(faulty),
                list(read_topic(reference["out_topic"], settings=self.settings)),
                dedup=dedup,
                inputs=inputs,
                failures_not_fired=not_fired,
                **clocks,
            )
        else:  # a plain consumer reads the topic: judged in Arrow batches, bounded memory
            report = judge_topics(
                self.job.name,
                contract,
                faulty["out_topic"],
                reference["out_topic"],
                dedup=dedup,
                inputs=inputs,
                failures_not_fired=not_fired,
                settings=self.settings,
                **clocks,
            )
        consistency = report.to_dict()
        if report.inconclusive_because:
            self.progress(f"verdict inconclusive: {report.inconclusive_because}")
        if report.verdict == Verdict.INCONSISTENT and not faulty["table"]:
            consistency["evidence"] = self._keep_evidence(faulty, reference)
        self.store.add_consistency(faulty["run_id"], reference["run_id"], consistency)

        samples = faulty["samples"]
        latencies = sorted(lat for _, lat in samples)
        failures = faulty["failures"]
        fired = [f for f in failures if f.get("fired") is not False and f.get("fired_ms")]
        for failure, figures in zip(
            sorted(fired, key=lambda f: f["fired_ms"]),
            each_failure(samples, [f["fired_ms"] for f in fired]),
            strict=True,
        ):  # each failure's own gap and recovery, until the next (a campaign's per kind)
            failure.update(output_gap_s=figures["output_gap_s"])
            failure.update(recovery_time_s=figures["recovery_time_s"])
        failure_ms = failures[0].get("fired_ms") if failures else None
        restarts = faulty["restarts"]
        result = {
            "experiment": self.id,
            "query": self.job.name,
            "job": self.job.ref,
            "contract": self.job.contract.describe(),
            "mode": cfg.mode,
            "rate": cfg.rate,
            "duration_s": cfg.duration_s,
            "sink": cfg.sink,
            "cluster": cfg.cluster,
            "failures": failures,
            "not_injected": faulty["not_injected"],
            "input_extended_s": faulty["input_extended_s"],
            # Input left unprocessed when the drain gave up (-1: some, not counted).
            "input_unprocessed": {
                "faulty": faulty["input_unprocessed"],
                "reference": reference["input_unprocessed"],
            },
            "events": self.events,
            "throughput_eps": round(self.events / max(faulty["elapsed_s"], 1e-9), 1),
            "output_records": len(samples),
            "latency_ms": {"p50": percentile(latencies, 50), "p99": percentile(latencies, 99)},
            "restart_time_s": restarts[0]["restart_time_s"] if restarts else None,
            "recovery_time_s": recovery_time_s(samples, failure_ms) if failure_ms else None,
            "output_gap_s": output_gap_s([v for v, _ in samples], failure_ms)
            if failure_ms
            else None,
            **(p99_around(samples, failure_ms) if failure_ms else {}),
            "restarts": restarts,
            "takeovers": faulty.get("takeovers", []),
            "consistency": consistency,
            "faulty_run_id": faulty["run_id"],
            "reference_run_id": reference["run_id"],
            "out_topics": {"faulty": faulty["out_topic"], "reference": reference["out_topic"]},
            "_timeline": {"t0_ms": faulty["t0_ms"], "samples": samples},
            "metrics_url": faulty.get("metrics_url"),
        }
        if faulty["table"]:
            result["table"] = table_summary(TableTarget.parse(faulty["table"]))
        if self.network is not None:  # the topics lived on the experiment's own broker
            result["network"] = self.network.summary()
        parked = read_parked(self._parked_path("faulty"))
        if parked:  # poison records the job found and sent to its dead letters
            result["parked"] = [asdict(r) | {"position": r.position} for r in parked]
        if failure_ms:  # the dashboard's recoveries beside the restart times
            measured = ("recovery_time_s", "output_gap_s", "p99_30s_before_ms", "p99_30s_after_ms")
            self.store.event(
                faulty["run_id"], "recovery_measured", {k: result.get(k) for k in measured}
            )
        return result


def table_summary(target: TableTarget) -> dict[str, Any]:
    """A table run's own evidence beside the oracle's verdict: one commit per micro-batch (the
    versions its sinks made = the batches they wrote), no batch committed twice, no commit of a
    fenced epoch after a newer one."""
    commits = target.commits()
    marked = [c for c in commits if c.mark is not None]
    batches: dict[str, dict[int, int]] = {}
    for c in marked:
        assert c.mark is not None
        per_app = batches.setdefault(c.mark.app_id, {})
        per_app[c.mark.batch_id] = per_app.get(c.mark.batch_id, 0) + 1
    return {
        "table": target.spell(),
        "kind": target.kind.value,
        "versions": len(commits),
        "batch_commits": len(marked),
        "batches": sum(len(b) for b in batches.values()),
        "batches_twice": {
            app: sorted(b for b, n in per.items() if n > 1) for app, per in batches.items()
        },
        "epochs": sorted({c.mark.epoch for c in marked if c.mark is not None}),
        "zombie_commits": [c.version for c in zombie_commits(commits)],
    }


def write_report(report: dict[str, Any], path: str | Path) -> Path:
    """Save an experiment's report as JSON, and its timeline as a PNG beside it.

    Args:
        report: what ``Experiment.run`` returned (its private timeline is taken out).
        path: the JSON file to write (parent directories are made).

    Returns:
        The JSON file's path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    timeline = report.pop("_timeline", None)
    write_json_report(path, report)
    if timeline is not None:
        timeline_chart(report, timeline, path.with_suffix(".png"))
    return path


def timeline_chart(report: dict[str, Any], timeline: dict[str, Any], path: Path) -> None:
    t0 = timeline["t0_ms"]
    samples = timeline["samples"]
    counts: dict[int, int] = {}
    for visible, _ in samples:
        counts[(visible - t0) // 1000] = counts.get((visible - t0) // 1000, 0) + 1
    p50 = per_second_p50([(v - t0, lat) for v, lat in samples])
    fig, (ax1, ax2) = new_figure(2, 1, figsize=(11, 6), sharex=True)
    ax1.bar(list(counts), list(counts.values()), width=1.0, color="#1f77b4")
    ax1.set_ylabel("outputs / s")
    ax2.plot(list(p50), list(p50.values()), color="k", label="p50 latency")
    ax2.set_ylabel("ms")
    ax2.set_xlabel("seconds since the faulty run started")
    for failure in report["failures"]:
        for ax in (ax1, ax2):
            ax.axvline(failure["at_s"], color="r", linestyle="--")
        ax1.annotate(failure["kind"], (failure["at_s"], ax1.get_ylim()[1] * 0.9), color="r")
    if report.get("recovery_time_s") is not None and report["failures"]:
        rec = report["failures"][0]["at_s"] + report["recovery_time_s"]
        for ax in (ax1, ax2):
            ax.axvline(rec, color="g", linestyle=":")
        ax2.annotate("recovered", (rec, ax2.get_ylim()[1] * 0.9), color="g")
    c = report["consistency"]
    fig.suptitle(
        f"{report['query']} {report['mode']} @ {report['rate']:,.0f} ev/s: {c['verdict']} "
        f"{c.get('guarantee', '')} (lost {c['lost']}, duplicated {c['duplicated']}, "
        f"divergent {c['divergent']})"
    )
    ax2.legend()
    save_figure(fig, path, dpi=100)
