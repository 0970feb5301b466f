"""The shared placement's bookkeeping without Spark: what the runner wants of a stage and how
the host's answer reads (pipeline/host.py), and the listener filter that keeps each hosted
stage's heartbeat and metrics to its own query."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from recovery_lib.metrics.listener import OneQuery
from recovery_lib.pipeline.host import HostedStage, StageHost, Wanted, generation_of
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
    for name, run in (("route", "r1"), ("convert", "c1")):
        only.onQueryStarted(SimpleNamespace(name=name, runId=run))
        only.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(name=name)))
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
