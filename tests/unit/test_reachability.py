"""The cyclic reachability query without Spark: its generator, the stages' per-key functions
run to a fixpoint in Python, and the invariants the oracle judges it by (which must be able
to say no)."""

from __future__ import annotations

import json
from collections import Counter, deque

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from jobs.pipelines import reachability as stages
from recovery_lib.causal.order import LINEAGE
from recovery_lib.io.sinks.kafka_sink import stable_order
from recovery_lib.pipeline.reachability import (
    LINKS,
    ReachabilityConfig,
    ReachablePaths,
    _input_facts,
    generate,
    required_paths,
)
from recovery_lib.verify.contract import Flaw, Output


class State:
    def __init__(self) -> None:
        self.value = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self):  # noqa: ANN201
        return self.value

    def update(self, value) -> None:  # noqa: ANN001
        self.value = value


def row(
    kind: str,
    node: int,
    a: int,
    b: int | None = None,
    path: list | None = None,
    topic: str = "p.reach",
    offset: int = 0,
) -> dict:
    return {"node": node, "kind": kind, "a": a, "b": b, "path": json.dumps(path) if path else None,
            "topic": topic, "partition": 0, "offset": offset, "ingest_ms": 0}  # fmt: skip


def through_the_sink(values: list[tuple[str, str]]) -> list[dict]:
    """JOIN's rows as PROJECT reads them: the release sink writes a task's rows in its stable
    (key, value) order (one task here)."""
    if not values:
        return []
    batch = pa.RecordBatch.from_pandas(pd.DataFrame(values, columns=["key", "value"]))
    table = pa.Table.from_batches(list(stable_order(iter([batch]))))
    return [json.loads(v) for v in table.column("value").to_pylist()]


def simulate(events: list[tuple[str, int, dict]], batch: int) -> list[dict]:
    """The two stages' functions as the jobs run them, micro-batch by micro-batch: each key's
    rows in lineage order (links before sources, each topic in offset order), JOIN's output
    through the sink's stable order, the feedback fed back."""
    join_states: dict[int, State] = {}
    project_states: dict[int, State] = {}
    pending: deque = deque()
    outputs: list[dict] = []
    inputs = [
        row(
            ("unlink" if v["op"] == "delete" else "link")
            if name == LINKS
            else ("unsource" if v["op"] == "delete" else "source"),
            key,
            v.get("src", v.get("node")),
            v.get("dst"),
            topic=f"p.{name}",
            offset=i,
        )
        for i, (name, key, v) in enumerate(events)
    ]
    i = 0
    while i < len(inputs) or pending:
        # What ``ordered`` does per key, once for the batch: each key's rows in lineage order.
        rows = sorted(inputs[i : i + batch] + list(pending), key=lambda r: [r[c] for c in LINEAGE])
        i += batch
        pending.clear()
        emitted: list[tuple[str, str]] = []
        for node in dict.fromkeys(r["node"] for r in rows):
            frame = pd.DataFrame([r for r in rows if r["node"] == node])
            state = join_states.setdefault(node, State())
            # Spark hands a group's key as numpy scalars.
            for out in stages._join((np.int64(node),), iter([frame]), state):
                emitted += list(zip(out["key"], out["value"], strict=True))
        pairs = [
            {**p, "topic": "p.pairs", "partition": 0, "offset": n}
            for n, p in enumerate(through_the_sink(emitted))
        ]
        for source in dict.fromkeys(p["source"] for p in pairs):
            frame = pd.DataFrame([{**p, "path": p["path"]} for p in pairs if p["source"] == source])
            state = project_states.setdefault(source, State())
            # PROJECT's rows are in its input's offset order already (the sink's order).
            for out in stages._project(
                (np.int64(source),), iter([frame.assign(ingest_ms=0)]), state
            ):
                for value in out["value"]:
                    reach = json.loads(value)
                    outputs.append(reach)
                    node, source = reach["node"], reach["source"]
                    pending.append(
                        row("reach", node, source, None, reach["path"], offset=len(outputs))
                    )
    return outputs


def records(events):
    return [(name, value) for name, _, value in events]


def test_the_generator_is_a_function_of_the_seed_with_the_papers_mix():
    config = ReachabilityConfig(nodes=1_000, seed=3)
    events = list(generate(config, 5_000))
    assert events == list(generate(config, 5_000))
    assert events != list(generate(ReachabilityConfig(nodes=1_000, seed=4), 5_000))
    ops = Counter((name, v["op"]) for name, _, v in events)
    share = {k: n / len(events) for k, n in ops.items()}
    assert share[(LINKS, "add")] == pytest.approx(0.60, abs=0.03)
    assert share[(LINKS, "delete")] == pytest.approx(0.20, abs=0.03)
    assert share[("sources", "add")] == pytest.approx(0.15, abs=0.03)
    assert share[("sources", "delete")] == pytest.approx(0.05, abs=0.02)


@pytest.mark.parametrize("batch", [1, 7, 100_000])
def test_the_stages_find_every_stable_path_and_nothing_impossible(batch):
    events = list(generate(ReachabilityConfig(nodes=5_000, seed=11), 1_500))
    outputs = simulate(events, batch)
    assert len(outputs) > 50, "the feedback loop carried too little to test anything"
    result = ReachablePaths(lambda _: records(events)).check(
        [Output(None, None, o) for o in outputs], object()
    )
    assert result.checked and result.ok, (result.violations, result.examples)
    assert result.details["required"] > 10


def test_the_invariant_says_no():
    events = list(generate(ReachabilityConfig(nodes=5_000, seed=11), 1_500))
    outputs = simulate(events, 50)
    check = ReachablePaths(lambda _: records(events)).check
    as_outputs = [Output(None, None, o) for o in outputs]
    facts = _input_facts(records(events))
    required = required_paths(facts)
    dropped = next(i for i, o in enumerate(outputs) if tuple(o["path"]) in required)
    lost = check(as_outputs[:dropped] + as_outputs[dropped + 1 :], object())
    twice = check(as_outputs + as_outputs[:2], object())
    bogus = check([*as_outputs, Output(None, None, {"source": 1, "node": 2, "path": [1, 2]})], 0)
    assert lost.violations[Flaw.MISSING_INPUT] == 1
    assert twice.violations[Flaw.DUPLICATED_INPUT] == 2
    assert bogus.violations[Flaw.INCONSISTENT] >= 1
    unchecked = ReachablePaths(lambda _: None).check(as_outputs, None)
    assert not unchecked.checked


def test_a_re_added_link_may_repeat_a_path_and_no_more():
    """A failure-free run outputs [1, 2, 3] again after 2->3 is deleted and re-added (the join
    meets the tuple and the link once more), but not [1, 2] after source 1 is deleted and
    re-added (its pairs reach PROJECT before the source does); the invariant allows exactly
    the copies a failure-free run can make."""

    def link(a, b, op="add"):
        return (LINKS, a, {"src": a, "dst": b, "op": op})

    def source(n, op="add"):
        return ("sources", n, {"node": n, "op": op})

    events = [source(1), link(1, 2), link(2, 3), source(1, "delete"), source(1),
              link(2, 3, "delete"), link(2, 3)]  # fmt: skip
    outputs = simulate(events, 1)
    paths = Counter(tuple(o["path"]) for o in outputs)
    assert paths == {(1, 2): 1, (1, 2, 3): 2}, paths
    check = ReachablePaths(lambda _: records(events)).check
    as_outputs = [Output(None, None, o) for o in outputs]
    assert check(as_outputs, object()).ok
    for extra in as_outputs:  # one more copy of either path is more than any run makes
        again = check([*as_outputs, extra], object())
        assert again.violations[Flaw.DUPLICATED_INPUT] == 1, again.violations


@pytest.mark.parametrize("batch", [1, 4])
def test_a_source_deleted_and_re_added_within_one_batch_repeats_no_path(batch):
    """Seen in a CIC run of the cyclic query: source 14322 deleted and re-added, then the link
    14322->120 added, all in one JOIN batch. Lineage order puts the link first, so JOIN emits
    the pair twice (old tuple, then re-added tuple) with the unsource between them; the sink's
    (key, value) sort used to put both pairs before the unsource, so PROJECT output the path
    twice and ended with the live source marked deleted. The emission index keeps the order."""
    events = [("sources", 1, {"node": 1, "op": "add"}),
              ("sources", 1, {"node": 1, "op": "delete"}),
              ("sources", 1, {"node": 1, "op": "add"}),
              (LINKS, 1, {"src": 1, "dst": 2, "op": "add"})]  # fmt: skip
    outputs = simulate(events, batch)
    assert Counter(tuple(o["path"]) for o in outputs) == {(1, 2): 1}, outputs
    result = ReachablePaths(lambda _: records(events)).check(
        [Output(None, None, o) for o in outputs], object()
    )
    assert result.ok, result.violations
