"""Experiment settings: several failure kinds taking turns, jitter, and the errors that say
what to fix (no Spark)."""

from __future__ import annotations

import pytest

from recovery_lib.experiment.runner import ExperimentConfig


def test_several_kinds_take_turns():
    cfg = ExperimentConfig(fail="driver-kill, mid-write,task-retry", repeat=4, duration_s=200)
    cfg.validate()
    assert cfg.kinds == ("driver-kill", "mid-write", "task-retry")
    assert ExperimentConfig(fail=None).kinds == ()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"fail": "driver-kill,meteor"}, "unknown failure kind 'meteor'"),
        ({"fail": "mid-write,executor-kill"}, "add --cluster"),
        ({"jitter_s": 25.0, "every_s": 20.0}, "--jitter"),
        ({"repeat": 3, "every_s": 20.0, "jitter_s": 15.0, "duration_s": 70}, "do not fit"),
    ],
)
def test_bad_settings_are_refused_with_the_fix(changes, message):
    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**{"duration_s": 100, **changes}).validate()
