"""What a recommendation depends on, measured or read from the job's declarations."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

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
    notes: list[str] = field(default_factory=list)


def job_facts(name: str, **kw: object) -> Facts:
    from recovery_lib.job.spec import resolve_job

    spec = resolve_job(name)
    contract = spec.contract
    return Facts(
        name=spec.name,
        kind="job",
        nondeterministic=not contract.deterministic,
        order_sensitive=contract.ordered,
        **kw,  # type: ignore[arg-type]
    )


def pipeline_facts(name: str, **kw: object) -> Facts:
    from recovery_lib.pipeline.spec import get_pipeline

    pipeline = get_pipeline(name)
    specs = [s.spec() for s in pipeline.stages]
    return Facts(
        name=pipeline.name,
        kind="pipeline",
        nondeterministic=any(not s.contract.deterministic for s in specs),
        order_sensitive=any(s.contract.ordered for s in specs),
        stages=len(pipeline.stages),
        cycle=bool(pipeline.feedback_topics()),
        **kw,  # type: ignore[arg-type]
    )


def sample_skew(topics: Iterable[str], limit: int = 20_000) -> Skew | None:
    """Key skew of up to ``limit`` records per topic, read from the start; None when the
    topics hold no record."""
    from recovery_lib.io.sinks.dedup_reader import read_topic

    keys: list[bytes | str | None] = []
    for topic in topics:
        for i, record in enumerate(read_topic(topic)):
            if i >= limit:
                break
            keys.append(record.key)
    skew = key_skew(keys)
    return skew if skew.records else None
