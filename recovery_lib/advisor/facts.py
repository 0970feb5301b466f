"""What a recommendation depends on, measured or read from the job's declarations."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.job.spec import resolve_job
from recovery_lib.metrics.store import read_frame
from recovery_lib.ops.config import load_jobs
from recovery_lib.pipeline.spec import get_pipeline

# The share of records held by the hottest 1 % of keys above which input counts as skewed
# (CheckMate's hot-item runs put 10-30 % of records on the hot items).
SKEW_HOT_SHARE = 0.10
HOT_KEY_FRACTION = 0.01


@dataclass(frozen=True)
class Skew:
    """Key skew of sampled input records: the share held by the hottest 1 % of keys."""

    records: int
    keys: int
    hot_share: float

    @property
    def skewed(self) -> bool:
        return self.hot_share >= SKEW_HOT_SHARE


def key_skew(keys: Iterable[bytes | str | None]) -> Skew:
    counts = Counter(k for k in keys if k is not None)
    records = sum(counts.values())
    if not records:
        return Skew(0, 0, 0.0)
    hot = max(1, round(len(counts) * HOT_KEY_FRACTION))
    share = sum(n for _, n in counts.most_common(hot)) / records
    return Skew(records, len(counts), round(share, 4))


@dataclass(frozen=True)
class Facts:
    """A job's or a pipeline's facts. ``stages`` 1 and ``cycle`` False for a single job."""

    name: str
    kind: str  # "job" | "pipeline"
    nondeterministic: bool  # some stage's contract declares nondeterminism
    order_sensitive: bool  # some stage has an order-sensitive operator
    stages: int = 1
    cycle: bool = False
    skew: Skew | None = None  # None: not sampled (no input records, or no broker)
    plain_consumers: bool = True  # readers that do not de-duplicate by id
    max_outage_s: float | None = None  # the output gap a failure may cause, if bounded
    load: Load | None = None  # input rate against the measured MST, state size
    notes: list[str] = field(default_factory=list)


def job_facts(name: str, **kw: object) -> Facts:
    spec = resolve_job(name)
    contract = spec.contract
    return Facts(
        name=spec.name,
        kind="job",
        nondeterministic=not (contract.deterministic or contract.batch_deterministic),
        order_sensitive=contract.ordered,
        **kw,  # type: ignore[arg-type]
    )


def pipeline_facts(name: str, **kw: object) -> Facts:
    pipeline = get_pipeline(name)
    specs = [s.spec() for s in pipeline.stages]
    return Facts(
        name=pipeline.name,
        kind="pipeline",
        nondeterministic=any(
            not (s.contract.deterministic or s.contract.batch_deterministic) for s in specs
        ),
        order_sensitive=any(s.contract.ordered for s in specs),
        stages=len(pipeline.stages),
        cycle=bool(pipeline.feedback_topics()),
        **kw,  # type: ignore[arg-type]
    )


def sample_skew(topics: Iterable[str], limit: int = 20_000) -> Skew | None:
    """Key skew of up to ``limit`` records per topic, read from the start; None when the
    topics hold no record."""

    keys: list[bytes | str | None] = []
    for topic in topics:
        for i, record in enumerate(read_topic(topic)):
            if i >= limit:
                break
            keys.append(record.key)
    skew = key_skew(keys)
    return skew if skew.records else None


@dataclass(frozen=True)
class Load:
    """The job's measured load: its newest run's input rate and state (from the metrics store)
    or a rate given by hand, against the maximum sustainable throughput our benchmarks
    measured for the same query on this machine."""

    rate_eps: float | None = None
    rate_source: str = ""  # "run <id>" or "given"
    state_rows: int | None = None
    state_bytes: int | None = None
    mst_eps: float | None = None
    mst_source: str = ""  # the benchmark report

    @property
    def fraction_of_mst(self) -> float | None:
        if self.rate_eps is None or not self.mst_eps:
            return None
        return round(self.rate_eps / self.mst_eps, 3)


# The newest non-reference run of a job (by its query name, or its jobs-file name, which the
# daemon's run config holds as "name") that has batches, and its last batches: Spark's own
# input rate and state operators' size.
_NEWEST_BATCHES = """
    SELECT b.run_id, b.input_rows_per_s, b.state_rows, b.state_memory_bytes
    FROM micro_batches b JOIN runs r USING (run_id)
    WHERE (r.query = ? OR json_extract_string(r.config, '$.name') = ?) AND r.mode <> 'reference'
    ORDER BY b.ts_ms DESC
    LIMIT ?
"""


def running_load(job: str, store_path: Path, batches: int = 20) -> Load | None:
    """The input rate (median over the newest run's last ``batches`` batches with input) and
    state size of the newest run of ``job``; None when the store has none."""

    import pandas as pd

    if not store_path.exists():
        return None
    frame = read_frame(store_path, _NEWEST_BATCHES, [job, job, batches])
    if frame.empty:
        return None
    run_id = frame["run_id"].iloc[0]
    newest = frame[frame["run_id"] == run_id]
    rates = [float(r) for r in newest["input_rows_per_s"].dropna() if r > 0]
    state_rows, state_bytes = newest["state_rows"].iloc[0], newest["state_memory_bytes"].iloc[0]
    return Load(
        rate_eps=round(statistics.median(rates), 1) if rates else None,
        rate_source=f"run {run_id}",
        state_rows=None if pd.isna(state_rows) else int(state_rows),
        state_bytes=None if pd.isna(state_bytes) else int(state_bytes),
    )


def measured_mst(query: str, reports_dir: Path) -> tuple[float, str] | None:
    """The lowest MST any NexMark benchmark report measured for ``query`` (the conservative
    one), and the report's file name; None when no report measured it."""

    found: list[tuple[float, str]] = []
    for path in sorted(reports_dir.glob("bench_nexmark*.json")):
        try:
            queries = json.loads(path.read_text()).get("queries", {})
        except (OSError, ValueError):
            continue
        mst = (queries.get(query) or {}).get("mst_eps")
        if mst:
            found.append((float(mst), path.name))
    return min(found) if found else None


def job_load(
    job: str, query: str, store_path: Path, reports_dir: Path, rate_eps: float | None = None
) -> Load:
    """The job's load: ``rate_eps`` if given, else its newest run's; the MST of its query."""
    load = running_load(job, store_path) or Load()
    if rate_eps is not None:
        load = replace(load, rate_eps=rate_eps, rate_source="given")
    mst = measured_mst(query, reports_dir)
    return replace(load, mst_eps=mst[0], mst_source=mst[1]) if mst else load


def measured_job_facts(
    name: str, store_path: Path, reports_dir: Path, rate_eps: float | None = None, **kw: object
) -> Facts:
    """A job's facts with its load: ``name`` is a job (module:attr, or a name of jobs/) or a
    job of the jobs file, whose newest run the metrics store is searched for."""

    entry = jobs_file_entry(name)
    spec_name = entry.job_ref if entry is not None else name
    query = resolve_job(spec_name).name
    load = job_load(name, query, store_path, reports_dir, rate_eps)
    return job_facts(spec_name, load=load, **kw)


def jobs_file_entry(name: str):  # noqa: ANN201 - a StreamJob of the jobs file, or None
    """The jobs file's entry called ``name``, if there is a jobs file and it has one."""

    try:
        return load_jobs().get(name)
    except ValueError:  # no (valid) jobs file here: a plain job name
        return None
