"""``recovery bench protocols``: the checkpoint protocols on pipelines of Spark stages, measured
as CheckMate section V does, every comparison within one invocation.

A trial runs one pipeline of the pipelines file under one protocol on fresh topics:

* capacity: the stages ready, a backlog of ``events`` written unpaced, time until the last
  stage's output is complete; capacity = events / that time, normalised to protocol ``none``
  (CheckMate normalises MST to a checkpoint-free run; a backlog drain is this machine's
  stand-in for an MST search per protocol, which would cost an hour per pipeline here);
* MST without a protocol (``_mst``): paced runs searched from half the capacity until the
  latency stops growing; the paced suites run at a fraction of it;
* paced runs (``rate``): p50 / p99 end-to-end latency overall and per second (the ingest time
  travels through the stages), with an optional SIGKILL of a stage 45 s after the first
  output (the stages past their start-up backlog): restart time (detected ->
  every restarted stage serving), recovery time (kill -> output flowing again with every
  later second's p50 under twice the p50 of the 30 s before), p99 of the 30 s before and
  after the kill, the longest gap in the output, which stages restarted; a kill that did not
  fire makes the verdict inconclusive;
* checkpoint time: COOR from marker registration to the last stage's commit of the epoch;
  UNC / CIC a stage's snapshot (state store commit + commit-log write, Spark's progress);
* invalid checkpoints (% of all, strict rule, the stages' final states as their next
  checkpoint), forced checkpoints (CIC), message overhead ((payload + protocol bytes) /
  payload bytes on the topics between stages; COOR's marker registry counts as protocol
  bytes);
* the oracle's verdict: NexMark outputs against the DuckDB reference, the cyclic query by its
  invariants.
"""

from __future__ import annotations

import json
import shutil
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from recovery_lib.bench.machine import broker_description
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import ConfigurationError, JobFailed
from recovery_lib.files import write_json_report
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.broker import broker_for_run
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.headers import CIC_HEADER
from recovery_lib.metrics.latency import LatencyCollector
from recovery_lib.metrics.recovery import DISTURBANCE_KEY, disturbance_s
from recovery_lib.metrics.stats import percentile
from recovery_lib.metrics.store import read_frame
from recovery_lib.nexmark.reference import compare, load_events, reference_rows
from recovery_lib.pipeline.runner import PipelineRun
from recovery_lib.pipeline.spec import PipelineSpec, get_pipeline
from recovery_lib.protocols.base import CHECKMATE_PROTOCOLS, PROTOCOLS
from recovery_lib.protocols.recovery_line import invalid_checkpoints
from recovery_lib.settings import get_settings
from recovery_lib.verify.contract import Output

REFERENCE = {"q1p": "q1", "q1p3": "q1", "q3p": "q3", "q8p": "q8"}


@dataclass(frozen=True)
class Trial:
    pipeline: str
    protocol: str
    events: int
    rate: float | None = None  # None: a backlog, for capacity
    kill: str | None = None  # a stage to SIGKILL
    kill_at_s: float = 45.0  # seconds after the first output reached the sink
    hot_ratio: float | None = None
    # Seconds between checkpoints: UNC/CIC's checkpoint interval and COOR's marker interval
    # alike, so the protocols are compared at the same checkpoint frequency.
    interval_s: float = 2.0
    # A paced trial at this fraction of the pipeline's MST without a protocol (searched
    # first, see _mst), which sets ``rate`` and ``events``.
    load: float | None = None
    # Long enough for the stages' start-up backlog to drain before the kill and for 30 s
    # of output after it.
    paced_s: float = 120.0
    # The generator's seed and event-time rate (None: its default), so that a caller can give
    # a trial the same input as an experiment of the same job (bench/compare_bench.py).
    seed: int | None = None
    event_time_rate: float | None = None

    @property
    def name(self) -> str:
        pace = "backlog" if self.rate is None else f"{self.rate:g}"
        if self.load is not None:
            pace = f"{self.load:.0%}"
        parts = [self.pipeline, self.protocol, pace]
        if self.hot_ratio is not None:
            parts.append(f"hot{self.hot_ratio:g}")
        if self.kill:
            parts.append(f"kill-{self.kill}")
        return "/".join(parts)


def _fresh_spec(trial: Trial, prefix: str) -> Any:
    """The file's pipeline under ``trial.protocol``, reading ``prefix``'s topics, with a
    unique name (so its topics are fresh)."""

    base = get_pipeline(trial.pipeline)
    stages = []
    for stage in base.stages:
        inputs = {
            name: (prefix + topic[topic.index(".") :] if not topic.startswith("stage:") else topic)
            for name, topic in stage.inputs.items()
        }
        stages.append(stage.model_copy(update={"inputs": inputs}))
    data = {
        **base.model_dump(),
        "name": f"{base.name}_{uuid.uuid4().hex[:6]}",
        "protocol": "unc",
        "stages": [s.model_dump() for s in stages],
        "unaligned": [],
    }
    data["checkpoint_interval_s"] = trial.interval_s
    data["marker_interval_s"] = trial.interval_s
    spec = PipelineSpec.model_validate(data)
    # COOR on a cycle: the fresh pipeline's own feedback topics stay unaligned.
    unaligned = sorted(spec.feedback_topics()) if trial.protocol == "coor" else []
    return PipelineSpec.model_validate({**data, "protocol": trial.protocol, "unaligned": unaligned})


class _Input:
    """The trial's input: NexMark events or the reachability query's links and sources."""

    def __init__(self, trial: Trial, prefix: str) -> None:
        self.trial = trial
        self.prefix = prefix
        self.reach = trial.pipeline == "reach"
        if self.reach:
            from recovery_lib.pipeline.reachability import ReachabilityConfig

            self.config: Any = ReachabilityConfig(topic_prefix=prefix)
        else:
            from recovery_lib.nexmark.config import GeneratorConfig

            given = {
                "hot_ratio": trial.hot_ratio,
                "seed": trial.seed,
                "event_time_rate": trial.event_time_rate,
            }
            extra = {k: v for k, v in given.items() if v is not None}
            self.config = GeneratorConfig(topic_prefix=prefix, partitions=2, **extra)

    def create(self) -> None:
        if self.reach:
            admin = TopicAdmin()
            for topic in (self.config.links_topic, self.config.sources_topic):
                admin.create(topic, self.config.partitions)
        else:
            from recovery_lib.nexmark.producer import ensure_topics

            ensure_topics(self.config)

    def feed(self) -> None:
        if self.reach:
            from recovery_lib.pipeline.reachability import produce

            produce(self.config, self.trial.events, self.trial.rate)
        else:
            from recovery_lib.nexmark.producer import produce_events

            produce_events(self.config, count=self.trial.events, rate=self.trial.rate)

    def topic(self, input_name: str) -> str:
        """The source topic of input ``input_name`` (a NexMark stream: bids, persons...)."""
        return getattr(self.config, f"{input_name}_topic")

    def expected_outputs(self) -> int | None:
        query = REFERENCE.get(self.trial.pipeline)
        if query is None:
            return None

        return len(reference_rows(load_events(self.config, self.trial.events), query))

    def verdict(self, outputs: list[Any]) -> dict[str, Any]:
        values = [Output.decode(r.id, r.key, r.value) for r in outputs]
        if self.reach:
            from recovery_lib.pipeline.reachability import ReachablePaths, generate

            records = [(n, v) for n, _, v in generate(self.config, self.trial.events)]
            result = ReachablePaths(lambda _: records).check(values, object())
            return {
                "ok": result.ok,
                "violations": dict(result.violations),
                "examples": result.examples,
                **result.details,
            }
        query = REFERENCE.get(self.trial.pipeline)
        if query is None and self.trial.pipeline != "q12p":  # a pipeline of the user's
            return {"ok": None, "inconclusive": f"no reference for pipeline {self.trial.pipeline}"}
        if query is None:  # q12: processing-time windows, every bid counted once
            from recovery_lib.nexmark.contracts import BidsCountedOnce
            from recovery_lib.verify.inputs import InputView

            view = InputView({"bids": self.config.bids_topic})
            result = BidsCountedOnce().check(values, view)
            return {"ok": result.ok, "violations": dict(result.violations)}

        expected = reference_rows(load_events(self.config, self.trial.events), query)
        comparison = compare([v.value for v in values], expected)
        return {"ok": comparison.equal, **comparison.__dict__}


KILL_BY_INPUT_FRACTION = 0.75  # the latest kill, as a fraction of a paced input's seconds


def run_trial(
    trial: Trial, workdir: Path, console: Console, keep_samples: bool = False
) -> dict[str, Any]:
    """One trial on fresh topics; with ``keep_samples`` the result carries the raw (visible ms,
    latency ms) samples as ``_samples`` (for a caller's own figures; not for a report)."""

    prefix = f"pb{uuid.uuid4().hex[:8]}"
    source = _Input(trial, prefix)
    source.create()
    spec = _fresh_spec(trial, prefix)
    home = workdir / spec.name
    metrics = workdir / "metrics.duckdb"
    out_topic = spec.output_topic(spec.stages[-1])
    expected = source.expected_outputs()
    result: dict[str, Any] = {"trial": trial.name, **trial.__dict__, "pipeline_name": spec.name}
    if source.reach:
        result["reach_nodes"] = source.config.nodes  # the generator's static node set
    # Processing-time windows (q12) close only on later input: the drain ends when every stage
    # read its input to the end, then ticks close the windows for the verdict.
    ticks = spec.stages[-1].spec().closing_ticks
    with PipelineRun(spec, home, run_id=spec.name, metrics_path=metrics) as run:
        run.start()
        run.wait_ready(300)
        collector = LatencyCollector(out_topic, spec.name, None).start()
        feeder = threading.Thread(target=source.feed, name="feeder", daemon=True)
        fed_at = time.monotonic()
        feeder.start()
        killed_at: float | None = None
        first_output_at: float | None = None
        last_count, last_change = 0, time.monotonic()
        # The kill comes kill_at_s after the first output, but no later than three quarters
        # into a paced input: under load the first output can come so late that the whole
        # output is out within kill_at_s, and a kill after that tests nothing (seen: UNC at
        # 80 % of its MST under skew, judged inconclusive for it).
        input_s = trial.events / trial.rate if trial.rate else None
        kill_by = fed_at + KILL_BY_INPUT_FRACTION * input_s if input_s else float("inf")
        deadline = fed_at + max(600.0, trial.events / 200)
        while True:
            run.tick()
            now = time.monotonic()
            count = sum(collector.per_second.values())
            if count and first_output_at is None:
                first_output_at = now
            # The kill comes kill_at_s after the first output, so the 30 s before it measure a
            # running pipeline, not the stages' first batches.
            if (
                trial.kill
                and killed_at is None
                and first_output_at is not None
                and (now - first_output_at >= trial.kill_at_s or now >= kill_by)
            ):
                run.supervisors[trial.kill].kill_group(9)
                killed_at = now
                result["killed_ms"] = int(time.time() * 1000)
                result["killed_after_first_output_s"] = round(now - first_output_at, 1)
            if count != last_count:
                last_count, last_change = count, now
            recovered = (
                not trial.kill
                or killed_at is None
                or (run.recoveries and run.recoveries[-1].restart_time_s is not None)
            )
            if not feeder.is_alive() and recovered:
                if expected is not None and count >= expected:
                    break
                # Otherwise drained when every stage read its input to the end (on a cycle,
                # with the output quiet for a while: nothing left in flight).
                settled = ticks is not None or now - last_change > 5
                if expected is None and settled and run.caught_up():
                    if ticks is not None:
                        last_change = now
                    break
            if now > deadline:
                result["timed_out"] = True
                break
            time.sleep(0.25)
        done_at = last_change
        if ticks is not None and not result.get("timed_out"):
            _close_windows(run, source, ticks, collector)
        collector.stop()
        result["drain_s"] = round(done_at - fed_at, 2)
        result["throughput_eps"] = round(trial.events / max(done_at - fed_at, 1e-3), 1)
        result["outputs"] = last_count
        result["expected_outputs"] = expected
        result.update(_latency(collector.samples, result.get("killed_ms")))
        result.update(_recovery(run))
        result.update(_protocol_figures(run, spec, metrics))
        records = list(read_topic(out_topic))
        result["verdict"] = source.verdict(records)
        if trial.kill and killed_at is None:  # the requested failure never fired
            result["verdict"] = {**result["verdict"], "ok": None, "inconclusive": "no kill"}
        result["written_twice"] = len(records) - len({r.id for r in records})
        if keep_samples:
            result["_samples"] = list(collector.samples)
    shown = {k: v for k, v in result.items() if k not in ("latency_per_s", "_samples")}
    console.print_json(json.dumps(shown))
    shutil.rmtree(home, ignore_errors=True)
    return result


def _close_windows(run: Any, source: _Input, ticks: Any, collector: Any) -> None:
    """Send the job's closing ticks into the pipeline's source topic, then wait for quiet."""
    from confluent_kafka import Producer

    topic = source.topic(ticks.input)
    producer = Producer(client_config())
    for _ in range(ticks.count):
        _wait_ticking(run, ticks.every_s)
        producer.produce(topic, value=ticks.value, partition=0)
        producer.flush(10)
    last, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < 10:
        _wait_ticking(run, 1.0)
        count = sum(collector.per_second.values())
        if count != last:
            last, quiet_since = count, time.monotonic()


def _wait_ticking(run: Any, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        run.tick()
        time.sleep(0.25)


def _latency(samples: list[tuple[int, int]], killed_ms: int | None) -> dict:
    """p50/p99 overall and per second of visibility; with a kill, the p99 of the 30 s before
    and after it and the recovery time: seconds from the kill until output flows again and
    every later second's p50 is back under twice the p50 before the kill."""
    if not samples:
        return {"latency_p50_ms": None, "latency_p99_ms": None, "latency_per_s": []}
    per_s: dict[int, list[int]] = {}
    for visible, latency in samples:
        per_s.setdefault(visible // 1000, []).append(latency)
    first = min(per_s)
    series = [
        {"s": s - first, "p50": percentile(v, 50), "p99": percentile(v, 99), "n": len(v)}
        for s, v in sorted(per_s.items())
    ]
    out: dict[str, Any] = {
        "latency_p50_ms": percentile([lat for _, lat in samples], 50),
        "latency_p99_ms": percentile([lat for _, lat in samples], 99),
        "latency_per_s": series,
        "first_output_ms": min(v for v, _ in samples),
    }
    visible = sorted(v for v, _ in samples)
    gaps = [b - a for a, b in zip(visible, visible[1:], strict=False)]
    out["longest_output_gap_ms"] = max(gaps, default=0)
    if killed_ms is not None:
        out.update(recovery_figures(samples, killed_ms))
    return out


def recovery_figures(samples: list[tuple[int, int]], killed_ms: int) -> dict[str, Any]:
    """p99 of the 30 s before and after the kill, and CheckMate's measure of a pipeline's
    recovery, ``disturbance_s`` (metrics/recovery.py: not the recovery time of DESIGN 4)."""
    before = [lat for vis, lat in samples if killed_ms - 30_000 <= vis < killed_ms]
    after = [lat for vis, lat in samples if killed_ms <= vis < killed_ms + 30_000]
    return {
        "p99_30s_before_ms": percentile(before, 99) if before else None,
        "p99_30s_after_ms": percentile(after, 99) if after else None,
        DISTURBANCE_KEY: disturbance_s(samples, killed_ms),
    }


def rederive_report(out_prefix: str, console: Console) -> dict[str, Any]:
    """Recompute each killed trial's recovery time from its per-second p50s (a second's p50
    standing for its n outputs, visible mid-second) with the current ``recovery_figures``;
    the value measured on the raw samples stays as ``disturbance_s_measured``."""
    path = Path(f"{out_prefix}.json")
    report = json.loads(path.read_text())
    for suite in SUITES:
        for trial in report.get(suite, []):
            if not trial.get("killed_ms") or not trial.get("first_output_ms"):
                continue
            first_s = trial["first_output_ms"] // 1000 * 1000
            samples = [
                (first_s + p["s"] * 1000 + 500, int(p["p50"]))
                for p in trial["latency_per_s"]
                for _ in range(p["n"])
            ]
            if "recovery_time_s" in trial:  # written before the measure had its own name
                trial.setdefault(DISTURBANCE_KEY, trial.pop("recovery_time_s"))
            trial.setdefault(f"{DISTURBANCE_KEY}_measured", trial.get(DISTURBANCE_KEY))
            again = recovery_figures(samples, trial["killed_ms"])[DISTURBANCE_KEY]
            trial[DISTURBANCE_KEY] = again
            trial[f"{DISTURBANCE_KEY}_basis"] = "per-second p50s (rederived)"
            console.print(f"{trial['trial']}: recovery {again} s")
    _write(report, Path(out_prefix))
    chart(report, Path(f"{out_prefix}.png"))
    return report


def _recovery(run: Any) -> dict[str, Any]:
    if not run.recoveries:
        return {"recoveries": []}
    out = []
    for r in run.recoveries:
        out.append(
            {
                "failed": r.failed,
                "restarted": sorted(r.plan.restart),
                "rewound": r.plan.rewind,
                "local": r.plan.local,
                "restart_time_s": r.restart_time_s,
                **{k: v for k, v in r.plan.detail.items() if k != "failed"},
            }
        )
    return {"recoveries": out}


def _protocol_figures(run: Any, spec: Any, metrics: Path) -> dict[str, Any]:
    view = run.view
    graph = view.graph()
    live = {s.name for s in view.stages}
    checkpoints = list(graph.checkpoints())
    invalid = invalid_checkpoints(graph, strict=True, current=view.current(live))
    out: dict[str, Any] = {
        "checkpoints": len(checkpoints),
        "invalid_checkpoints": len(invalid),
        "invalid_pct": round(100 * len(invalid) / len(checkpoints), 2) if checkpoints else 0.0,
        "forced_checkpoints": sum(1 for c in checkpoints if c.forced),
    }
    if spec.protocol == "coor":
        from recovery_lib.protocols.coordinated import checkpoint_times

        times = list(checkpoint_times(view.protocol_dir, live).values())
        out["checkpoint_time_ms"] = statistics.mean(times) if times else None
        out["epochs_complete"] = len(times)
    frame = read_frame(
        metrics,
        "SELECT run_id, wal_commit_ms, commit_offsets_ms, state_commit_ms FROM micro_batches "
        "WHERE run_id LIKE ?",
        [f"{spec.name}-%"],
    )
    if len(frame):
        snap = frame["commit_offsets_ms"].fillna(0) + frame["state_commit_ms"].fillna(0)
        out["stage_snapshot_ms"] = round(float(snap.mean()), 2)
        if spec.protocol != "coor":
            out["checkpoint_time_ms"] = out["stage_snapshot_ms"]
    payload = protocol = 0
    for stage in spec.stages[:-1]:
        for record in read_topic(spec.output_topic(stage)):
            payload += len(record.key or b"") + len(record.value or b"")
            for key, value in record.headers:
                size = len(key) + len(value or b"")
                if key == CIC_HEADER:
                    protocol += size
                else:
                    payload += size
    markers = view.protocol_dir / "markers"
    if markers.exists():
        protocol += sum(p.stat().st_size for p in markers.glob("*.jsonl"))
    out["message_overhead"] = round((payload + protocol) / payload, 4) if payload else None
    return out


UNIFORM_ORDER = tuple(PROTOCOLS)  # the baseline first

SUITES = {
    # Uniform NexMark: capacity and overheads per protocol, normalised to "none"; each
    # protocol twice, in the order A B C D D C B A, so warm-up and drift hit all alike.
    "uniform": [
        Trial(p, proto, events)
        for p, events in (("q1p", 60_000), ("q3p", 200_000), ("q8p", 200_000), ("q12p", 60_000))
        for proto in (*UNIFORM_ORDER, *reversed(UNIFORM_ORDER))
    ],
    # Local recovery (UNC) vs global rollback (COOR): the middle stage of a three-stage chain
    # killed at half its MST (at a fixed 3,000/s, and at half the backlog capacity, it was
    # overloaded: p50 32 s and 18 s).
    "recovery": [Trial("q1p3", proto, 0, kill="reroute", load=0.5) for proto in ("unc", "coor")],
    # The cyclic query, UNC vs CIC, a stage killed (at 1,000/s the causal join fell behind:
    # p50 20 s).
    "cyclic": [Trial("reach", proto, 36_000, rate=300, kill="join") for proto in ("unc", "cic")],
    # Skew (hot sellers) at 50 % and 80 % of the MST, the join killed.
    "skew": [
        Trial("q3p", proto, 0, kill="join", hot_ratio=hot, load=load)
        for load in (0.5, 0.8)
        for hot in (0.1, 0.2, 0.3)
        for proto in CHECKMATE_PROTOCOLS
    ],
}

CAPACITY_EVENTS = 100_000


def _capacity(pipeline: str, report: dict[str, Any], run: Any) -> float:
    """The pipeline's capacity without a protocol: from this report's uniform suite, else
    measured now (a backlog drain)."""
    for trial in report.get("uniform", []) + report.get("capacity", []):
        if trial["pipeline"] == pipeline and trial["protocol"] == "none":
            return float(trial["throughput_eps"])
    trial = run(Trial(pipeline, "none", CAPACITY_EVENTS))
    report.setdefault("capacity", []).append(trial)
    return float(trial["throughput_eps"])


# The sustainable throughput (MST) search: paced runs without a protocol, from half the
# backlog capacity (a backlog drain amortises every batch's fixed cost over a huge batch, so
# it overstates what a paced pipeline sustains), down or up by MST_STEP until the answer
# changes; the highest rate that kept up is the MST (a lower bound, to within the step).
MST_PACED_S = 90.0
MST_STEP = 0.7
MST_TRIES = 5


def sustained(series: list[dict[str, Any]]) -> bool:
    """Whether a paced run kept up: its per-second p50 latency stopped growing, the last
    third of the run's output at most 1.25 x the middle third (the first third is the
    stages' start-up backlog)."""
    if len(series) < 3:
        return False
    start, end = series[0]["s"], series[-1]["s"]
    third = (end - start) / 3
    middle = [p["p50"] for p in series if start + third <= p["s"] < start + 2 * third]
    last = [p["p50"] for p in series if p["s"] >= start + 2 * third]
    if not middle or not last:
        return False
    return statistics.median(last) <= 1.25 * statistics.median(middle)


def _mst(pipeline: str, report: dict[str, Any], run: Any) -> float:
    """The pipeline's MST without a protocol: from this invocation's search, else searched now."""
    for entry in report.get("mst", []):
        if entry["pipeline"] == pipeline:
            return float(entry["mst_eps"])
    rate = 0.5 * _capacity(pipeline, report, run)
    tries: list[dict[str, Any]] = []
    best: float | None = None
    ascending: bool | None = None  # set by the first try: up while it keeps up, else down
    for _ in range(MST_TRIES):
        trial = Trial(pipeline, "none", int(rate * MST_PACED_S), rate=round(rate))
        result = run(replace(trial, paced_s=MST_PACED_S))
        kept_up = sustained(result.get("latency_per_s") or [])
        tries.append({"rate": round(rate), "sustained": kept_up,
                      "latency_p50_ms": result.get("latency_p50_ms")})  # fmt: skip
        if ascending is None:
            ascending = kept_up
        if kept_up:
            best = rate
        if kept_up != ascending:
            break  # the answer changed: up, a rate failed; down, a rate kept up
        rate = rate / MST_STEP if ascending else rate * MST_STEP
    if best is None:
        raise JobFailed(
            f"{pipeline}: no paced rate down to {tries[-1]['rate']} ev/s kept up; the machine is "
            "busy (stop other Spark work) or the pipeline's stages are too slow to measure here"
        )
    report.setdefault("mst", []).append({"pipeline": pipeline, "mst_eps": round(best),
                                         "tries": tries})  # fmt: skip
    return best


def _paced(trial: Trial, capacity: float) -> Trial:
    rate = round(trial.load * capacity) if trial.load is not None else trial.rate
    events = trial.events or int(rate * trial.paced_s)
    return replace(trial, rate=rate, events=events)


def select_trials(
    suites: list[str],
    pipelines: list[str] | None = None,
    loads: list[float] | None = None,
    protocols: list[str] | None = None,
    hot_ratios: list[float] | None = None,
) -> dict[str, list[Trial]]:
    """Each suite's trials of ``pipelines`` and ``protocols`` and, among paced ones, at
    ``loads``; among skewed ones, at ``hot_ratios``."""
    return {
        suite: [
            t
            for t in SUITES[suite]
            if (not pipelines or t.pipeline in pipelines)
            and (not loads or t.load is None or t.load in loads)
            and (not protocols or t.protocol in protocols)
            and (not hot_ratios or t.hot_ratio is None or t.hot_ratio in hot_ratios)
        ]
        for suite in suites
    }


def run_protocol_bench(
    suites: list[str],
    out_prefix: str,
    console: Console,
    pipelines: list[str] | None = None,
    merge: bool = False,
    loads: list[float] | None = None,
    protocols: list[str] | None = None,
    hot_ratios: list[float] | None = None,
) -> dict[str, Any]:
    """Run the suites' trials (only ``pipelines``' and ``protocols``', among paced ones
    only ``loads``' and among skewed ones only ``hot_ratios``').
    With ``merge`` an existing report keeps every other trial and its MST searches, which
    the paced trials run now reuse (so all of a suite's trials share one MST; delete a
    pipeline's ``mst`` entry to search again)."""

    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise ConfigurationError(f"unknown suites {unknown}; choose from {sorted(SUITES)}")
    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    workdir = get_settings().home / "bench" / f"protocols-{uuid.uuid4().hex[:6]}"
    report: dict[str, Any] = {"machine": f"2 cores, local stages, {broker_description()}"}
    selected = select_trials(suites, pipelines, loads, protocols, hot_ratios)
    previous = Path(f"{out}.json")
    if merge and previous.exists():
        report = json.loads(previous.read_text())
        for suite, trials in selected.items():  # a trial run now replaces its earlier result
            names = {t.name for t in trials}
            report[suite] = [r for r in report.get(suite, []) if r.get("trial") not in names]

    def run(trial: Trial) -> dict[str, Any]:
        return run_trial(trial, workdir, console)

    with broker_for_run(console.print):
        for suite, trials in selected.items():
            console.print(f"[bold]{suite}[/]: {len(trials)} trials")
            results = report.setdefault(suite, [])
            for trial in trials:
                if trial.load is not None:
                    trial = _paced(trial, _mst(trial.pipeline, report, run))
                results.append(run(trial))
                _write(report, out)  # after every trial: an interrupted run keeps its results
    _write(report, out)
    chart(report, Path(f"{out}.png"))
    console.print(f"report: {out}.json, chart: {out}.png")
    shutil.rmtree(workdir, ignore_errors=True)
    return report


def _write(report: dict[str, Any], out: Path) -> None:
    report["summary"] = summarize(report)
    write_json_report(f"{out}.json", report)


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """Per pipeline: capacity normalised to protocol none, and the overheads."""
    summary: dict[str, Any] = {}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for trial in report.get("uniform", []):
        runs.setdefault((trial["pipeline"], trial["protocol"]), []).append(trial)

    def mean(trials: list[dict[str, Any]], key: str) -> float | None:
        values = [t[key] for t in trials if t.get(key) is not None]
        return round(statistics.mean(values), 3) if values else None

    for (pipeline, protocol), trials in runs.items():
        summary.setdefault(pipeline, {})[protocol] = {
            "throughput_eps": mean(trials, "throughput_eps"),
            "throughput_runs": [t.get("throughput_eps") for t in trials],
            "message_overhead": mean(trials, "message_overhead"),
            "invalid_pct": mean(trials, "invalid_pct"),
            "forced_checkpoints": mean(trials, "forced_checkpoints"),
            "checkpoint_time_ms": mean(trials, "checkpoint_time_ms"),
            "verdict_ok": all(t.get("verdict", {}).get("ok") for t in trials),
        }
    for entry in summary.values():
        base = (entry.get("none") or {}).get("throughput_eps")
        for values in entry.values():
            tp = values.get("throughput_eps")
            values["normalised"] = round(tp / base, 3) if base and tp else None
    return summary


PROTOCOL_COLOURS = {"none": "grey", "coor": "tab:red", "unc": "tab:blue", "cic": "tab:green"}


def chart(report: dict[str, Any], path: Path) -> None:
    """Four panels: uniform capacity per protocol; skew p50 by hot ratio; latency around the
    kill (local vs global recovery, the cyclic query); checkpoint time under skew."""
    fig, axes = new_figure(2, 2, figsize=(13, 9))
    _chart_uniform(axes[0][0], report.get("summary", {}))
    _chart_skew(axes[0][1], axes[1][1], report.get("skew", []))
    _chart_around_kill(axes[1][0], report.get("recovery", []) + report.get("cyclic", []))
    save_figure(fig, path, dpi=110)


def _chart_uniform(ax: Any, summary: dict[str, Any]) -> None:
    for i, proto in enumerate(PROTOCOL_COLOURS):
        xs = [j + i * 0.2 for j in range(len(summary))]
        ys = [(summary[p].get(proto) or {}).get("normalised") or 0 for p in summary]
        ax.bar(xs, ys, width=0.2, label=proto, color=PROTOCOL_COLOURS[proto])
    ax.set_xticks([j + 0.3 for j in range(len(summary))], list(summary))
    ax.axhline(1.0, color="black", linewidth=0.5)
    ax.set_ylabel("capacity / capacity without protocol")
    ax.set_title("uniform NexMark pipelines (mean of 2 runs each)")
    ax.legend(fontsize=8)


def _chart_skew(latency_ax: Any, checkpoint_ax: Any, trials: list[dict[str, Any]]) -> None:
    for proto in CHECKMATE_PROTOCOLS:
        for load, style in ((0.5, "-"), (0.8, "--")):
            points = sorted(
                (t["hot_ratio"], t) for t in trials if t["protocol"] == proto and t["load"] == load
            )
            if not points:
                continue
            hot = [h for h, _ in points]
            label = f"{proto} at {load:.0%}"
            colour = PROTOCOL_COLOURS[proto]
            latency_ax.plot(hot, [t["latency_p50_ms"] / 1000 for _, t in points], style,
                            marker="o", color=colour, label=label)  # fmt: skip
            checkpoint_ax.plot(hot, [t["checkpoint_time_ms"] for _, t in points], style,
                               marker="o", color=colour, label=label)  # fmt: skip
    latency_ax.set_xlabel("hot ratio")
    latency_ax.set_ylabel("p50 latency (s)")
    latency_ax.set_title("q3p under skew, the join killed: p50 latency")
    checkpoint_ax.set_xlabel("hot ratio")
    checkpoint_ax.set_ylabel("checkpoint time (ms)")
    checkpoint_ax.set_yscale("log")
    checkpoint_ax.set_title("q3p under skew: checkpoint time (COOR: marker to last commit)")
    for ax in (latency_ax, checkpoint_ax):
        if ax.lines:
            ax.legend(fontsize=7)


def _chart_around_kill(ax: Any, trials: list[dict[str, Any]]) -> None:
    for trial in trials:
        series, killed = trial.get("latency_per_s") or [], trial.get("killed_ms")
        if not series or killed is None:
            continue
        # Series seconds count from the first output; the kill came kill_at_s after it
        # (reports without first_output_ms: that, to the monitor's 0.25 s).
        first = trial.get("first_output_ms")
        offset = (first // 1000 * 1000 - killed) / 1000 if first else -trial["kill_at_s"]
        ax.plot([p["s"] + offset for p in series], [p["p50"] / 1000 for p in series],
                marker=".", color=PROTOCOL_COLOURS[trial["protocol"]],
                linestyle="-" if trial["pipeline"] != "reach" else ":",
                label=trial["trial"])  # fmt: skip
    ax.axvline(0, color="black", linewidth=0.5)
    ax.set_xlabel("s since the kill")
    ax.set_ylabel("p50 latency (s)")
    ax.set_title("a stage killed: q1p3 (UNC local, COOR global), cyclic query (dotted)")
    if ax.lines:
        ax.legend(fontsize=7)
