"""``recovery soak``: a job under the whole operations stack for hours, hurt at random, with
what its long-lived processes and its storage do over time.

The soak starts its own broker behind the fault proxy (chaos/network.py), points the stack at it
(``KAFKA_BOOTSTRAP``), writes a jobs file with one job and brings the stack up (Airflow and the
dashboard, ops/stack.py). Airflow launches the job (its ``stream_<name>`` DAG starts the job's
daemon), collects its checkpoints (``checkpoint_gc``), and hurts it: the ``chaos`` DAG asks the
soak's control endpoint (ops/chaos.py) for a random fault on its schedule. Meanwhile input
arrives at a steady rate and, every ``sample_every_s``, the soak records each long-lived
process's resident memory (job, daemon, broker, Airflow components, dashboard, itself) and the
sizes GC must bound (checkpoint directory, records kept per topic, metrics store). At the end
the input stops, the job drains, and the ``consistency_report`` DAG judges the whole output
against a failure-free reference run. The report (JSON + PNG) gives the verdict, the faults,
the restarts, GC's passes, the curves and each process's growth over the last hour.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError, NotStarted, RecoveryError
from recovery_lib.experiment.network_faults import NetworkFaultOptions, NetworkFaults
from recovery_lib.files import write_json_report
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.tail_probe import TailProbe
from recovery_lib.metrics.store import read_frame
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.nexmark.producer import ensure_topics, produce_events
from recovery_lib.ops import daemon
from recovery_lib.ops.airflow_api import AirflowApi
from recovery_lib.ops.chaos import ChaosControl, ChaosTarget
from recovery_lib.ops.config import get_job
from recovery_lib.ops.stack import COMPONENTS, OpsStack
from recovery_lib.runtime.checkpoint import committed_offsets
from recovery_lib.settings import environment, get_settings

log = logging.getLogger(__name__)

# The DAGs the soak unpauses (and pauses again at its end).
SCHEDULED_DAGS = ("chaos", "checkpoint_gc", "consistency_report")


# What the final consistency report's verdict rests on.
JUDGED = ("outputs", "reference_outputs", "lost", "duplicated", "divergent", "extra")


class SoakRefused(RecoveryError, RuntimeError):
    """The soak cannot start here; the message says what to do."""


@dataclass(frozen=True)
class SoakConfig:
    job: str = "q3"
    hours: float = 2.0
    rate: float = 200.0  # input events per second
    sample_every_s: float = 60.0
    chaos_every_min: float = 3.0
    gc_every_min: float = 10.0
    consistency_every_min: float = 60.0
    fault_s: float = 10.0  # how long a blackhole, a pause or an unwritable checkpoint lasts
    metrics_keep_hours: float = 1.0  # GC prunes the metrics store's time series older than this
    seed: int = 42
    report: str = "reports/soak"

    def validate(self) -> None:
        if self.hours <= 0 or self.rate <= 0 or self.sample_every_s <= 0:
            raise ConfigurationError("--hours, --rate and --sample-every must be positive")


@dataclass
class Sample:
    t_s: float
    rss_mb: dict[str, float]  # per long-lived process (with its children)
    sizes: dict[str, float]  # checkpoint and metrics store bytes, records kept per topic
    restarts: int
    status: str


@dataclass
class SoakRun:
    """What a soak saw, written as its report as it goes."""

    config: dict[str, Any]
    started_ms: int
    samples: list[Sample] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "started_ms": self.started_ms,
            **self.result,
            "growth_last_hour": growth(self.samples, 3600.0),
            "samples": [asdict(s) for s in self.samples],
        }


def growth(samples: list[Sample], window_s: float) -> dict[str, dict[str, float | None]]:
    """Per process and size: its value ``window_s`` before the last sample (or at the first,
    for a shorter soak) against the last, and the growth in percent."""
    if len(samples) < 2:
        return {}
    last = samples[-1]
    base = next((s for s in samples if s.t_s >= last.t_s - window_s), samples[0])
    out: dict[str, dict[str, float | None]] = {}
    for name in {*last.rss_mb, *last.sizes}:
        before = base.rss_mb.get(name, base.sizes.get(name))
        now = last.rss_mb.get(name, last.sizes.get(name))
        if before is None or now is None:
            continue
        pct = round(100.0 * (now - before) / before, 1) if before else None
        out[name] = {"from": before, "to": now, "growth_pct": pct, "over_s": last.t_s - base.t_s}
    return out


def tree_rss_mb(pid: int | None, leave_out: set[int] | None = None) -> float | None:
    """Resident memory of ``pid`` and its descendants (MB), without those in ``leave_out``
    and theirs (the daemon without its job). None when ``pid`` is not running."""
    if pid is None:
        return None
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    skip: set[int] = set()
    for other in leave_out or ():
        with contextlib.suppress(psutil.Error):
            skip |= {other, *(p.pid for p in psutil.Process(other).children(recursive=True))}
    total = 0
    for proc in procs:
        if proc.pid in skip:
            continue
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return round(total / 2**20, 1)


def dir_bytes(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
    return total


def run_soak(cfg: SoakConfig, progress: Callable[[str], None]) -> dict[str, Any]:
    cfg.validate()
    settings = get_settings()
    stack = OpsStack(settings)
    running = [c for c in COMPONENTS if stack.running_pid(c) is not None]
    if running or settings.kafka_bootstrap:
        raise SoakRefused(
            "the soak brings up its own stack on its own broker behind a fault proxy: "
            + (f"stop the running one first (`recovery ops down`: {running})" if running else "")
            + ("unset KAFKA_BOOTSTRAP" if settings.kafka_bootstrap else "")
        )
    soak_id = f"soak-{cfg.job}-{uuid.uuid4().hex[:6]}"
    workdir = settings.home / "soak" / soak_id
    workdir.mkdir(parents=True, exist_ok=True)
    name = f"soak_{cfg.job}"
    prefix = f"soak{uuid.uuid4().hex[:6]}"
    previous = settings.home / "jobs" / name
    if previous.exists():  # an earlier soak's job: its checkpoint read that soak's topics
        kept = workdir / "previous_job"
        shutil.move(str(previous), str(kept))
        progress(f"an earlier soak's job directory moved to {kept}: this soak starts afresh")
    jobs_file = workdir / "jobs.yaml"
    entry = {
        "name": name,
        "job": cfg.job,
        "input_prefix": prefix,
        "max_restarts": 10_000,  # every chaos fault may cost a restart
        "on_exhausted": "restart",
        "watch_minutes": max(1.0, cfg.chaos_every_min),
    }
    jobs_file.write_text(yaml.safe_dump({"jobs": [entry]}))
    no_pipelines = workdir / "pipelines.yaml"
    no_pipelines.write_text("pipelines: []\n")
    run = SoakRun(asdict(cfg) | {"soak_id": soak_id, "job_name": name}, int(time.time() * 1000))
    report = Path(cfg.report)
    report.parent.mkdir(parents=True, exist_ok=True)
    faults = NetworkFaults(workdir, NetworkFaultOptions(seconds=cfg.fault_s), cfg.seed)
    progress(f"soak {soak_id}: its broker behind the fault proxy ...")
    faults.start()
    env = {
        "RECOVERY_JOBS_FILE": str(jobs_file),
        "RECOVERY_PIPELINES_FILE": str(no_pipelines),
        "RECOVERY_CHAOS_EVERY_MIN": str(cfg.chaos_every_min),
        "RECOVERY_CHAOS_FAULT_S": str(cfg.fault_s),
        "RECOVERY_OPS_GC_EVERY_MIN": str(cfg.gc_every_min),
        "RECOVERY_OPS_CONSISTENCY_EVERY_MIN": str(cfg.consistency_every_min),
        "RECOVERY_METRICS_KEEP_HOURS": str(cfg.metrics_keep_hours),
        # Input records stay (GC's default): the final verdict compares the whole output with
        # a failure-free run over the whole input.
    }
    try:
        with faults.use(), environment(env):
            _soak(run, cfg, faults, name, prefix, report, progress)
    finally:
        faults.stop()
        _write(run, report)
    return run.to_dict()


def _soak(
    run: SoakRun,
    cfg: SoakConfig,
    faults: NetworkFaults,
    name: str,
    prefix: str,
    report: Path,
    progress: Callable[[str], None],
) -> None:
    """The soak on its broker and jobs file: everything it starts is stopped when it ends."""
    job = get_job(name)
    stack = OpsStack(get_settings())
    control = ChaosControl(ChaosTarget(faults, lambda: job.checkpoint_dir, lambda: _job_pid(name)))
    api: AirflowApi | None = None
    unpaused: list[str] = []
    stop_input = threading.Event()
    control.start()
    try:
        progress("bringing up Airflow and the dashboard (recovery ops up) ...")
        info = stack.up(lambda _step, message, _done: progress(message))
        api = AirflowApi(info.airflow_url, info.user, info.password)
        gen = GeneratorConfig(topic_prefix=prefix, partitions=2, seed=cfg.seed)
        ensure_topics(gen)
        feeder = threading.Thread(
            target=produce_events,
            kwargs={
                "config": gen,
                "duration_s": cfg.hours * 3600,
                "rate": cfg.rate,
                "stop": stop_input.is_set,
            },
            name="soak-input",
            daemon=True,
        )
        feeder.start()
        stream_dag = f"stream_{name}"
        for dag in (stream_dag, *SCHEDULED_DAGS):
            api.wait_parsed(dag)
        api.set_paused(stream_dag, False)
        unpaused.append(stream_dag)
        api.trigger(stream_dag)
        progress(f"Airflow launches {name} ({stream_dag}) ...")
        _wait(lambda: _status(name) == "running", 600, f"{name} running")
        for dag in SCHEDULED_DAGS:
            api.set_paused(dag, False)
            unpaused.append(dag)
        progress(
            f"running {cfg.hours:g} h: chaos every {cfg.chaos_every_min:g} min, GC every "
            f"{cfg.gc_every_min:g} min; report {report}.json"
        )
        deadline = time.monotonic() + cfg.hours * 3600
        _sample_until(run, cfg, stack, faults, name, deadline, report, progress)
        api.set_paused("chaos", True)
        stop_input.set()
        feeder.join(timeout=60)
        progress("input stopped; waiting for the last fault to end and the job to drain ...")
        _wait(lambda: _faults_over_after_input(faults), 120, "the last fault to end")
        _wait(lambda: _drained(job, gen.partitions), 900, "the job to consume all input")
        progress("the consistency_report DAG judges the whole output ...")
        run_id = api.trigger("consistency_report")
        state = api.wait_run("consistency_report", run_id, timeout_s=1800)
        run.result = _result(control.target, name, job.out_topic, run.started_ms, state, faults)
        progress(f"verdict {run.result['verdict']} ({run.result['guarantee']})")
    finally:
        stop_input.set()
        if api is not None:
            for dag in unpaused:
                with contextlib.suppress(Exception):
                    api.set_paused(dag, True)
        with contextlib.suppress(Exception):
            daemon.stop(name)
        stack.down()
        control.stop()


def _daemon_status(name: str) -> Any:
    """The job daemon's status, None before the daemon said anything."""
    try:
        return daemon.check(name)
    except NotStarted:  # not started yet (the DAG's task is on its way)
        return None


def _status(name: str) -> str | None:
    status = _daemon_status(name)
    return status.status if status is not None else None


def _job_pid(name: str) -> int | None:
    status = _daemon_status(name)
    return status.job_pid if status is not None and status.alive else None


def _faults_over_after_input(faults: NetworkFaults) -> bool:
    """The last fault is over, a reset still armed dropped first: the input has stopped, so
    the request it waits for may never come (a late chaos task may still arm one: dropped at
    the next poll)."""
    faults.disarm()
    return faults.over()


def _wait(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the soak waited {timeout_s:.0f} s for {what}")
        time.sleep(2.0)


def _drained(job: Any, partitions: int) -> bool:
    """Whether the job's last committed batch ends at the end of every input topic it reads
    (only its own inputs: q3 never reads the bids the generator also writes)."""
    committed = committed_offsets(job.checkpoint)
    topics = list(job.input_topics.values())
    if not committed or any(t not in committed for t in topics):
        return False
    positions = {
        (t, p): int(committed[t].get(str(p), 0)) for t in topics for p in range(partitions)
    }
    probe = TailProbe(client_config(), 10.0, 10.0)
    try:
        ends = probe.ends(list(positions))
    except TimeoutError:  # the broker did not say where the ends are: ask again
        return False
    finally:
        probe.close()
    return all(positions[tp] >= end for tp, end in ends.items())


def _sample_until(
    run: SoakRun,
    cfg: SoakConfig,
    stack: OpsStack,
    faults: NetworkFaults,
    name: str,
    deadline: float,
    report: Path,
    progress: Callable[[str], None],
) -> None:
    t0 = time.monotonic()
    settings = get_settings()
    job = get_job(name)
    store = settings.home / "metrics.duckdb"
    probe = TailProbe(client_config(), 10.0, 10.0)
    try:
        while time.monotonic() < deadline:
            status = daemon.check(name)
            job_pid = status.job_pid if status.alive else None
            pids = {
                "job": job_pid,
                "daemon": status.supervisor_pid,
                "broker": _broker_pid(faults),
                **{c: stack.running_pid(c) for c in COMPONENTS if c != "broker"},
            }
            # The daemon without its job; the soak itself without what it started (each is
            # counted on its own).
            pids["soak"] = os.getpid()
            leave_out = {"daemon": {job_pid}, "soak": set(pids.values()) - {os.getpid()}}
            rss = {
                proc: tree_rss_mb(pid, leave_out.get(proc, set()) - {None})
                for proc, pid in pids.items()
            }
            sizes: dict[str, float] = {
                "checkpoint_bytes": dir_bytes(job.workdir / "checkpoints"),
                "metrics_store_bytes": store.stat().st_size if store.exists() else 0,
            }
            for topic in (*job.input_topics.values(), job.out_topic):
                with contextlib.suppress(Exception):
                    ends = probe.ends([(topic, p) for p in range(2)], exact=False)
                    kept = sum(e - probe.first_offset(t, p) for (t, p), e in ends.items())
                    sizes[f"records:{topic.split('.')[-1]}"] = kept
            sample = Sample(
                round(time.monotonic() - t0, 1),
                {k: v for k, v in rss.items() if v is not None},
                sizes,
                status.restarts,
                status.status,
            )
            run.samples.append(sample)
            _write(run, report)
            total = sum(sample.rss_mb.values())
            progress(
                f"{sample.t_s / 60:5.1f} min: job {status.status}, {status.restarts} restarts, "
                f"resident {total:,.0f} MB over {len(sample.rss_mb)} processes, checkpoint "
                f"{sizes['checkpoint_bytes'] / 2**20:.1f} MB"
            )
            time.sleep(max(0.0, min(cfg.sample_every_s, deadline - time.monotonic())))
    finally:
        probe.close()


def _broker_pid(faults: NetworkFaults) -> int | None:
    broker = faults.network.broker
    return broker.state.pid if broker is not None and broker.state is not None else None


def _result(
    target: ChaosTarget, name: str, out_topic: str, started_ms: int, state: str, faults: Any
) -> dict[str, Any]:
    store = get_settings().home / "metrics.duckdb"
    reports = read_frame(
        store,
        "SELECT verdict, report FROM consistency_reports WHERE run_id = ? ORDER BY ts_ms DESC",
        [f"job:{out_topic}"],
    )
    final = json.loads(reports["report"].iloc[0]) if not reports.empty else {}
    gc = read_frame(
        store,
        "SELECT count(*) AS passes, sum(bytes_freed) AS freed FROM gc_runs "
        "WHERE job = ? AND ts_ms >= ?",
        [name, started_ms],
    )
    status = daemon.check(name)
    target.settle()
    fired = [e for e in target.events if e.fired]
    kinds: dict[str, int] = {}
    for e in fired:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    return {
        "verdict": final.get("verdict", "no report"),
        "guarantee": final.get("guarantee"),
        "consistency_dag": state,
        "consistency": {k: final.get(k) for k in JUDGED},
        "chaos": {
            "asked": len(target.events),
            "fired": len(fired),
            "by_kind": kinds,
            "events": [asdict(e) for e in target.events],
        },
        "restarts": status.restarts,
        "gc_passes": int(gc["passes"].iloc[0]) if not gc.empty else 0,
        "gc_bytes_freed": int(gc["freed"].iloc[0] or 0) if not gc.empty else 0,
        "network": faults.summary(),
    }


def _write(run: SoakRun, report: Path) -> None:
    data = run.to_dict()
    write_json_report(f"{report}.json", data)
    if len(run.samples) >= 2:
        chart(data, Path(f"{report}.png"))


def chart(data: dict[str, Any], path: Path) -> None:
    samples = data["samples"]
    minutes = [s["t_s"] / 60 for s in samples]
    fig, (mem, size) = new_figure(1, 2, figsize=(15, 5))
    for name in sorted({n for s in samples for n in s["rss_mb"]}):
        mem.plot(minutes, [s["rss_mb"].get(name) for s in samples], label=name)
    mem.set_title("resident memory per long-lived process (MB, with children)")
    mem.set_xlabel("minutes")
    mem.legend(fontsize=8)
    for name in sorted({n for s in samples for n in s["sizes"]}):
        values = [s["sizes"].get(name) for s in samples]
        unit = 2**20 if name.endswith("bytes") else 1000
        size.plot(minutes, [v / unit if v is not None else None for v in values], label=name)
    size.set_title("what GC must bound (MB; records: thousands)")
    size.set_xlabel("minutes")
    size.legend(fontsize=8)
    verdict = data.get("verdict", "running")
    fig.suptitle(
        f"soak of {data['config']['job']}: {verdict}, {data.get('restarts', '?')} restarts"
    )
    save_figure(fig, path, dpi=100)
