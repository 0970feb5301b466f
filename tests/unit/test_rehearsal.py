"""A standby's rehearsal runs its job's own output path with the sink held: the options it
gets write nothing, fence nothing, commit no protocol record and inject no fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery_lib.ha.standby.rehearsal import REHEARSAL_QUERY_PREFIX, rehearsal_options
from recovery_lib.io.sinks.kafka_sink import SinkOptions
from recovery_lib.job.frames import sink_options
from recovery_lib.job.options import JobOptions


def _standby_opts(tmp_path: Path, mode: str = "dedup") -> JobOptions:
    return JobOptions(
        query="keyed_state",
        checkpoint_dir=str(tmp_path / "live"),
        sink_mode=mode,
        kafka={"bootstrap.servers": "127.0.0.1:9"},
        epoch=2,
        epoch_store=str(tmp_path / "epochs"),
        sink_options={"commitHook": "some.protocol:Hook", "recordHeaders": "some.protocol:H"},
    )


def test_the_rehearsal_sink_is_held_and_carries_no_hooks(tmp_path: Path) -> None:
    scratch = tmp_path / "rehearsal"
    opts = rehearsal_options(_standby_opts(tmp_path), scratch)
    sink = sink_options(opts)
    parsed = SinkOptions.parse(sink)

    assert parsed.held(), "the rehearsal's sink must write nothing"
    assert Path(parsed.hold_until).parent == scratch  # removed with the scratch copy
    assert not parsed.commit_hook and not parsed.write_guard
    assert "epochStore" not in sink and "commitHook" not in sink
    assert parsed.record_headers == "some.protocol:H"  # warmed like the real sink's
    assert opts.checkpoint_path == f"{scratch}/keyed_state"
    assert opts.query_name == f"{REHEARSAL_QUERY_PREFIX}keyed_state"
    assert opts.takeover_marker is None  # the source follows the primary's batches, not held


@pytest.mark.parametrize(
    ("mode", "rehearsed"),
    [("release", "release"), ("two_phase", "dedup"), ("at_least_once", "at_least_once")],
)
def test_a_mode_a_held_writer_refuses_rehearses_as_dedup(
    tmp_path: Path, mode: str, rehearsed: str
) -> None:
    opts = rehearsal_options(_standby_opts(tmp_path, mode), tmp_path / "rehearsal")
    assert SinkOptions.parse(sink_options(opts)).mode == rehearsed


def test_the_standbys_own_options_are_left_as_they_were(tmp_path: Path) -> None:
    live = _standby_opts(tmp_path)
    rehearsal_options(live, tmp_path / "rehearsal")
    assert live.epoch_store == str(tmp_path / "epochs")
    assert live.sink_options["commitHook"] == "some.protocol:Hook"
    assert live.takeover_marker is None


def test_a_rehearsal_that_ran_no_batch_is_tried_again_on_a_newer_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first copy is shipped after the primary's first batch, often before any input: a
    rehearsal then runs no batch and warms nothing, so the standby tries again."""
    import threading
    from types import SimpleNamespace

    from recovery_lib.ha.standby import process

    results = iter([{"input_rows": 0}, {"input_rows": 0}, {"input_rows": 120}])
    calls = []

    def fake_rehearse(spark, build, opts, standby_dir, output):  # noqa: ANN001, ANN202
        calls.append(standby_dir)
        return next(results)

    monkeypatch.setattr(process, "rehearse", fake_rehearse)
    monkeypatch.setattr(process, "latest_complete", lambda d, verify=False: "a copy")
    job = object.__new__(process.StandbyJob)
    job.dir, job.spark, job.build, job.opts, job.info = tmp_path, None, None, None, {}
    job.output = None
    job.cfg = SimpleNamespace(warm_every_s=0.01)
    job._stop = threading.Event()

    job._rehearse_when_shipped()

    assert len(calls) == 3
    assert job.info["rehearsal"] == {"input_rows": 120, "attempts": 3}
    assert job.info["ready"] is True
