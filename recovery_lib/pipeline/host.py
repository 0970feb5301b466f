"""A pipeline's stages as streaming queries of one Spark application (placement ``shared``).

Three stage processes are three JVMs, three Python drivers and their workers on the same cores
(q1p3 at 1,500 ev/s: 61 processes, 9-10 GB resident). Here one process, the host, builds one
Spark session and runs each stage as a query of it; a stage's failure is its query's failure.
The protocols keep their semantics: the runner (pipeline/runner.py) still plans a recovery per
stage, stops the stages its plan names, rewinds their checkpoints and starts them again, now by
telling the host instead of signalling processes.

The runner and the host share a directory:

    <home>/host/stages/<stage>.json   what the runner wants of a stage: its generation, and
                                      the launch's argv to run it with (null: stopped) and why
    <home>/host/heartbeat.json        the host process's lease
    <home>/stages/<stage>/heartbeat.json
                                      the stage's lease, written by the host: the generation it
                                      runs, whether its query is active, why it failed

Every change of what is wanted takes a new generation; the host acknowledges a generation in the
stage's heartbeat once it has stopped the old query (and started the new one, if any), so the
runner knows when a stopped stage's checkpoint may be rewound. If the host process dies every
stage has failed; the first stage started again starts the host again.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recovery_lib.errors import JobFailed
from recovery_lib.files import write_atomic
from recovery_lib.kafka.outage import OUTAGE_FILE_ENV
from recovery_lib.metrics.listener import MetricsListener, OneQuery
from recovery_lib.metrics.store import MetricsStore, now_ms
from recovery_lib.runtime.faults import mark_driver_process_group
from recovery_lib.runtime.heartbeat import Heartbeat, HeartbeatWriter, read_heartbeat
from recovery_lib.runtime.logs import configure_logging
from recovery_lib.runtime.supervisor import ProcessSpec, Supervisor
from recovery_lib.settings import get_settings

log = logging.getLogger(__name__)

HOST_MODULE = "recovery_lib.pipeline.host"
POLL_S = 0.2  # how often the host looks at what is wanted, and the runner at the answer
STOP_ACK_TIMEOUT_S = 60.0  # a query's stop: its running micro-batch is interrupted
QUERY_STOP_TIMEOUT_MS = 30_000  # Spark's own wait in a stop (default: forever), below the above
METRICS_DRAIN_S = 5.0  # a stopped query's last listener events, before its listeners go


# -- what the runner wants of a stage -------------------------------------------------------


@dataclass(frozen=True)
class Wanted:
    generation: int
    heartbeat: str  # the stage's lease file, which the host writes
    argv: list[str] | None  # the launch's, with --heartbeat; None: stopped
    cause: str | None = None  # why it was stopped

    @staticmethod
    def read(path: Path) -> Wanted | None:
        try:
            data = json.loads(path.read_text())
            return Wanted(
                int(data["generation"]), str(data["heartbeat"]), data.get("argv"), data.get("cause")
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(self.__dict__))


def generation_of(beat: Heartbeat | None) -> int | None:
    """The generation a stage's heartbeat acknowledges."""
    if beat is None or not beat.info:
        return None
    value = beat.info.get("generation")
    return int(value) if value is not None else None


# -- the runner's side ------------------------------------------------------------------------


class StageHost:
    """The host process, supervised like a job's (its lease, its process group)."""

    def __init__(self, home: Path, app_name: str) -> None:
        self.dir = Path(home) / "host"
        self.stages_dir = self.dir / "stages"
        self.stages_dir.mkdir(parents=True, exist_ok=True)
        spec = ProcessSpec(HOST_MODULE, args=["--dir", str(self.dir), "--app", app_name])
        self.process = Supervisor(spec, self.dir)
        # A query's stop may hold the loop up to Spark's stop timeout: no sooner than the
        # runner's own wait for a stop is a still loop a stuck host.
        self.loop_timeout_s = max(spec.heartbeat_timeout_s, STOP_ACK_TIMEOUT_S)
        self._retire_earlier_wants()

    def _retire_earlier_wants(self) -> None:
        """What an earlier runner wanted (a stage of another spec, a run that ended with its
        host dead) is stopped: a host started for this run must not run it."""
        for path in self.stages_dir.glob("*.json"):
            wanted = Wanted.read(path)
            if wanted is not None and wanted.argv is not None:
                Wanted(wanted.generation + 1, wanted.heartbeat, None, "a new runner").write(path)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def alive(self) -> bool:
        proc = self.process.proc
        return proc is not None and proc.poll() is None

    def gone_since(self, pid: int | None) -> bool:
        """Whether the host that ran as ``pid`` is gone (dead, or another one since)."""
        return pid is not None and (not self.alive() or self.pid != pid)

    def problem(self) -> str | None:
        """Why the host cannot run its stages (exit, no lease, its loop stuck while the lease's
        timer still beats, e.g. in a query's stop), or None."""
        if self.process.proc is None:
            return None
        cause = self.process.check()
        if cause is not None:
            return cause
        beat = self.process.heartbeat()
        loop_ms = (beat.info or {}).get("loop_ms") if beat is not None else None
        if loop_ms is not None and now_ms() - int(loop_ms) > self.loop_timeout_s * 1000:
            return f"its loop has not turned for {self.loop_timeout_s:.0f} s"
        return None

    def ensure_running(self) -> None:
        """Start the host if it is not running (the first start, or after it died)."""
        if self.alive() and self.problem() is None:
            return
        self.process.kill_group(signal.SIGKILL)  # a hung host: its stages restart with it
        self.process.start()

    def kill(self) -> None:
        self.process.kill_group(signal.SIGKILL)

    def stop(self) -> None:
        self.process.stop()


class HostedStage:
    """One stage of a shared placement, with the interface the pipeline runner uses of a
    stage's ``Supervisor``: start, check, is_ready, kill_group (stop the query as a failure:
    synchronous, so its checkpoint can be rewound next), stop."""

    def __init__(
        self,
        host: StageHost,
        spec: ProcessSpec,
        workdir: str | os.PathLike[str],
        store: MetricsStore | None = None,
        run_id: str | None = None,
    ) -> None:
        self.host = host
        self.spec = spec
        self.name = spec.name
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.heartbeat_path = self.workdir / "heartbeat.json"
        self.wanted_path = host.stages_dir / f"{spec.name}.json"
        self.store = store
        self.run_id = run_id
        # A runner may come again: never a generation that an earlier want or ack used.
        before = Wanted.read(self.wanted_path)
        self.generation = max(
            before.generation if before else 0,
            generation_of(read_heartbeat(self.heartbeat_path)) or 0,
        )
        self.started_ms = 0
        self.starts = 0
        self._down: str | None = "not started"
        self._stopped = False

    @property
    def pid(self) -> int | None:
        """The host's: every stage of a shared placement lives in one process."""
        return self.host.pid

    def _want(self, argv: list[str] | None, cause: str | None = None) -> None:
        self.generation += 1
        Wanted(self.generation, str(self.heartbeat_path), argv, cause).write(self.wanted_path)

    def event(self, kind: str, detail: dict[str, Any]) -> None:
        if self.store is not None and self.run_id is not None:
            self.store.event(self.run_id, kind, {"stage": self.name, **detail})

    def start(self) -> None:
        self._stopped = False
        self._down = None
        self._want(self.spec.argv(str(self.heartbeat_path)))
        self.started_ms = now_ms()
        self.host.ensure_running()
        self.event(
            "start" if not self.starts else "restart",
            {"pid": self.host.pid, "generation": self.generation},
        )
        self.starts += 1

    def heartbeat(self) -> Heartbeat | None:
        """The stage's heartbeat, if it is of the generation wanted now and of the host running
        now (a host that died wrote it otherwise)."""
        beat = read_heartbeat(self.heartbeat_path)
        if generation_of(beat) != self.generation:
            return None
        pid = self.host.pid
        return beat if beat is not None and pid is not None and beat.belongs_to(pid) else None

    def is_ready(self) -> bool:
        beat = self.heartbeat()
        return (
            self._down is None
            and beat is not None
            and beat.query_active
            and self.host.problem() is None
        )

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.is_ready():
            cause = self.check()
            if cause is not None:
                raise JobFailed(
                    f"stage {self.name} failed before it was ready ({cause}); see "
                    f"{self.host.dir / 'job.log'}"
                )
            if time.monotonic() > deadline:
                raise JobFailed(
                    f"stage {self.name} not ready within {timeout_s:.0f} s; see "
                    f"{self.host.dir / 'job.log'}"
                )
            time.sleep(POLL_S)

    def check(self) -> str | None:
        """Why the stage is down (its query failed or was stopped as a failure, the host died
        or missed its lease, no answer since the start), or None."""
        if self._stopped or self.starts == 0:
            return None
        if self._down is not None:
            return self._down
        host = self.host.problem()
        if host is not None:
            return f"host: {host}"
        beat = self.heartbeat()
        if beat is None:
            if now_ms() - self.started_ms > self.spec.startup_timeout_s * 1000:
                return f"no heartbeat within {self.spec.startup_timeout_s:.0f} s of start"
            return None
        failed = (beat.info or {}).get("failed")
        if failed:
            return f"query failed: {failed}"
        if now_ms() - beat.ts_ms > self.spec.heartbeat_timeout_s * 1000:
            return f"no heartbeat for {self.spec.heartbeat_timeout_s:.0f} s"
        return None

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        """The stage fails: its query is stopped (``sig`` names the failure; a query has no
        process of its own). Returns once the host acknowledged the stop, so the stage's
        checkpoint holds still; a host that cannot answer is killed with every stage."""
        if self.starts == 0 or self._down is not None:  # not running: nothing to stop
            return
        self._want(None, f"stopped ({signal.Signals(sig).name})")
        self._down = f"query stopped ({signal.Signals(sig).name})"
        if not self.host.alive():
            return
        if self.host.problem() is not None:
            self.host.kill()
            return
        if self._wait_acknowledged(STOP_ACK_TIMEOUT_S):
            self.event("stage_stopped", {"generation": self.generation})
        elif self.host.alive():
            log.error("stage %s: the host did not stop its query in time", self.name)
            self.host.kill()

    def _wait_acknowledged(self, timeout_s: float) -> bool:
        """Whether the host acknowledged the generation wanted now within ``timeout_s`` (False
        at once when the host is gone)."""
        deadline = time.monotonic() + timeout_s
        while not self._acknowledged():
            if not self.host.alive() or time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
        return True

    def _acknowledged(self) -> bool:
        beat = read_heartbeat(self.heartbeat_path)
        return generation_of(beat) == self.generation and not (beat and beat.query_active)

    def stop(self, timeout_s: float = 30.0) -> None:
        """The stage stops for good (the run ends; the host is stopped after its stages)."""
        if self._stopped:
            return
        self._stopped = True
        if not self.starts:
            return
        self._want(None, "stopped")  # even with no host now: a later host must not run it
        if self.host.alive() and not self._wait_acknowledged(timeout_s):
            log.warning(
                "stage %s: the host did not stop its query within %.0f s", self.name, timeout_s
            )


# -- the host process -----------------------------------------------------------------------


@dataclass
class RunningStage:
    generation: int
    writer: HeartbeatWriter
    listeners: list[Any] = field(default_factory=list)
    metrics: MetricsListener | None = None
    query: Any = None
    failed: str | None = None


class Host:
    """Runs what the runner wants: one streaming query per stage, in one Spark session."""

    def __init__(self, spark: Any, stages_dir: Path, outage_path: str | None) -> None:
        self.spark = spark
        self.stages_dir = stages_dir
        self.outage_path = outage_path
        self.running: dict[str, RunningStage] = {}
        self.stores: dict[str, MetricsStore] = {}

    def step(self) -> None:
        """One look at what is wanted and at the queries. A stage's trouble (a stop that did
        not take, a heartbeat file that cannot be written) is that stage's, never the host's:
        the other stages run on."""
        for path in sorted(self.stages_dir.glob("*.json")):
            wanted = Wanted.read(path)
            if wanted is not None:
                self._guarded(path.stem, lambda n=path.stem, w=wanted: self._follow(n, w))
        for name, stage in list(self.running.items()):
            self._guarded(name, lambda s=stage, n=name: self._watch(n, s))

    def _follow(self, name: str, wanted: Wanted) -> None:
        current = self.running.get(name)
        if current is not None and current.generation != wanted.generation:
            if not self._stop(name):
                return  # no acknowledgement: the runner's wait ends in killing the host
            current = None
        if current is None and wanted.argv is not None:
            self._start(name, wanted)
        elif current is None and wanted.argv is None:
            self._ack_stopped(wanted)

    def _watch(self, name: str, stage: RunningStage) -> None:
        if stage.failed is None and stage.query is not None and not stage.query.isActive:
            exc = stage.query.exception()
            stage.failed = str(exc if exc is not None else "the query stopped")[:2000]
            log.error("stage %s: query failed: %s", name, stage.failed)
            self._beat_failed(stage)

    def _guarded(self, name: str, action: Any) -> None:
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - one stage's trouble stays that stage's
            log.exception("stage %s: %s", name, exc)
            stage = self.running.get(name)
            if stage is not None and stage.failed is None:
                stage.failed = f"host: {exc}"[:2000]
                with contextlib.suppress(Exception):
                    self._beat_failed(stage)

    def _beat_failed(self, stage: RunningStage) -> None:
        stage.writer.query_active = False
        stage.writer.info = {"generation": stage.generation, "failed": stage.failed}
        stage.writer.beat()

    def _start(self, name: str, wanted: Wanted) -> None:
        """Start the stage's query as the job runtime would in a process of its own."""
        from recovery_lib.job.runner import (
            causal_truncation,
            create_topics,
            parse_options,
            start_built,
        )
        from recovery_lib.job.spec import load_job

        assert wanted.argv is not None
        argv = list(wanted.argv)
        interval = get_settings().standby_heartbeat_interval_s
        writer = HeartbeatWriter(wanted.heartbeat, interval, outage_path=self.outage_path)
        writer.info = {"generation": wanted.generation}
        stage = RunningStage(wanted.generation, writer)
        self.running[name] = stage
        try:
            writer.start()
            spec = load_job(argv[argv.index("--job") + 1])
            opts, launch = parse_options(spec, argv)
            opts.stream_name = name
            stage.listeners.append(OneQuery(name, writer))
            events = None
            if launch.metrics and launch.run_id:
                store = self._store(launch.metrics)
                run_id = launch.run_id
                stage.metrics = MetricsListener(store, run_id)
                stage.listeners.append(OneQuery(name, stage.metrics))

                def events(kind: str, detail: dict[str, Any]) -> None:
                    store.event(run_id, kind, detail)

            create_topics(opts)
            if opts.causal is not None:
                stage.listeners.append(OneQuery(name, causal_truncation(self.spark, opts)))
            for listener in stage.listeners:
                self.spark.streams.addListener(listener)
            built = spec.build(self.spark, opts)
            stage.query = start_built(built, opts, launch.own_log, events)
            log.info("stage %s: generation %d started", name, wanted.generation)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the stage fails, not the host
            stage.failed = f"could not start: {exc}"[:2000]
            log.exception("stage %s: could not start", name)
            self._beat_failed(stage)

    def _stop(self, name: str) -> bool:
        """Stop the stage's query; False if it still runs (its stop timed out or raised)."""
        stage = self.running[name]
        if stage.query is not None:
            try:
                stage.query.stop()
            except Exception:  # noqa: BLE001 - a failed query stops as it is
                log.warning("stage %s: stopping its query raised", name, exc_info=True)
            if stage.query.isActive:
                log.error("stage %s: its query still runs after the stop", name)
                return False
            if stage.metrics is not None:  # its last events (query_stopped) reach the store
                stage.metrics.wait_terminated(stage.query.id, METRICS_DRAIN_S)
        del self.running[name]
        for listener in stage.listeners:
            with contextlib.suppress(Exception):
                self.spark.streams.removeListener(listener)
        stage.writer.stop()
        log.info("stage %s: generation %d stopped", name, stage.generation)
        return True

    def _ack_stopped(self, wanted: Wanted) -> None:
        """Say in the stage's heartbeat that ``wanted`` (a stop) is done (once)."""
        if generation_of(read_heartbeat(wanted.heartbeat)) == wanted.generation:
            return
        writer = HeartbeatWriter(wanted.heartbeat, outage_path=self.outage_path)
        writer.info = {"generation": wanted.generation, "stopped": wanted.cause}
        writer.beat()

    def _store(self, path: str) -> MetricsStore:
        if path not in self.stores:
            self.stores[path] = MetricsStore(path).start_background_flush()
        return self.stores[path]

    def stop_all(self) -> None:
        for name in list(self.running):
            self._stop(name)
        for store in self.stores.values():
            store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Host a pipeline's stages in one Spark app.")
    parser.add_argument("--dir", required=True, help="the host's directory (<home>/host)")
    parser.add_argument("--app", default="pipeline", help="the Spark application's name")
    parser.add_argument("--heartbeat", required=True, help="the host's lease file")
    args = parser.parse_args(argv)
    configure_logging()
    mark_driver_process_group()
    outage = os.environ[OUTAGE_FILE_ENV] = f"{args.heartbeat}.outage"
    lease = HeartbeatWriter(args.heartbeat, get_settings().standby_heartbeat_interval_s)
    lease.start()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    from recovery_lib.spark.session import build_session

    runner = os.getppid()
    spark = build_session(args.app)
    spark.conf.set("spark.sql.streaming.stopTimeout", str(QUERY_STOP_TIMEOUT_MS))
    lease.query_active = True  # the session is up: the host serves
    lease.info = {"loop_ms": now_ms()}
    lease.beat()
    host = Host(spark, Path(args.dir) / "stages", outage)
    try:
        while not stopping.wait(POLL_S):
            if os.getppid() != runner:  # the runner died: a new one must not find us running
                log.error("the pipeline runner (pid %d) is gone: the host stops", runner)
                break
            host.step()
            lease.info = {"loop_ms": now_ms()}
    finally:
        host.stop_all()
        lease.stop()
        with contextlib.suppress(Exception):  # SIGTERM reached the JVM too
            spark.stop()


if __name__ == "__main__":
    main()
