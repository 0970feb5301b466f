"""Pipelines file validation, the protocols' stage options, COOR's aligned cut and epoch
bookkeeping on checkpoint files (no Spark, no broker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery_lib.io.cut_policies import make_cut_policy
from recovery_lib.pipeline.runner import PipelineRun
from recovery_lib.pipeline.spec import load_pipelines
from recovery_lib.protocols.coordinated import (
    MarkerCut,
    epochs_completed,
    global_checkpoint,
    inject_epoch,
)
from recovery_lib.protocols.stage_log import CheckpointRecord, StageLog, register_epoch

Q1 = """
pipelines:
  - name: q1p
    protocol: {protocol}
    stages:
      - name: route
        job: jobs.pipelines.nexmark:ROUTE_BIDS_BY_AUCTION
        inputs: {{bids: nexmark.bids}}
      - name: convert
        job: q1
        inputs: {{bids: stage:route}}
"""

CYCLE = """
pipelines:
  - name: loop
    protocol: {protocol}
    {extra}
    stages:
      - name: a
        job: jobs.pipelines.nexmark:ROUTE_BIDS_BY_AUCTION
        inputs: {{bids: stage:b}}
      - name: b
        job: jobs.pipelines.nexmark:ROUTE_BIDS_BY_BIDDER
        inputs: {{bids: stage:a}}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipelines.yaml"
    path.write_text(text)
    return path


def test_the_repositorys_pipelines_file_is_valid():
    pipelines = load_pipelines()
    assert {"q1p", "q3p", "q8p", "q12p"} <= set(pipelines)
    assert {p.protocol for p in pipelines.values()} == {"coor", "unc", "cic"}


def test_a_pipeline_connects_stages_by_topics(tmp_path):
    spec = load_pipelines(write(tmp_path, Q1.format(protocol="unc")))["q1p"]
    convert = spec.stage("convert")
    assert spec.input_topics(convert) == {"bids": "q1p.route"}
    assert spec.output_topic(convert) == "q1p.convert"
    assert spec.feedback_topics() == set()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (Q1.format(protocol="unc").replace("stage:route", "stage:nope"), "names no stage"),
        (Q1.format(protocol="unc").replace("job: q1", "job: nosuchjob"), "no job 'nosuchjob'"),
        (Q1.format(protocol="unc").replace("{bids: stage:route}", "{asks: x}"), "not inputs"),
        (Q1.format(protocol="zzz"), "protocol"),
        (CYCLE.format(protocol="coor", extra=""), "aligned COOR deadlocks"),
    ],
)
def test_wrong_pipelines_say_what_to_fix(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        load_pipelines(write(tmp_path, text))


def test_a_cycle_is_found_and_coor_runs_it_only_unaligned(tmp_path):
    spec = load_pipelines(write(tmp_path, CYCLE.format(protocol="unc", extra="")))["loop"]
    assert spec.feedback_topics() == {"loop.a", "loop.b"}
    text = CYCLE.format(protocol="coor", extra="unaligned: [loop.a]")
    spec = load_pipelines(write(tmp_path, text))["loop"]
    assert spec.unaligned == ["loop.a"]


@pytest.mark.parametrize("protocol", ["coor", "unc", "cic"])
def test_each_protocol_names_its_hooks_in_the_stage_command(tmp_path, protocol):
    spec = load_pipelines(write(tmp_path, Q1.format(protocol=protocol)))["q1p"]
    run = PipelineRun(spec, tmp_path / "home", kafka={"bootstrap.servers": "127.0.0.1:9"})
    args = run.supervisors["convert"].spec.argv("heartbeat.json")  # the process's command line
    options = [args[i + 1] for i, a in enumerate(args) if a in ("--source-option", "--sink-option")]
    assert "commitHook=recovery_lib.protocols.hooks:StageCommitHook" in options
    assert f"protocol={protocol}" in options
    assert args[args.index("--sink-mode") + 1] == "release"
    assert "--input" in args and "bids=q1p.route" in args
    cut = next(o for o in options if o.startswith("cutPolicy="))
    assert cut.endswith({"coor": "MarkerCut", "unc": "free", "cic": "ForcedCut"}[protocol])
    if protocol == "cic":
        assert "recordHeaders=recovery_lib.protocols.hooks:StageHeaders" in options
        assert "protocolStageIndex=1" in options and "protocolStages=2" in options
    if protocol == "coor":
        assert "markerTopics=q1p.route" in options


def offset_log(checkpoint: Path, batch: int, ends: dict, committed: bool = True) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch)).write_text(f"v1\n{{}}\n{json.dumps(ends)}\n")
    if committed:
        (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")


def test_the_marker_cut_aligns_every_partition_on_the_next_epoch(tmp_path):
    protocol_dir, ck = tmp_path / "protocol", tmp_path / "ck"
    options = {
        "protocolDir": str(protocol_dir),
        "stageCheckpoint": str(ck),
        "markerTopics": "t",
    }
    policy = make_cut_policy("recovery_lib.protocols.coordinated:MarkerCut", options)
    assert isinstance(policy, MarkerCut)
    start = {"t": {"0": 0, "1": 0}}
    available = {"t": {"0": 100, "1": 100}}
    # No epoch yet: free.
    assert policy.cut(start, available, None) == available
    inject_epoch(protocol_dir, {"t": {0: 40, 1: 70}}, 1)
    inject_epoch(protocol_dir, {"t": {0: 90, 1: 95}}, 2)
    assert policy.cut(start, available, None) == {"t": {"0": 40, "1": 70}}
    # Partition 0 reached epoch 1, partition 1 did not (an admission limit cut it short):
    # partition 0 holds, partition 1 goes on to its marker.
    offset_log(ck, 0, {"t": {"0": 40, "1": 50}})
    assert policy.cut({"t": {"0": 40, "1": 50}}, available, None) == {"t": {"0": 40, "1": 70}}
    offset_log(ck, 1, {"t": {"0": 40, "1": 70}})
    assert epochs_completed(protocol_dir, ["t"], {"t": {"0": 40, "1": 70}}, []) == [1]
    assert policy.cut({"t": {"0": 40, "1": 70}}, available, None) == {"t": {"0": 90, "1": 95}}
    with pytest.raises(Exception, match="protocolDir"):
        make_cut_policy("recovery_lib.protocols.coordinated:MarkerCut", {})


def test_the_global_checkpoint_is_the_newest_epoch_every_stage_committed(tmp_path):
    protocol_dir = tmp_path / "protocol"
    cks = {s: tmp_path / s for s in ("a", "b")}
    for stage, epochs in (("a", {0: [1], 3: [2], 5: [3]}), ("b", {1: [1], 4: [2]})):
        for batch in range(6):
            offset_log(cks[stage], batch, {"x": {"0": batch}}, committed=batch != 5)
            StageLog(protocol_dir, stage).write(
                CheckpointRecord(batch, {}, 0, epochs=epochs.get(batch, []))
            )
    # a committed epochs 1, 2 (batch 5 with epoch 3 never reached the commit log); b 1, 2.
    assert global_checkpoint(protocol_dir, cks) == (2, {"a": 3, "b": 4})
    register_epoch(protocol_dir, "y", 1, {0: 5})
    register_epoch(protocol_dir, "y", 1, {0: 9})  # a re-run registers again: the first stands
    assert epochs_completed(protocol_dir, ["y"], {"y": {"0": 5}}, []) == [1]


def hook(tmp_path: Path, protocol: str, monkeypatch, ends: dict, **extra):
    from recovery_lib.protocols import hooks
    from recovery_lib.protocols.base import protocol as protocol_named

    monkeypatch.setattr(hooks, "topic_ends", lambda kafka, topic: dict(ends))
    chosen = protocol_named(protocol)
    options = {
        "protocol": protocol,
        "checkpointOnEpochs": str(chosen.coordinated).lower(),
        "keepClocks": str(chosen.keeps_clocks).lower(),
        "protocolDir": str(tmp_path / "protocol"),
        "protocolStage": "s",
        "stageCheckpoint": str(tmp_path / "ck"),
        "topic": "out",
        "kafka.bootstrap.servers": "127.0.0.1:9",
        **extra,
    }
    return hooks.StageCommitHook(options)


def test_the_commit_hook_forwards_each_completed_epoch_once(tmp_path, monkeypatch):
    protocol_dir, ck = tmp_path / "protocol", tmp_path / "ck"
    out_ends = {0: 10, 1: 12}
    stage_hook = hook(tmp_path, "coor", monkeypatch, out_ends, markerTopics="t")
    inject_epoch(protocol_dir, {"t": {0: 40}}, 1)
    offset_log(ck, 0, {"t": {"0": 40}}, committed=False)
    stage_hook.committed(0)
    offset_log(ck, 0, {"t": {"0": 40}})
    record = StageLog(protocol_dir, "s").read(0)
    assert record.epochs == [1] and record.checkpoint and record.sent == {"out": {"0": 10, "1": 12}}
    # The output topic's epoch 1 is where the stage's outputs stood after that batch.
    assert epochs_completed(protocol_dir, ["out"], {"out": {"0": 10, "1": 12}}, []) == [1]
    # Epoch 2 lands where batch 0 ended (no input since): batch 1 records it for batch 0.
    inject_epoch(protocol_dir, {"t": {0: 40}}, 2)
    inject_epoch(protocol_dir, {"t": {0: 55}}, 3)
    offset_log(ck, 1, {"t": {"0": 55}})
    stage_hook.committed(1)
    assert StageLog(protocol_dir, "s").read(0).epochs == [1, 2]
    assert StageLog(protocol_dir, "s").read(1).epochs == [3]
    assert global_checkpoint(protocol_dir, {"s": ck}) == (3, {"s": 1})
    # A batch between markers is a commit but no checkpoint of COOR.
    offset_log(ck, 2, {"t": {"0": 60}})
    stage_hook.committed(2)
    assert not StageLog(protocol_dir, "s").read(2).checkpoint


def test_unc_keeps_one_checkpoint_per_interval(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    stage_hook = hook(tmp_path, "unc", monkeypatch, {0: 1}, checkpointIntervalMs="60000")
    for batch in range(3):
        offset_log(ck, batch, {"t": {"0": batch}})
        stage_hook.committed(batch)
    records = StageLog(tmp_path / "protocol", "s").records()
    assert [r.checkpoint for r in records] == [True, False, False]


def test_the_cic_hook_continues_the_cut_policys_clocks(tmp_path, monkeypatch):
    from recovery_lib.protocols.communication_induced import (
        BatchClocks,
        Clocks,
        _state_path,
        clocks_after,
    )
    from recovery_lib.protocols.stage_log import write_atomic

    protocol_dir, ck = tmp_path / "protocol", tmp_path / "ck"
    stage_hook = hook(
        tmp_path, "cic", monkeypatch, {0: 5}, protocolReceivers="1", checkpointIntervalMs="60000"
    )
    with pytest.raises(RuntimeError, match="no CIC clocks"):
        offset_log(ck, 0, {"t": {"0": 1}})
        stage_hook.committed(0)
    for batch, forced in ((0, False), (1, True)):
        write_atomic(
            _state_path(protocol_dir, "s", batch),
            BatchClocks(Clocks.initial(0, 2), forced=forced).to_json(),
        )
    stage_hook.committed(0)  # the first batch is a checkpoint (none before it)
    after = clocks_after(StageLog(protocol_dir, "s"), 0, 0, 2)
    assert after.ckpt[0] == 2 and after.sent_to == [False, False]
    offset_log(ck, 1, {"t": {"0": 2}})
    monkeypatch.setattr("recovery_lib.protocols.hooks.topic_ends", lambda k, t: {0: 9})
    stage_hook.committed(1)  # forced by its cut policy, within the interval
    record = StageLog(protocol_dir, "s").read(1)
    assert record.forced and record.checkpoint


def test_pipeline_gc_keeps_what_the_recovery_line_can_need(tmp_path):
    from recovery_lib.pipeline.gc import pipeline_gc
    from recovery_lib.pipeline.runner import needed_from

    spec = load_pipelines(write(tmp_path, Q1.format(protocol="unc")))["q1p"]
    home = tmp_path / "home"
    run = PipelineRun(spec, home, kafka={"bootstrap.servers": "127.0.0.1:9"})
    route, convert = run.view.checkpoints["route"], run.view.checkpoints["convert"]
    for batch in range(20):
        # route read nexmark.bids up to 10 * (batch + 1) and wrote q1p.route up to that too;
        # convert lags two batches behind on q1p.route.
        offset_log(route, batch, {"nexmark.bids": {"0": 10 * (batch + 1)}})
        offset_log(convert, batch, {"q1p.route": {"0": 10 * (batch - 1)}})
        StageLog(run.view.protocol_dir, "route").write(
            CheckpointRecord(batch, {"q1p.route": {"0": 10 * (batch + 1)}}, 0)
        )
        StageLog(run.view.protocol_dir, "convert").write(
            CheckpointRecord(batch, {"q1p.convert": {"0": batch}}, 0)
        )
    assert needed_from(run) == {"route": 19, "convert": 19}
    report = pipeline_gc(spec, home, 5, dry_run=True, kafka={"bootstrap.servers": "127.0.0.1:9"})
    assert report["stages"]["convert"]["plan"]["oldest_kept_batch"] == 15
    # convert's oldest kept batch (15) starts where batch 14 ended on q1p.route: 130.
    assert report["in_flight_before"] == {"q1p.route": {"0": 130}}
    assert (route / "offsets" / "3").exists()  # a dry run
