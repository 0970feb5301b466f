"""The shared placement's bookkeeping without Spark: what the runner wants of a stage and how
the host's answer reads (pipeline/host.py), and the listener filter that keeps each hosted
stage's heartbeat and metrics to its own query."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

from recovery_lib.metrics.listener import OneQuery
from recovery_lib.pipeline.host import Host, HostedStage, StageHost, Wanted, generation_of
from recovery_lib.pipeline.runner import PipelineRun
from recovery_lib.pipeline.spec import PipelineSpec, StageSpec
from recovery_lib.runtime.heartbeat import HeartbeatWriter, read_heartbeat
from recovery_lib.runtime.launch import JobLaunch
from recovery_lib.runtime.supervisor import ProcessSpec


class Recorder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def onQueryStarted(self, event) -> None:  # noqa: ANN001, N802
        self.seen.append(f"started {event.name}")

    def onQueryProgress(self, event) -> None:  # noqa: ANN001, N802
        self.seen.append(f"progress {event.progress.name}")

    def onQueryIdle(self, event) -> None:  # noqa: ANN001, N802
        self.seen.append(f"idle {event.runId}")

    def onQueryTerminated(self, event) -> None:  # noqa: ANN001, N802
        self.seen.append(f"terminated {event.runId}")


def test_one_query_passes_on_its_own_query_s_events_only():
    inner = Recorder()
    only = OneQuery("route", inner)
    # A late progress event of an earlier query of the same name is not this query's.
    only.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(name="route", runId="r0")))
    for name, run in (("route", "r1"), ("convert", "c1")):
        only.onQueryStarted(SimpleNamespace(name=name, runId=run))
        only.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(name=name, runId=run)))
        only.onQueryIdle(SimpleNamespace(runId=run))
        only.onQueryTerminated(SimpleNamespace(runId=run))
    assert inner.seen == ["started route", "progress route", "idle r1", "terminated r1"]


def test_wanted_round_trips_and_a_new_runner_continues_the_generations(tmp_path):
    path = tmp_path / "stages" / "route.json"
    Wanted(3, "hb.json", ["--job", "q1"], None).write(path)
    assert Wanted.read(path) == Wanted(3, "hb.json", ["--job", "q1"], None)
    assert Wanted.read(tmp_path / "missing.json") is None
    stage = _stage(tmp_path)
    assert stage.generation == 3  # the next start is generation 4, never an old one again


def _stage(home: Path) -> HostedStage:
    host = StageHost(home, "test")
    launch = JobLaunch(job="q1", name="route", checkpoints=str(home / "ck"))
    (home / "host" / "stages").mkdir(parents=True, exist_ok=True)
    if not (home / "host" / "stages" / "route.json").exists():
        Wanted(3, "x", None).write(home / "host" / "stages" / "route.json")
    return HostedStage(host, ProcessSpec.for_job(launch), home / "stages" / "route")


def test_a_stage_reads_only_its_own_generation_s_heartbeat(tmp_path, monkeypatch):
    stage = _stage(tmp_path)
    monkeypatch.setattr(StageHost, "pid", property(lambda self: os.getpid()))  # the beats'
    monkeypatch.setattr(StageHost, "ensure_running", lambda self: None)
    monkeypatch.setattr(StageHost, "problem", lambda self: None)
    stage.start()
    wanted = Wanted.read(stage.wanted_path)
    assert wanted is not None and wanted.generation == stage.generation == 4
    assert wanted.argv is not None and "--heartbeat" in wanted.argv
    assert stage.check() is None and not stage.is_ready()  # starting: no answer yet

    def beat(generation: int, active: bool, **info: object) -> None:
        writer = HeartbeatWriter(stage.heartbeat_path)
        writer.query_active = active
        writer.info = {"generation": generation, **info}
        writer.beat()

    beat(3, True)  # the generation before: not this start's query
    assert not stage.is_ready()
    beat(4, True)
    assert stage.is_ready() and stage.check() is None
    assert generation_of(read_heartbeat(stage.heartbeat_path)) == 4
    beat(4, False, failed="boom")
    assert stage.check() == "query failed: boom"
    # The same generation's beat written by a host that has died since is no answer.
    monkeypatch.setattr(StageHost, "pid", property(lambda self: os.getpid() + 1))
    beat(4, True)
    assert stage.heartbeat() is None and not stage.is_ready()


def test_a_killed_stage_is_down_until_started_again(tmp_path, monkeypatch):
    stage = _stage(tmp_path)
    monkeypatch.setattr(StageHost, "ensure_running", lambda self: None)
    monkeypatch.setattr(StageHost, "problem", lambda self: None)
    monkeypatch.setattr(StageHost, "alive", lambda self: False)  # no host to wait for
    stage.start()
    stage.kill_group(9)
    wanted = Wanted.read(stage.wanted_path)
    assert wanted is not None and wanted.argv is None and "SIGKILL" in (wanted.cause or "")
    assert stage.check() == "query stopped (SIGKILL)" and not stage.is_ready()
    stage.start()
    assert stage.check() is None and stage.generation == 6


def test_a_new_runner_retires_what_an_earlier_one_wanted_and_never_reuses_a_generation(
    tmp_path,
):
    stages = tmp_path / "host" / "stages"
    Wanted(7, str(tmp_path / "old.hb"), ["--job", "q1"]).write(stages / "renamed.json")
    StageHost(tmp_path, "test")
    left = Wanted.read(stages / "renamed.json")
    assert left is not None and left.argv is None and left.generation == 8  # not run again
    # A stage whose ack is newer than its wanted file (the file was lost) starts above both.
    Wanted(2, "x", None).write(stages / "route.json")
    writer = HeartbeatWriter(tmp_path / "stages" / "route" / "heartbeat.json")
    writer.info = {"generation": 5}
    writer.beat()
    assert _stage(tmp_path).generation == 5


def test_a_stage_stopped_for_good_is_retired_even_with_no_host(tmp_path, monkeypatch):
    stage = _stage(tmp_path)
    monkeypatch.setattr(StageHost, "ensure_running", lambda self: None)
    monkeypatch.setattr(StageHost, "alive", lambda self: False)
    stage.start()
    stage.stop()
    wanted = Wanted.read(stage.wanted_path)
    assert wanted is not None and wanted.argv is None  # a later host must not run it


def test_a_host_whose_loop_stands_still_has_a_problem_though_its_lease_beats(tmp_path, monkeypatch):
    host = StageHost(tmp_path, "test")
    host.process.proc = SimpleNamespace(pid=os.getpid(), poll=lambda: None)
    monkeypatch.setattr(host.process, "check", lambda: None)
    lease = HeartbeatWriter(host.process.heartbeat_path)
    lease.info = {"loop_ms": int(time.time() * 1000)}
    lease.beat()
    assert host.problem() is None
    lease.info = {"loop_ms": int((time.time() - host.loop_timeout_s - 1) * 1000)}
    lease.beat()
    assert "loop has not turned" in (host.problem() or "")
    assert not host.gone_since(os.getpid()) and host.gone_since(os.getpid() + 1)
    assert not host.gone_since(None)


# -- the host's loop, with stand-ins for Spark's queries -------------------------------------


class FakeQuery:
    def __init__(self, stops: bool = True, fails: str | None = None) -> None:
        self.isActive = True
        self.id = "q"
        self._stops = stops
        self._fails = fails

    def stop(self) -> None:
        if not self._stops:
            raise RuntimeError("stop timed out")
        self.isActive = False

    def exception(self) -> str | None:
        return self._fails


class FakeHost(Host):
    """Host.step as it runs, with _start making a fake query instead of building a job."""

    def __init__(self, stages_dir: Path, queries: dict[str, FakeQuery]) -> None:
        super().__init__(SimpleNamespace(streams=None), stages_dir, None)
        self.queries = queries
        self.started: list[tuple[str, int]] = []

    def _start(self, name: str, wanted: Wanted) -> None:
        from recovery_lib.pipeline.host import RunningStage

        writer = HeartbeatWriter(wanted.heartbeat)
        writer.info = {"generation": wanted.generation}
        writer.query_active = True
        writer.beat()
        if name == "broken":
            raise OSError("disk full")
        self.running[name] = RunningStage(wanted.generation, writer, query=self.queries[name])
        self.started.append((name, wanted.generation))


def _want(tmp_path: Path, name: str, generation: int, run: bool) -> Path:
    heartbeat = tmp_path / f"{name}.hb"
    Wanted(generation, str(heartbeat), ["--job", "q1"] if run else None).write(
        tmp_path / "stages" / f"{name}.json"
    )
    return heartbeat


def test_the_host_stops_acknowledges_and_restarts_a_stage_by_generation(tmp_path):
    queries = {"a": FakeQuery(), "b": FakeQuery()}
    host = FakeHost(tmp_path / "stages", queries)
    hb_a = _want(tmp_path, "a", 1, run=True)
    _want(tmp_path, "b", 1, run=True)
    host.step()
    assert host.started == [("a", 1), ("b", 1)]
    _want(tmp_path, "a", 2, run=False)  # the runner stops a (a failure): b runs on
    host.step()
    beat = read_heartbeat(hb_a)
    assert generation_of(beat) == 2 and beat is not None and not beat.query_active
    assert not queries["a"].isActive and queries["b"].isActive and "a" not in host.running
    queries["a"] = FakeQuery()
    _want(tmp_path, "a", 3, run=True)
    host.step()
    assert host.started[-1] == ("a", 3) and set(host.running) == {"a", "b"}


def test_a_stop_that_does_not_take_is_not_acknowledged(tmp_path):
    queries = {"a": FakeQuery(stops=False)}
    host = FakeHost(tmp_path / "stages", queries)
    hb = _want(tmp_path, "a", 1, run=True)
    host.step()
    _want(tmp_path, "a", 2, run=False)
    host.step()
    assert generation_of(read_heartbeat(hb)) == 1  # the runner waits, then kills the host
    assert "a" in host.running


def test_a_failed_query_and_a_stage_that_cannot_start_fail_alone(tmp_path):
    queries = {"a": FakeQuery(fails="boom"), "b": FakeQuery()}
    host = FakeHost(tmp_path / "stages", queries)
    hb_a = _want(tmp_path, "a", 1, run=True)
    _want(tmp_path, "b", 1, run=True)
    _want(tmp_path, "broken", 1, run=True)
    host.step()  # broken's start raised: logged, the loop went on to the others
    queries["a"].isActive = False
    host.step()
    beat = read_heartbeat(hb_a)
    assert beat is not None and beat.info is not None and beat.info["failed"] == "boom"
    assert queries["b"].isActive and ("b", 1) in host.started


def test_a_host_dying_in_a_recovery_fails_every_stage_it_ran(tmp_path, monkeypatch):
    """UNC: route's query failed; stopping it found the host dead. The plan must cover every
    stage (the others died with the host), not route alone."""
    stages = [
        StageSpec(name="route", job="jobs.pipelines.nexmark:ROUTE_BIDS_BY_AUCTION",
                  inputs={"bids": "pl.bids"}),
        StageSpec(name="convert", job="q1", inputs={"bids": "stage:route"}),
    ]  # fmt: skip
    spec = PipelineSpec(name="pl", protocol="unc", stages=stages, placement="shared")
    run = PipelineRun(spec, tmp_path, kafka={"bootstrap.servers": "127.0.0.1:9"})
    assert run.host is not None
    monkeypatch.setattr(StageHost, "pid", property(lambda self: 4242))  # the host that ran
    monkeypatch.setattr(StageHost, "alive", lambda self: False)
    monkeypatch.setattr(StageHost, "ensure_running", lambda self: None)
    planned: list[set[str]] = []
    monkeypatch.setattr(
        run.protocol, "plan", lambda view, failed: planned.append(set(failed)) or _no_plan()
    )
    for sup in run.supervisors.values():
        sup.starts = 1
        sup._down = None
    run.recover({"route": "query failed: boom"})
    assert planned == [{s.name for s in spec.stages}]
    assert run.recoveries[-1].causes["convert"].startswith("host: died")


def _no_plan():  # noqa: ANN202
    return SimpleNamespace(restart=set(), rewind={}, local=True, detail={})
