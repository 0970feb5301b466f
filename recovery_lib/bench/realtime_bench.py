"""Spark's real-time mode (``trigger(realTime=...)``, Spark 4.1+) for stateless stages, against
micro-batches, in one run (``recovery bench realtime``).

Every stage is its own Spark application (``python -m recovery_lib.bench.realtime_bench
stage ...``), Kafka in and Kafka out through Spark's connector, no Python UDF: real-time mode
runs stateless queries with long-running tasks, one core per input partition.

* **Latency.** q1 alone (one stage) and a three-stage pipeline (q1's projection, a derived
  field, a filter; each stage's output topic is the next one's input), in real-time mode and
  in micro-batch mode (``processingTime=0``), at each rate: p50/p99 of the final output's
  broker time less the first input's.
* **A killed stage.** The real-time pipeline with its middle stage SIGKILLed and started again
  on its checkpoint: the restart's cost (kill to the stage's query running again, and the
  output gap at the end of the pipeline), and the output judged by the oracle against a
  failure-free run of the same three stages on the same input, as a plain consumer reads it
  and through the project's dedup reader. The first stage stamps each record with a lineage id
  from its input position (``rl.id``); the later stages carry it, so a re-written record keeps
  its id.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from recovery_lib.bench.io_bench import APPEND_TIME, FEED_LINGER_MS, bid_json
from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import JobFailed
from recovery_lib.files import write_json_report
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import client_config
from recovery_lib.kafka.exceptions import KafkaLayerError
from recovery_lib.kafka.headers import ID_HEADER
from recovery_lib.metrics.stats import percentile
from recovery_lib.runtime.pacing import Pacer

__all__ = ["REALTIME_RATES", "STAGES", "run_realtime_bench"]

log = logging.getLogger(__name__)

REALTIME_RATES = (1_000.0, 5_000.0)  # events/s, issue 55's two rates
STAGES = 3
TRIGGERS = ("realtime", "microbatch")
# Real-time mode's batch duration is its checkpoint interval, not a latency target.
REALTIME_CHECKPOINT_INTERVAL = "10 seconds"
WARMUP_RECORDS = 100
READY_TIMEOUT_S = 180.0
DRAIN_S = 5.0  # after the input ends, for the last records to come through
BID = "auction long, bidder long, price long, dateTime long"
GOAL_PIPELINE_OVER_ONE = 2.0  # the pipeline's p50 within 2x of q1 alone (real-time)
GOAL_PIPELINE_P50_MS = 1_000.0


# -- the stages (one Spark application each) -------------------------------------------------


def stage_frame(spark: Any, stage: int, source: str, bootstrap: str) -> Any:
    """Stage ``stage`` (1-based) of the pipeline reading ``source``: Kafka records with a JSON
    value, built-in functions only (real-time mode allows no Python UDF)."""
    from pyspark.sql import functions as F

    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    return apply_stage(raw, stage, F)


def apply_stage(raw: Any, stage: int, F: Any) -> Any:  # noqa: N803 - pyspark's functions
    """One stage on Kafka's columns; returns key, value and headers for Kafka's sink."""
    if stage == 1:  # q1: a bid's price in euro; the input's time and position travel along
        bid = F.from_json(F.col("value").cast("string"), BID)
        value = F.struct(
            bid.auction.alias("auction"),
            bid.bidder.alias("bidder"),
            (bid.price * 0.908).alias("price"),
            bid.dateTime.alias("dateTime"),
            F.unix_millis("timestamp").alias("in_ts"),
        )
        lineage = F.concat_ws("/", F.col("topic"), F.col("partition"), F.col("offset"))
        headers = F.array(
            F.struct(F.lit(ID_HEADER).alias("key"), lineage.cast("binary").alias("value"))
        )
        return raw.select(F.col("key"), F.to_json(value).alias("value"), headers.alias("headers"))
    schema = "auction long, bidder long, price double, dateTime long, in_ts long, band long"
    row = F.from_json(F.col("value").cast("string"), schema)
    if stage == 2:  # a derived field: the price band
        kept = [row[f].alias(f) for f in ("auction", "bidder", "price", "dateTime", "in_ts")]
        value = F.struct(*kept, F.floor(row.price / 100).alias("band"))
        return raw.select(F.col("key"), F.to_json(value).alias("value"), F.col("headers"))
    # stage 3: a filter (no bid has a negative price: all pass) and a projection
    kept = raw.where(row.price >= 0)
    value = F.struct(row.auction.alias("auction"), row.price.alias("price"),
                     row.band.alias("band"), row.in_ts.alias("in_ts"))  # fmt: skip
    return kept.select(F.col("key"), F.to_json(value).alias("value"), F.col("headers"))


def run_stage(argv: list[str]) -> None:
    """``stage <n> <source> <sink> <realtime|microbatch> <checkpoint> <bootstrap>``: run one
    stage until killed; ``<first>-<last>`` with comma-separated sources and sinks: those
    stages as queries of one application (a real-time query's task holds a core each)."""
    from recovery_lib.spark.session import build_session

    stage, source, sink, trigger, checkpoint, bootstrap = argv
    first, _, last = stage.partition("-")
    numbers = range(int(first), int(last or first) + 1)
    spark = build_session(f"realtime_stage{stage}", master=f"local[{max(2, len(numbers) + 1)}]")
    places = zip(numbers, source.split(","), sink.split(","), strict=True)
    for number, read, write in places:
        own = f"{checkpoint}-{number}" if len(numbers) > 1 else checkpoint
        writer = (
            stage_frame(spark, number, read, bootstrap)
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", write)
            .option("checkpointLocation", own)
            .outputMode("update")
        )
        if trigger == "realtime":
            writer = writer.trigger(realTime=REALTIME_CHECKPOINT_INTERVAL)
        else:
            writer = writer.trigger(processingTime="0 seconds")
        writer.start()
    Path(f"{checkpoint}.started").write_text(str(time.time()))
    spark.streams.awaitAnyTermination()


# -- a pipeline of stage processes -----------------------------------------------------------


@dataclass
class StageProcess:
    stage: int | str  # or first-last: several stages in one application
    source: str
    sink: str
    trigger: str
    checkpoint: Path
    log_path: Path
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        Path(f"{self.checkpoint}.started").unlink(missing_ok=True)
        args = [self.stage, self.source, self.sink, self.trigger, self.checkpoint]
        cmd = [sys.executable, "-m", "recovery_lib.bench.realtime_bench", "stage", *map(str, args)]
        cmd.append(client_config()["bootstrap.servers"])
        with self.log_path.open("a") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def started(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise JobFailed(f"stage {self.stage} exited ({self.proc.returncode}): {self.log_path}")
        return Path(f"{self.checkpoint}.started").exists()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:  # a stage that does not stop on SIGTERM
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


class Pipeline:
    """``stages`` stage processes chained through topics, input topic ``source``."""

    def __init__(
        self, workdir: Path, stages: int, trigger: str, tag: str, one_app: bool = False
    ) -> None:
        self.admin = TopicAdmin()
        self.source = f"bench.rt.{tag}.in"
        topics = [self.source, *[f"bench.rt.{tag}.s{i}" for i in range(1, stages + 1)]]
        for topic in topics:  # the broker's clock on every record: when it became readable
            self.admin.create(topic, 1, config=APPEND_TIME)
        self.sink = topics[-1]
        self.topics = topics
        if one_app:  # every stage a query of one Spark application
            together = StageProcess(
                f"1-{stages}", ",".join(topics[:-1]), ",".join(topics[1:]), trigger,
                workdir / tag / "ck", workdir / f"{tag}.app.log",
            )  # fmt: skip
            self.stages = [together]
            return
        self.stages = [
            StageProcess(
                i,
                topics[i - 1],
                topics[i],
                trigger,
                workdir / tag / f"ck{i}",
                workdir / f"{tag}.stage{i}.log",
            )  # fmt: skip
            for i in range(1, stages + 1)
        ]

    def start(self) -> None:
        for stage in self.stages:
            stage.start()
        _wait(lambda: all(s.started() for s in self.stages), READY_TIMEOUT_S, "stages to start")

    def output_reached(self, count: int) -> Callable[[], bool]:
        """Whether ``count`` records came out (raises when a stage process died)."""
        return lambda: all(s.started() for s in self.stages) and _count(self.sink) >= count

    def stop(self) -> None:
        for stage in self.stages:
            stage.kill(signal.SIGTERM)

    def delete_topics(self) -> None:
        """Best effort: a broker slow to delete (its stages just stopped) fails no run."""
        for topic in self.topics:
            try:
                self.admin.delete(topic)
            except KafkaLayerError as exc:
                log.warning("bench topic %s not deleted: %s", topic, exc)


def _wait(done: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise JobFailed(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)


def _feed(topic: str, rate: float, seconds: float, first: int = 0) -> int:
    producer = Producer({**client_config(), "linger.ms": str(FEED_LINGER_MS)})
    pacer = Pacer(rate)
    n = 0
    while pacer.elapsed_s() < seconds:
        producer.produce(topic, value=bid_json(first + n))
        producer.poll(0)
        n += 1
        pacer.wait(n)
    producer.flush(30)
    return n


def _outputs(topic: str) -> list[tuple[int, int]]:
    """(broker time, input time) of each record of ``topic``."""
    consumer = Consumer(
        {
            **client_config(),
            "group.id": f"rt-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": "true",
        }
    )
    tp = TopicPartition(topic, 0)
    low, high = consumer.get_watermark_offsets(tp, timeout=10)
    consumer.assign([TopicPartition(topic, 0, low)])
    out: list[tuple[int, int]] = []
    seen = low
    try:
        while seen < high:
            for msg in consumer.consume(10_000, timeout=2.0):
                if msg.error() is not None:
                    continue
                seen = msg.offset() + 1
                out.append((msg.timestamp()[1], json.loads(msg.value())["in_ts"]))
    finally:
        consumer.close()
    return out


def _count(topic: str) -> int:
    consumer = Consumer({**client_config(), "group.id": "rt-count"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return high - low


def measure_latency(
    workdir: Path, stages: int, trigger: str, rate: float, seconds: float, one_app: bool = False
) -> dict:
    """One configuration's end-to-end latency at ``rate`` (steady state: a warm-up first);
    ``one_app``: the stages as queries of one application instead of one each."""
    tag = f"{trigger[:2]}{stages}{'a' if one_app else ''}x{rate:g}-{uuid.uuid4().hex[:4]}"
    pipe = Pipeline(workdir, stages, trigger, tag, one_app)
    try:
        pipe.start()
        producer = Producer(client_config())
        for n in range(WARMUP_RECORDS):
            producer.produce(pipe.source, value=bid_json(-1 - n))
        producer.flush(30)
        _wait(pipe.output_reached(WARMUP_RECORDS), READY_TIMEOUT_S, "the warm-up output")
        measured_from = int(time.time() * 1000)
        sent = _feed(pipe.source, rate, seconds)
        _settle(pipe.sink)
        lat = sorted(t - i for t, i in _outputs(pipe.sink) if i >= measured_from)
    finally:
        pipe.stop()
        pipe.delete_topics()
    return {
        "trigger": trigger,
        "stages": stages,
        "one_app": one_app,
        "rate_eps": rate,
        "sent": sent,
        "outputs": len(lat),
        "p50_ms": percentile(lat, 50),
        "p99_ms": percentile(lat, 99),
    }


def measure_stage_kill(
    workdir: Path, rate: float, seconds: float, kill_at_s: float, stage: int = 2
) -> dict:
    """The real-time pipeline with stage ``stage`` SIGKILLed and restarted at once; its output
    judged against a failure-free run of the same stages on the same input."""
    tag = f"kill-{uuid.uuid4().hex[:4]}"
    pipe = Pipeline(workdir, STAGES, "realtime", tag)
    victim = pipe.stages[stage - 1]
    timing: dict[str, float] = {}
    try:
        pipe.start()
        feeder = threading.Thread(
            target=lambda: timing.update(sent=_feed(pipe.source, rate, seconds)), daemon=True
        )
        feeder.start()
        time.sleep(kill_at_s)
        timing["killed"] = time.time()
        # A kill that found no running stage did not fire: the run shows nothing.
        timing["fired"] = float(victim.proc is not None and victim.proc.poll() is None)
        victim.kill()
        victim.start()
        _wait(victim.started, READY_TIMEOUT_S, f"stage {stage} to start again")
        timing["restarted"] = time.time()
        feeder.join()
        _settle(pipe.sink)  # the restarted stage's replay and catch-up included
    finally:
        pipe.stop()
    try:
        return _judge_kill(workdir, pipe, tag, stage, rate, timing)
    finally:
        pipe.delete_topics()


def _judge_kill(
    workdir: Path, pipe: Pipeline, tag: str, stage: int, rate: float, timing: dict[str, float]
) -> dict:
    from recovery_lib.verify.contract import ConsistencyContract
    from recovery_lib.verify.oracle import judge_topics

    reference = _reference_run(workdir, pipe.source, tag)
    contract = ConsistencyContract()
    name, missed = f"realtime-{STAGES}-stages", 0 if timing["fired"] else 1
    plain = judge_topics(name, contract, pipe.sink, reference, False, failures_not_fired=missed)
    deduped = judge_topics(name, contract, pipe.sink, reference, True, failures_not_fired=missed)
    arrivals = sorted(t for t, _ in _outputs(pipe.sink))
    killed_ms = int(timing["killed"] * 1000)
    pause = _longest_pause(arrivals, killed_ms)
    gap_ms = pause[1] - pause[0] if pause else None
    resumed = pause[1] - killed_ms if pause else None
    with contextlib.suppress(KafkaLayerError):  # best effort, as the pipeline's topics
        TopicAdmin().delete(reference)
    return {
        "killed_stage": stage,
        "kill_fired": bool(timing["fired"]),
        "rate_eps": rate,
        "sent": int(timing.get("sent", 0)),
        "restart_s": round(timing["restarted"] - timing["killed"], 2),
        "output_gap_ms": gap_ms,
        "output_resumed_after_kill_ms": resumed,
        "plain_consumer": _verdict(plain),
        "dedup_reader": _verdict(deduped),
    }


def _settle(topic: str, quiet_s: float = DRAIN_S, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait until ``topic`` gets no record for ``quiet_s`` (its stages caught up)."""
    deadline = time.monotonic() + timeout_s
    count, since = _count(topic), time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() < deadline:
        time.sleep(0.5)
        now = _count(topic)
        if now != count:
            count, since = now, time.monotonic()


def _longest_pause(arrivals: list[int], killed_ms: int) -> tuple[int, int] | None:
    """(last output before, first output after) of the longest time without output from the
    last output before the kill on (stage 3 goes on emitting what it had for a moment after
    stage 2 died): the output gap is its length, the output resumed at its end."""
    before = [t for t in arrivals if t <= killed_ms]
    after = [t for t in arrivals if t > killed_ms]
    if not before or not after:
        return None
    times = [before[-1], *after]
    return max(zip(times, times[1:], strict=False), key=lambda p: p[1] - p[0])


def _verdict(report: Any) -> dict:
    d = report.to_dict()
    keys = ("verdict", "guarantee", "outputs", "reference_outputs", "lost", "duplicated", "extra")
    return {k: d.get(k) for k in keys}


def _reference_run(workdir: Path, source: str, tag: str) -> str:
    """The failure-free run: the three stages chained in one availableNow query on the same
    input, through the same sink."""
    from pyspark.sql import functions as F

    from recovery_lib.spark.session import build_session

    reference = f"bench.rt.{tag}.reference"
    TopicAdmin().create(reference, 1, config=APPEND_TIME)
    spark = build_session("realtime_reference", master="local[2]")
    bootstrap = client_config()["bootstrap.servers"]
    frame = stage_frame(spark, 1, source, bootstrap)
    for stage in range(2, STAGES + 1):
        frame = apply_stage(frame, stage, F)
    query = (
        frame.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", reference)
        .option("checkpointLocation", str(workdir / tag / "ck-reference"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    return reference


def run_realtime_bench(
    out_prefix: str,
    workdir: Path,
    rates: tuple[float, ...] = REALTIME_RATES,
    seconds: float = 20.0,
    kill_rate: float = 1_000.0,
    progress: Callable[[str], None] = log.info,
) -> dict:
    """Every configuration's latency at every rate, then the stage kill; JSON + PNG."""
    latency = []
    for rate in rates:
        for trigger in TRIGGERS:
            for stages in (1, STAGES):
                progress(f"{trigger}, {stages} stage(s), {rate:g} ev/s")
                latency.append(measure_latency(workdir, stages, trigger, rate, seconds))
        progress(f"realtime, {STAGES} stages in one application, {rate:g} ev/s")
        latency.append(measure_latency(workdir, STAGES, "realtime", rate, seconds, one_app=True))
    progress(f"real-time pipeline, stage 2 killed, {kill_rate:g} ev/s")
    kill = measure_stage_kill(workdir, kill_rate, seconds * 2, seconds * 0.75)
    report = {"latency": latency, "stage_kill": kill, "summary": summarize(latency, kill)}
    out = Path(out_prefix)
    write_json_report(out.with_suffix(".json"), report)
    _chart(report, out.with_suffix(".png"))
    return report


def summarize(latency: list[dict], kill: dict | None) -> dict:
    """Per rate: the pipeline's p50 over q1 alone in real-time mode (goal <= 2x, and < 1 s),
    what each stage after the first adds to q1's p50, and real-time over micro-batch."""
    by = {(r["trigger"], r["stages"], r["rate_eps"]): r for r in latency if not r.get("one_app")}
    apps = {r["rate_eps"]: r for r in latency if r.get("one_app")}
    out: dict[str, Any] = {}
    for rate in sorted({r["rate_eps"] for r in latency}):
        one, pipe = by.get(("realtime", 1, rate)), by.get(("realtime", STAGES, rate))
        mb_one, mb_pipe = by.get(("microbatch", 1, rate)), by.get(("microbatch", STAGES, rate))
        ratio = _ratio(pipe, one)
        app = apps.get(rate)
        app_ratio = _ratio(app, one)
        out[f"{rate:g}"] = {
            "realtime_q1_p50_ms": one and one["p50_ms"],
            "realtime_pipeline_p50_ms": pipe and pipe["p50_ms"],
            "realtime_pipeline_p99_ms": pipe and pipe["p99_ms"],
            "microbatch_q1_p50_ms": mb_one and mb_one["p50_ms"],
            "microbatch_pipeline_p50_ms": mb_pipe and mb_pipe["p50_ms"],
            "pipeline_over_q1_realtime": ratio,
            "added_stage_ms_realtime": _per_added_stage(pipe, one),
            "pipeline_realtime_over_microbatch": _ratio(pipe, mb_pipe),
            "within_goal": _within_goal(pipe, ratio),
            # The same stages as queries of one application (one JVM instead of three).
            "realtime_pipeline_one_app_p50_ms": app and app["p50_ms"],
            "realtime_pipeline_one_app_p99_ms": app and app["p99_ms"],
            "pipeline_one_app_over_q1_realtime": app_ratio,
            "added_stage_ms_one_app": _per_added_stage(app, one),
            "within_goal_one_app": _within_goal(app, app_ratio),
        }
    if kill is not None:
        out["stage_kill"] = {
            "restart_s": kill["restart_s"],
            "output_gap_ms": kill["output_gap_ms"],
            "plain_consumer": kill["plain_consumer"]["guarantee"],
            "dedup_reader": kill["dedup_reader"]["guarantee"],
        }
    return out


def _per_added_stage(pipe: dict | None, one: dict | None) -> float | None:
    """What each stage after the first adds to q1's p50 (ms). q1 is one stage of the same
    kind, so the 2x goal needs each added stage under half of q1's p50."""
    if not pipe or not one or pipe["p50_ms"] is None or one["p50_ms"] is None:
        return None
    return round((pipe["p50_ms"] - one["p50_ms"]) / (STAGES - 1), 2)


def _within_goal(pipe: dict | None, ratio: float | None) -> bool:
    return (
        pipe is not None
        and ratio is not None
        and ratio <= GOAL_PIPELINE_OVER_ONE
        and (pipe["p50_ms"] or 0) < GOAL_PIPELINE_P50_MS
    )


def _ratio(a: dict | None, b: dict | None) -> float | None:
    if not a or not b or not a["p50_ms"] or not b["p50_ms"]:
        return None
    return round(a["p50_ms"] / b["p50_ms"], 3)


def _chart(report: dict, path: Path) -> None:
    fig, (ax1, ax2) = new_figure(1, 2, figsize=(13, 4.8))
    rows = report["latency"]
    short = {"realtime": "RT", "microbatch": "MB"}
    labels = [
        f"{short.get(r['trigger'], r['trigger'])} {r['stages']}"
        f"{' (1 app)' if r.get('one_app') else ''}\n{r['rate_eps']:g}/s"
        for r in rows
    ]
    xs = range(len(rows))
    ax1.bar([x - 0.2 for x in xs], [r["p50_ms"] or 0 for r in rows], 0.4, label="p50")
    ax1.bar([x + 0.2 for x in xs], [r["p99_ms"] or 0 for r in rows], 0.4, label="p99")
    ax1.set_xticks(list(xs), labels, fontsize=7)
    ax1.set_yscale("log")
    ax1.set_ylabel("end-to-end latency (ms, log)")
    ax1.set_title("q1 (1) and a 3-stage pipeline (3): real-time (RT) vs micro-batch (MB)")
    ax1.legend()
    kill = report["stage_kill"]
    names = ["restart (s)", "output gap (s)"]
    ax2.bar(names, [kill["restart_s"], (kill["output_gap_ms"] or 0) / 1000])
    ax2.set_title(
        f"stage 2 killed: plain consumer {kill['plain_consumer']['guarantee']}, "
        f"dedup reader {kill['dedup_reader']['guarantee']}",
        fontsize=9,
    )
    save_figure(fig, path)


if __name__ == "__main__":  # a stage process
    if len(sys.argv) > 1 and sys.argv[1] == "stage":
        run_stage(sys.argv[2:])
