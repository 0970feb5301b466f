"""The typed launch (runtime/launch.py) and the recovery mode registry (recovery_lib/modes):
argv is the launch's exact image, derived launches change only what they say, and every mode
answers for itself (what it accepts, what its processes run, where its checkpoints live)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recovery_lib.job.spec import resolve_job
from recovery_lib.modes import (
    MODES,
    ModeRefused,
    ModeRequest,
    UnknownMode,
    get_mode,
    job_entry,
    mode_names,
    outage_ladder,
)
from recovery_lib.runtime.launch import JobLaunch, ProcessMode, Role, StandbyRole

names = st.text("abcdefgh_", min_size=1, max_size=8)
values = st.text("abc123./:-_", min_size=0, max_size=12)
pairs = st.dictionaries(names, values, max_size=3)


@st.composite
def launches(draw: st.DrawFn) -> JobLaunch:
    mode = draw(st.sampled_from(list(ProcessMode)))
    standby = draw(st.none() | st.builds(StandbyRole, names, names, names))
    causal_options = {}
    if mode.causal and draw(st.booleans()):
        causal_options = {"streamSource": "m:a", **draw(pairs)}
    return JobLaunch(
        job=draw(names),
        prefix=draw(st.none() | names),
        inputs=draw(pairs),
        params=draw(pairs),
        partitions=draw(st.none() | st.integers(1, 64)),
        checkpoints=draw(names),
        output_topic=draw(st.none() | names),
        sink_mode=draw(st.sampled_from(["dedup", "release", "two_phase", "at_least_once"])),
        sink_options=draw(pairs),
        table_sink=draw(st.none() | st.sampled_from(["delta:/t/out", "iceberg:/lake#ns.t"])),
        source_options=draw(pairs),
        max_records=draw(st.none() | st.integers(1, 10**6)),
        trigger_interval=draw(st.sampled_from(["0 seconds", "2 seconds"])),
        available_now=draw(st.booleans()),
        ending_offsets=draw(st.none() | st.just('{"t": {"0": 4}}')),
        follow_log=draw(st.none() | names),
        causal=mode.causal,
        causal_options=causal_options,
        own_log=mode.own_log,
        metrics=draw(st.none() | names),
        run_id=draw(st.none() | names),
        heartbeat=draw(st.none() | names),
        task_retries=draw(st.integers(1, 4)),
        epoch_store=draw(names) if standby is not None else draw(st.none() | names),
        standby=standby,
    )


@given(launches())
def test_argv_is_the_launchs_exact_image(launch: JobLaunch) -> None:
    assert JobLaunch.from_argv(launch.to_argv()) == launch


def test_derived_launches_change_only_what_they_say() -> None:
    base = JobLaunch("m:JOB", name="q3", prefix="p", params={"a": "1"}, causal=True)
    shared = {"streamSource": "m:a"}
    replica = base.as_replica("/r/a", "out.replicas", {"cutPolicy": "x"}, {"g": "1"}, shared)
    assert (replica.checkpoints, replica.output_topic, replica.sink_mode) == (
        "/r/a", "out.replicas", "release"
    )  # fmt: skip
    assert replica.params == base.params and replica.causal and replica.causal_options == shared
    assert base.replace(causal=False).as_replica("/r", "o", {}, {}, shared).causal_options == {}
    standby = base.as_standby("/n1/ck", "/epochs", StandbyRole("/n0/ck/q3", "/n0/hb", "/n1/ship"))
    assert standby.role is Role.STANDBY and "--role" in standby.to_argv()
    assert standby.as_primary("/n1/ck", "/epochs").role is Role.PRIMARY
    reference = base.as_reference("/ref", "out.reference")
    assert reference.process_mode is ProcessMode.NATIVE and reference.sink_mode == "dedup"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"causal": True, "own_log": True}, "not both"),
        ({"causal_options": {"streamSource": "m:a"}}, "is for --mode causal"),
        ({"causal": True, "causal_options": {"x": "1"}}, "needs streamSource"),
        ({"standby": StandbyRole("a", "b", "c")}, "needs an epoch store"),
    ],
)
def test_a_launch_that_cannot_run_says_what_to_change(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JobLaunch("m:JOB", **changes)


def test_every_mode_is_registered_once_and_found_by_name() -> None:
    assert mode_names() == ("native", "causal", "standby", "cec", "kazoo", "liverobin")
    assert mode_names(replicated=True) == ("kazoo", "liverobin")
    assert [m.name for m in outage_ladder()] == ["native", "standby", "kazoo", "liverobin"]
    with pytest.raises(UnknownMode, match="available: native, causal"):
        get_mode("zookeeper")
    assert get_mode("native").with_causal_logging(True) == "causal"
    assert get_mode("kazoo").kill_run == "kazoo-leader" and get_mode("liverobin").leaderless


def test_a_mode_chooses_what_its_processes_run() -> None:
    prices, q3 = resolve_job("prices"), resolve_job("q3")
    chosen = {
        name: (mode.process_mode(ModeRequest(prices)), mode.process_mode(ModeRequest(q3)))
        for name, mode in MODES.items()
    }
    assert chosen == {
        "native": (ProcessMode.NATIVE, ProcessMode.NATIVE),
        "causal": (ProcessMode.CAUSAL, ProcessMode.CAUSAL),
        "standby": (ProcessMode.CAUSAL, ProcessMode.NATIVE),  # a takeover re-executes
        "cec": (ProcessMode.CEC, ProcessMode.CEC),
        "kazoo": (ProcessMode.CAUSAL, ProcessMode.NATIVE),  # replicas share determinants
        "liverobin": (ProcessMode.CAUSAL, ProcessMode.NATIVE),
    }
    launch = get_mode("standby").launch(JobLaunch("m:JOB"), ModeRequest(prices))
    assert launch.causal and not launch.own_log


def test_refusals_name_the_fix_where_the_request_was_made() -> None:
    q3 = resolve_job("q3")
    with pytest.raises(ModeRefused, match="use --sink release"):
        get_mode("kazoo").validate(ModeRequest(q3, sink_mode="dedup"))
    with pytest.raises(ModeRefused, match="job q3r: .*set sink_mode: release"):
        get_mode("kazoo").validate(ModeRequest(q3, sink_mode="dedup", surface=job_entry("q3r")))
    with pytest.raises(ModeRefused, match="torn-write .* needs --mode cec"):
        get_mode("native").validate(ModeRequest(q3, failures=("torn-write",)))
    get_mode("cec").validate(ModeRequest(q3, failures=("torn-write",)))
    with pytest.raises(ModeRefused, match="executor-kill is not a standby experiment"):
        get_mode("standby").validate(ModeRequest(q3, failures=("executor-kill",), cluster=True))


def test_each_mode_says_where_a_configured_jobs_checkpoints_live(tmp_path: Path) -> None:
    roots = {name: mode.checkpoint_roots(tmp_path) for name, mode in MODES.items()}
    assert roots["native"] == roots["causal"] == roots["cec"] == [tmp_path / "checkpoints"]
    assert roots["standby"] == [tmp_path / "supervisor" / "primary" / "ck"]
    assert roots["kazoo"] == [
        tmp_path / "supervisor" / "replicas" / r / "checkpoints" for r in ("a", "b")
    ]
    assert get_mode("standby").standby_dir(tmp_path) == tmp_path / "supervisor/standby/ship"
    assert get_mode("native").standby_dir(tmp_path) is None


def test_the_standby_mode_launches_its_pairs_nodes(tmp_path: Path) -> None:
    """The pair asks its mode for each node's launch (issue 58 item 3): the primary under
    fencing, the standby watching it; a pair made without its mode refuses to start one."""
    from recovery_lib.ha.standby.pair import StandbyPair
    from recovery_lib.runtime.launch import LaunchRefused
    from recovery_lib.runtime.supervisor import ProcessSpec

    mode = get_mode("standby")
    base = JobLaunch("m:JOB", name="q3")
    primary = mode.node_launch(base, "ck0", "epochs", None)
    assert (primary.checkpoints, primary.epoch_store, primary.standby) == ("ck0", "epochs", None)
    watch = StandbyRole(primary_checkpoint="ck0/q3", primary_heartbeat="hb", standby_dir="ship")
    standby = mode.node_launch(base, "ck1", "epochs", watch)
    assert (standby.checkpoints, standby.standby) == ("ck1", watch)

    spec = ProcessSpec.for_job(base)
    pair = mode.supervisor(spec, ModeRequest(resolve_job("q3")), tmp_path, None, None)
    assert pair.node_launch == mode.node_launch
    with pytest.raises(LaunchRefused, match="launched by its mode"):
        StandbyPair(spec, tmp_path / "bare").start()
