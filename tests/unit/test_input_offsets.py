"""Each input of a job takes its own topic's offsets from options shared by all its inputs
(the poison search probes a two-input job, q3, with offsets of both topics)."""

from __future__ import annotations

import json

from recovery_lib.io.offsets import parse_starting_offsets
from recovery_lib.job.frames import offsets_of


def test_an_input_takes_its_own_topics_offsets() -> None:
    both = json.dumps({"p.persons": {"0": 7158, "1": 7160}, "p.auctions": {"0": 19928}})
    persons = offsets_of(both, "p.persons")
    assert json.loads(persons) == {"p.persons": {"0": 7158, "1": 7160}}
    # What the persons source would have refused whole, it now accepts.
    assert parse_starting_offsets(persons, ["p.persons"]) == {"p.persons": {"0": 7158, "1": 7160}}
    assert offsets_of("earliest", "p.persons") == "earliest"
