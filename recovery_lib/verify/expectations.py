"""Great Expectations suites (expectations/*.json) run on sink outputs and metrics tables.

The suites are GX 1.x suite files, one per query's sink output (schema, non-null, value
ranges, and in dedup modes unique output ids) and one per metrics table. Data is validated as
pandas DataFrames: sink records become the consumer's view (value JSON fields plus ``_id``,
the output id); metrics tables are read from DuckDB first (GX's SQL path against DuckDB is
broken). Used by ``recovery verify --expectations``, ``recovery expectations`` and the
consistency DAG; results go to the metrics store (table expectation_results).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from recovery_lib.errors import ConfigurationError
from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.metrics.store import now_ms, read_frame
from recovery_lib.settings import Settings, get_settings
from recovery_lib.verify.oracle import consumer_view

GENERIC_OUTPUT_SUITE = "job_output"  # for jobs without a suite of their own
# ... whose output carries no lineage ids (a job that writes its output itself).
GENERIC_PLAIN_OUTPUT_SUITE = "plain_output"
METRICS_SUITES = {
    "runs": "metrics_runs",
    "micro_batches": "metrics_micro_batches",
    "latency_samples": "metrics_latency_samples",
    "events": "metrics_events",
    "consistency_reports": "metrics_consistency_reports",
}


@dataclass
class SuiteResult:
    suite: str
    target: str
    success: bool
    evaluated: int
    failed: int
    failures: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def suites_dir(settings: Settings | None = None) -> Path:
    """The expectation suites' directory ``settings`` name (the environment's if None), else
    the repository's expectations/."""
    configured = (settings or get_settings()).expectations_dir
    if configured is not None:
        return configured
    return Path(__file__).resolve().parents[2] / "expectations"


def load_suite_spec(name: str) -> dict[str, Any]:
    path = suites_dir() / f"{name}.json"
    if not path.exists():
        known = sorted(p.stem for p in suites_dir().glob("*.json"))
        raise ConfigurationError(f"no expectation suite {name!r} in {suites_dir()}; known: {known}")
    return json.loads(path.read_text())


def _suite(spec: dict[str, Any], dedup: bool) -> Any:
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    suite = gx.ExpectationSuite(name=spec["name"], meta=spec.get("meta", {}))
    for item in spec["expectations"]:
        if item.get("meta", {}).get("dedup_only") and not dedup:
            continue  # at-least-once consumers see re-written copies: ids repeat by design
        config = ExpectationConfiguration(type=item["type"], kwargs=item["kwargs"])
        suite.add_expectation(config.to_domain_obj())
    return suite


def validate_frame(frame: pd.DataFrame, suite_name: str, target: str, dedup: bool = True):  # noqa: ANN201
    """Run one suite on a DataFrame; an empty frame fails with a clear reason."""
    import great_expectations as gx

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    spec = load_suite_spec(suite_name)
    if frame.empty:
        return SuiteResult(
            suite_name, target, False, 0, 1, [{"expectation": "rows", "reason": "no rows"}]
        )
    context = gx.get_context(mode="ephemeral")
    try:  # no progress bars in job logs
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False)
    except (ImportError, AttributeError, TypeError):
        pass  # a GX version without this setting: progress bars only add noise to job logs
    name = f"ds_{uuid.uuid4().hex[:8]}"
    batch_def = (
        context.data_sources.add_pandas(name)
        .add_dataframe_asset(f"{name}_asset")
        .add_batch_definition_whole_dataframe(f"{name}_batch")
    )
    batch = batch_def.get_batch(batch_parameters={"dataframe": frame})
    result = batch.validate(_suite(spec, dedup))
    failures = []
    for r in result.results:
        if not r.success:
            config = r.expectation_config
            partial = (r.result or {}).get("partial_unexpected_list") or []
            failures.append(
                {
                    "expectation": config.type,
                    "kwargs": {k: v for k, v in config.kwargs.items() if k != "batch_id"},
                    "unexpected_count": (r.result or {}).get("unexpected_count"),
                    "examples": [str(x) for x in partial[:5]],
                    "exception": (r.exception_info or {}).get("exception_message"),
                }
            )
    return SuiteResult(
        suite_name, target, bool(result.success), len(result.results), len(failures), failures
    )


def output_frame(records: Iterable[SinkRecord], dedup: bool) -> pd.DataFrame:
    """The consumer's view of a sink topic (the oracle's): value JSON fields and ``_id``."""
    return pd.DataFrame([{**o.value, "_id": o.id} for o in consumer_view(records, dedup)])


def output_suite(job: str, lineage_ids: bool = True) -> str:
    """The suite of a job's output: ``<suites dir>/<job name>.json``, else the generic one
    (ids present, unique in dedup modes; without ``lineage_ids``, a job that writes its output
    itself: records with a value)."""
    if (suites_dir() / f"{job}.json").exists():
        return job
    return GENERIC_OUTPUT_SUITE if lineage_ids else GENERIC_PLAIN_OUTPUT_SUITE


def validate_output(  # noqa: ANN201 - SuiteResult
    job: str, records: Iterable[SinkRecord], dedup: bool, target: str, lineage_ids: bool = True
):
    """The job's output suite (``output_suite``) on the consumer's view of ``records``."""
    suite = output_suite(job, lineage_ids)
    return validate_frame(output_frame(records, dedup), suite, target, dedup)


def validate_metrics(store_path: str | Path) -> list[SuiteResult]:
    """Every metrics table that has rows, against its suite."""

    results = []
    for table, suite in METRICS_SUITES.items():
        frame = read_frame(store_path, f"SELECT * FROM {table}")  # noqa: S608 - fixed names
        if frame.empty:
            continue
        results.append(validate_frame(frame, suite, f"{store_path}:{table}"))
    return results


def record(store: Any, run_id: str | None, result: SuiteResult) -> None:
    store.add(
        "expectation_results",
        [
            (
                run_id,
                result.suite,
                result.target,
                now_ms(),
                result.success,
                result.evaluated,
                result.failed,
                json.dumps(result.failures, default=str),
            )
        ],
    )
