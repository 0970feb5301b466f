"""The cyclic reachability query (CheckMate's adaptation of FFP's): its input generator and the
invariants the oracle judges its outputs by. The stages are in jobs/pipelines/reachability.py.

Two input streams over ``nodes`` node ids: links ``{"src", "dst", "op"}`` (op add | delete)
keyed by src, and source nodes ``{"node", "op"}`` keyed by node. The mix is 60 % new link,
15 % new source node, 20 % delete link, 5 % delete source node; a delete names a live link /
source (an add when there is none). Half the new links start at a node some source already
reaches, the rest anywhere: uniform links over a million nodes would almost never extend a
path, and the feedback loop would carry nothing. Everything is a function of the seed.

Outputs are reach tuples ``{"source", "node", "path"}``: ``node`` is reachable from source
node ``source`` along ``path`` (source first, node last, no node twice).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged
from recovery_lib.runtime.pacing import Pacer
from recovery_lib.verify.contract import Flaw, InvariantResult, Output

MIX = (("link", 0.60), ("source", 0.15), ("unlink", 0.20), ("unsource", 0.05))
LINKS, SOURCES = "links", "sources"


@dataclass(frozen=True)
class ReachabilityConfig:
    nodes: int = 1_000_000
    seed: int = 7
    topic_prefix: str = "reach"
    partitions: int = 2

    @property
    def links_topic(self) -> str:
        return f"{self.topic_prefix}.{LINKS}"

    @property
    def sources_topic(self) -> str:
        return f"{self.topic_prefix}.{SOURCES}"


def generate(config: ReachabilityConfig, count: int) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """``count`` events as (input name, key, value)."""
    rng = random.Random(config.seed)
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    links: list[tuple[int, int]] = []
    link_set: set[tuple[int, int]] = set()
    sources: list[int] = []
    reached: list[int] = []  # nodes some source reaches (approximately: sources and link ends)
    for _ in range(count):
        kind = rng.choices(kinds, weights)[0]
        if kind == "unlink" and links:
            i = rng.randrange(len(links))
            links[i], links[-1] = links[-1], links[i]
            src, dst = links.pop()
            link_set.discard((src, dst))
            yield LINKS, src, {"src": src, "dst": dst, "op": "delete"}
        elif kind == "unsource" and sources:
            i = rng.randrange(len(sources))
            sources[i], sources[-1] = sources[-1], sources[i]
            node = sources.pop()
            yield SOURCES, node, {"node": node, "op": "delete"}
        elif kind in ("source", "unsource"):
            node = rng.randrange(config.nodes)
            sources.append(node)
            reached.append(node)
            yield SOURCES, node, {"node": node, "op": "add"}
        else:
            src = rng.choice(reached) if reached and rng.random() < 0.5 else None
            src = rng.randrange(config.nodes) if src is None else src
            dst = rng.randrange(config.nodes)
            if src == dst or (src, dst) in link_set:
                dst = (dst + 1) % config.nodes
                if src == dst or (src, dst) in link_set:
                    continue
            links.append((src, dst))
            link_set.add((src, dst))
            reached.append(dst)
            yield LINKS, src, {"src": src, "dst": dst, "op": "add"}


def produce(
    config: ReachabilityConfig,
    count: int,
    rate: float | None = None,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Write ``count`` events to the two topics (paced at ``rate`` events/s if given); the
    key decides the partition. Returns the events written."""
    from confluent_kafka import Producer

    producer = Producer({**client_config(), "linger.ms": "5", "enable.idempotence": "true"})
    topics = {LINKS: config.links_topic, SOURCES: config.sources_topic}
    pacer = Pacer(rate)
    written = 0
    for name, key, value in generate(config, count):
        if stop is not None and stop():
            break
        while True:
            try:
                producer.produce(topics[name], json.dumps(value).encode(), str(key).encode())
                break
            except BufferError:
                producer.poll(0.05)
        written += 1
        if rate is not None and written % max(1, int(rate / 50)) == 0:
            pacer.wait(written)
            producer.poll(0)
    if producer.flush(30):
        raise RecordsNotAcknowledged(
            "reachability input not acknowledged by the broker in 30 s; check the broker is up"
        )
    return written


def _input_facts(records: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    source_adds: Counter[int] = Counter()
    source_deletes: Counter[int] = Counter()
    added_links: set[tuple[int, int]] = set()
    deleted_links: set[tuple[int, int]] = set()
    added_sources: set[int] = set()
    deleted_sources: set[int] = set()
    link_adds: Counter[tuple[int, int]] = Counter()
    for name, value in records:
        if name == LINKS:
            pair = (int(value["src"]), int(value["dst"]))
            (added_links if value["op"] == "add" else deleted_links).add(pair)
            link_adds[pair] += value["op"] == "add"
        else:
            node = int(value["node"])
            (added_sources if value["op"] == "add" else deleted_sources).add(node)
            (source_adds if value["op"] == "add" else source_deletes)[node] += 1
    return {
        "source_adds": source_adds,
        "source_deletes": source_deletes,
        "link_adds": link_adds,
        "links": added_links,
        "stable_links": added_links - deleted_links,
        "sources": added_sources,
        "stable_sources": added_sources - deleted_sources,
    }


def required_paths(facts: dict[str, Any], limit: int = 200_000) -> set[tuple[int, ...]] | None:
    """Paths every run must output: simple paths over links never deleted from sources never
    deleted (the join is symmetric, so their order of arrival does not matter). None above
    ``limit`` paths."""
    out_links: dict[int, list[int]] = {}
    for src, dst in facts["stable_links"]:
        out_links.setdefault(src, []).append(dst)
    found: set[tuple[int, ...]] = set()
    todo = [(s,) for s in facts["stable_sources"]]
    while todo:
        path = todo.pop()
        for nxt in out_links.get(path[-1], ()):
            if nxt in path:
                continue
            longer = (*path, nxt)
            found.add(longer)
            if len(found) > limit:
                return None
            todo.append(longer)
    return found


def copies_allowed(path: tuple[int, ...], facts: dict[str, Any]) -> int:
    """How often a failure-free run may output ``path``. JOIN emits path[:-1] + next when the
    tuple (source, path[:-1]) and the link path[-2] -> next become present together: once, and
    once more per re-add of that link after its delete (a tuple is never removed but (s, [s]),
    and a re-added source's pairs reach PROJECT before the source does, so it drops them)."""
    if len(path) < 2:
        return 1
    return max(1, facts["link_adds"][(path[-2], path[-1])])


def _path_of(value: Any) -> tuple[int, ...] | None:
    """A path as node ids (None: not a list of integers)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) for n in value
    ):
        return None
    return tuple(value)


class ReachablePaths:
    """Every output is a simple path from an added source node over added links, output no
    more often than a failure-free run can (once, unless a delete and re-add let the join
    meet it again: ``copies_allowed``); every path over links and sources never deleted is
    output (paper 004: a missing one is an at-most-once flaw, an extra copy at-least-once, an
    impossible one inconsistent)."""

    name = "reachability: valid paths, each once, every stable path present"
    agreement_covers = False  # the query has no agreement: only this judges

    def __init__(self, records: Callable[[Any], list[tuple[str, dict[str, Any]]] | None]):
        self.records = records

    def check(self, outputs: Sequence[Output], inputs: Any) -> InvariantResult:
        violations: Counter[Flaw] = Counter()
        examples: list[str] = []
        seen: Counter[tuple[int, ...]] = Counter()
        paths = []
        for o in outputs:
            path = _path_of(o.value.get("path"))
            if path is None:  # no run writes it (the oracle counts it malformed too)
                violations[Flaw.INCONSISTENT] += 1
                if len(examples) < 3:
                    examples.append(f"path {o.value.get('path')!r} is not a list of nodes")
                continue
            paths.append((o, path))
            seen[path] += 1
        records = self.records(inputs)
        if records is None:
            violations[Flaw.DUPLICATED_INPUT] = sum(n - 1 for n in seen.values() if n > 1)
            return InvariantResult(self.name, checked=False, violations=+violations)
        facts = _input_facts(records)
        for path, n in seen.items():
            extra = n - copies_allowed(path, facts)
            if extra > 0:
                violations[Flaw.DUPLICATED_INPUT] += extra
                if len(examples) < 3:
                    examples.append(f"path {list(path)} output {n} times")
        for o, path in paths:
            ok = (
                len(path) >= 2
                and len(set(path)) == len(path)
                and path[0] == o.value.get("source")
                and path[-1] == o.value.get("node")
                and path[0] in facts["sources"]
                and all((a, b) in facts["links"] for a, b in zip(path, path[1:], strict=False))
            )
            if not ok:
                violations[Flaw.INCONSISTENT] += 1
                if len(examples) < 3:
                    examples.append(f"impossible path {o.value}")
        required = required_paths(facts)
        details: dict[str, Any] = {"outputs": len(paths)}
        if required is not None:
            missing = required - set(seen)
            violations[Flaw.MISSING_INPUT] = len(missing)
            examples += [f"missing path {list(p)}" for p in sorted(missing)[:3]]
            details["required"] = len(required)
        return InvariantResult(
            self.name, checked=True, violations=+violations, details=details, examples=examples
        )


class JoinPairs:
    """The reachability JOIN's outputs. Without the input: a pair names a source, a non-empty
    path starting there and a next node; a forwarded source add/delete names its source. With
    it: a pair's path runs from an added source over added links and ends in a node with an
    added link to ``next``; it is output at most ``link adds + tuple arrivals - 1`` times (JOIN
    emits a pair at the later of its link's add and its tuple's arrival, so the first of all
    those events emits nothing); a forwarded add/delete at most as often as the input has it."""

    name = "reachability join: pairs some run emits"
    agreement_covers = False  # the join has no agreement: only this judges

    def __init__(self, records: Callable[[Any], list[tuple[str, dict[str, Any]]] | None]):
        self.records = records

    def check(self, outputs: Sequence[Output], inputs: Any) -> InvariantResult:
        result = InvariantResult(self.name, checked=False)
        flag = result.flag
        seen: Counter[tuple[Any, ...]] = Counter()
        for o in outputs:
            v = o.value
            kind, source, path = v.get("kind"), v.get("source"), v.get("path") or []
            if kind == "pair":
                ok = bool(path) and path[0] == source and isinstance(v.get("next"), int)
                ok = ok and v["next"] >= 0
                if not ok:
                    flag(Flaw.INCONSISTENT, f"malformed pair {v}")
                    continue
                seen[("pair", source, tuple(path), v["next"])] += 1
            elif kind in ("source", "unsource") and source is not None:
                seen[(kind, source)] += 1
            else:
                flag(Flaw.INCONSISTENT, f"not a join output {v}")
        records = self.records(inputs)
        if records is None:
            return result
        result.checked = True
        facts = _input_facts(records)
        reach = Counter(
            (int(v["source"]), tuple(int(n) for n in v.get("path") or ()))
            for name, v in (inputs.decoded("reach") if inputs.has("reach") else ())
            if isinstance(v, dict) and "source" in v
        )
        for item, n in seen.items():
            if item[0] == "pair":
                _, source, path, nxt = item
                links = list(zip(path, path[1:], strict=False))
                possible = (
                    source in facts["sources"]
                    and all(link in facts["links"] for link in links)
                    and (path[-1], nxt) in facts["links"]
                )
                if not possible:
                    flag(Flaw.INCONSISTENT, f"impossible pair {source} {list(path)} -> {nxt}")
                    continue
                arrivals = facts["source_adds"][source] if len(path) == 1 else reach[(source, path)]
                allowed = facts["link_adds"][(path[-1], nxt)] + max(arrivals, 1) - 1
                if n > allowed:
                    example = f"pair {source} {list(path)} -> {nxt} output {n} times"
                    flag(Flaw.DUPLICATED_INPUT, example, n - allowed)
            else:
                kind, source = item
                allowed = facts["source_adds" if kind == "source" else "source_deletes"][source]
                if n > allowed:
                    flag(
                        Flaw.DUPLICATED_INPUT if allowed else Flaw.INCONSISTENT,
                        f"{kind} {source} x{n}",
                    )
        return result
