"""Every job's contract catches every mutant of a real failure-free run's output and passes
every control (verify/mutation.py): the oracle can say no for each job, and does not say no
to runs some failure-free run could have produced.

The reference outputs are real runs of the jobs, recorded once into
tests/fixtures/contract_references/ (how: its README)."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.job.spec import JobSpec, resolve_job
from recovery_lib.nexmark.config import GeneratorConfig
from recovery_lib.verify.inputs import InputRecord, InputView
from recovery_lib.verify.mutation import mutate
from recovery_lib.verify.schema import OutputSchema

FIXTURES = Path(__file__).parent.parent / "fixtures" / "contract_references"
JOBS = sorted(p.name.removesuffix(".json.gz") for p in FIXTURES.glob("*.json.gz"))


def load(name: str) -> tuple[JobSpec, list[SinkRecord], InputView | None]:
    with gzip.open(FIXTURES / f"{name}.json.gz") as f:
        data: dict[str, Any] = json.loads(f.read())
    spec = resolve_job(data["job"])
    # The output schema the recorded run's writer recorded (README: output_schema).
    recorded = data.get("output_schema")
    schema = OutputSchema.from_json(json.dumps(recorded)) if recorded else None
    spec = dataclasses.replace(spec, contract=spec.contract.with_schema(schema))
    outputs = [
        SinkRecord(
            rid, epoch, key.encode() if key is not None else None, value.encode(), "t", p, o, ()
        )
        for rid, epoch, p, o, key, value in data["outputs"]
    ]
    records = {
        input_name: [
            InputRecord(p, o, base64.b64decode(k) if k is not None else None, v.encode())
            for p, o, k, v in rows
        ]
        for input_name, rows in data["inputs"].items()
    }
    generator = data.get("generator")
    events = generator.pop("events", None) if generator else None
    inputs = InputView(
        {name: name for name in records},
        generator=GeneratorConfig(**generator) if generator else None,
        events=events,
        reader=records.__getitem__,
    )
    return spec, outputs, inputs


def test_the_fixtures_cover_every_job_shape():
    assert {"q1", "q12", "lastbids", "prices", "hotbids", "avgprice"} <= set(JOBS)


def test_every_job_of_the_repository_has_a_recorded_run():
    """A job added to jobs/ without a fixture would have a contract nobody mutation-tested."""
    repo = FIXTURES.parent.parent.parent / "jobs"
    modules = [p for p in (*repo.glob("*.py"), *repo.glob("nexmark/q*.py"))]
    with_spec = sorted(
        p.stem for p in modules if "JOB = " in p.read_text() or "JOB: JobSpec" in p.read_text()
    )
    assert with_spec, "no job modules found"
    missing = sorted(set(with_spec) - set(JOBS))
    assert not missing, f"no contract_references fixture for {missing}: record one (README)"


@pytest.mark.parametrize("name", JOBS)
def test_the_contract_catches_every_mutant_of_a_real_run(name: str) -> None:
    spec, reference, inputs = load(name)
    report = mutate(spec.name, spec.contract, reference, dedup=True, inputs=inputs)
    assert report.mutants >= 5, report.to_dict()
    assert report.score == 1.0, report.missed
    assert report.false_rejections == 0, [r.misjudged for r in report.operators]
