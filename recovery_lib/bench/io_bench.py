"""``recovery bench io``: the speed of the way in and out.

Measures, in one run on one machine: the broker's own produce and consume rate with
confluent-kafka (the ceiling), events/s for source -> noop, source -> stateful count by key,
source -> Kafka sink, and the end-to-end latency of a stateless query at a low input rate.
Throughput of a Spark path = input rows / summed trigger execution time of its batches, after
a warm-up run of the same path (a path's first query runs ~3x slower while its Python workers
start); a long-running job is in the warm state.

Beside the project's source, Spark's own Kafka source (``format("kafka")``, the one a team
would pick) on the same topic in the same run: events/s into noop (all columns, and key +
value), CPU seconds per million records (Spark's JVM and its Python workers, the broker left
out), and NexMark q1's end-to-end p50/p99 at two input rates with each source, both writing
through the project's Kafka sink, so only the way in differs. The project's source runs both
of its read paths: ``executors`` (the default, a Python read task per partition) and
``driver`` (the source's driver process reads each batch while planning it: io/driver_read.py).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from rich.console import Console

from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import JobFailed
from recovery_lib.files import write_json_report
from recovery_lib.io.sinks.dedup_reader import DedupReader
from recovery_lib.io.source import SOURCE_NAME
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import RANGE_FETCHES, client_config
from recovery_lib.metrics.resources import ResourceSampler
from recovery_lib.metrics.stats import percentile
from recovery_lib.runtime.pacing import Pacer
from recovery_lib.spark.session import build_session

PAYLOAD = b"x" * 100
PARTITIONS = 4
# Latency counts from when a record became readable: the broker's clock on the input and the
# output topics, not the producer's.
APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
# So a latency feeder may batch what it sends (its batching is not in the figure), and must:
# one request per record at 4,000-5,000 ev/s kept the feeder and the broker on a core of the
# machine's two, which the queries it measures did not get.
FEED_LINGER_MS = 5


def _produce(topic: str, count: int, keys: int = 1000) -> float:
    producer = Producer(
        {
            **client_config(),
            "linger.ms": "5",
            "batch.num.messages": "10000",
            "queue.buffering.max.messages": "1000000",
        }
    )
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(
                    topic, value=PAYLOAD, key=str(i % keys).encode(), partition=i % PARTITIONS
                )
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return count / (time.perf_counter() - started)


def _consume(topic: str, count: int, tuned: bool = False) -> float:
    """A plain consumer's rate over the topic: librdkafka's defaults, or ``tuned`` with the
    fetch settings the source's readers use (kafka/clients.py)."""
    consumer = Consumer(
        {
            **client_config(),
            "group.id": f"bench-{uuid.uuid4().hex}",
            "enable.auto.commit": "false",
            **(RANGE_FETCHES if tuned else {}),
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    started = time.perf_counter()
    seen = 0
    while seen < count and time.perf_counter() - started < 120:
        seen += sum(1 for m in consumer.consume(10_000, timeout=1) if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    return seen / elapsed


# The sources compared: the project's (io/source.py) and Spark's own Kafka connector.
# The project's source (its default read path), the same with readPath=driver, Spark's source.
OURS, DRIVER, SPARKS = "ours", "ours_driver", "spark"
SOURCES = (OURS, DRIVER, SPARKS)
LATENCY_RATES = (1_000.0, 4_000.0)  # q1's input, events/s: the low and the busy case here
LATENCY_WARMUP_RECORDS = 100  # through the query before the measured input (its workers up)
LATENCY_WARMUP_TIMEOUT_S = 120.0


def _read(spark: Any, source: str, topic: str) -> Any:
    """A stream of ``topic`` from its start through ``source``, 200k records per batch at most."""
    if source == SPARKS:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", client_config()["bootstrap.servers"])
            .option("startingOffsets", "earliest")
        )
    else:
        reader = spark.readStream.format(SOURCE_NAME).option("startingOffsets", "earliest")
        if source == DRIVER:
            reader = reader.option("readPath", "driver")
    return reader.option("subscribe", topic).option("maxOffsetsPerTrigger", "200000").load()


def _spark_rate(
    spark: Any,
    topic: str,
    checkpoint: Path,
    kind: str,
    out_topic: str | None = None,
    source: str = OURS,
) -> dict:
    from pyspark.sql import functions as F

    df = _read(spark, source, topic)
    if kind == "noop":
        writer = df.writeStream.format("noop")
    elif kind == "noop_kv":
        writer = df.select("key", "value").writeStream.format("noop")
    elif kind == "count":
        writer = df.groupBy("key").count().writeStream.outputMode("update").format("noop")
    else:
        writer = (
            df.select("key", "value")
            .writeStream.format(SOURCE_NAME)
            .option("topic", out_topic)
            .option("mode", "dedup")
        )
    started = time.perf_counter()
    with ResourceSampler(period_s=0.5) as resources:  # Spark's JVM and its Python workers
        query = (
            writer.trigger(availableNow=True).option("checkpointLocation", str(checkpoint)).start()
        )
        query.awaitTermination()
    wall = time.perf_counter() - started
    if query.exception() is not None:
        raise JobFailed(f"{kind} query failed: {query.exception()}")
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    busy_ms = sum(p["durationMs"]["triggerExecution"] for p in progress)
    _ = F  # keep the import local to Spark runs
    return {
        "source": source,
        "rows": rows,
        "batches": len(progress),
        "events_per_s": rows / (busy_ms / 1000),
        "wall_s": wall,
        "cpu_s": round(resources.cpu_s, 2),
        "cpu_s_per_million": round(resources.cpu_s / rows * 1e6, 2) if rows else None,
    }


BID_SCHEMA = "auction long, bidder long, price long, dateTime long"


def _progress_ms(timestamp: str) -> int:
    """A progress report's trigger time (ISO 8601, UTC) in epoch milliseconds."""
    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)


def bid_json(n: int) -> bytes:
    """NexMark bid ``n`` as JSON (q1's input)."""
    return json.dumps(
        {
            "auction": 1000 + n % 997,
            "bidder": 2000 + n % 4999,
            "price": 100 + n % 9000,
            "dateTime": 1_700_000_000_000 + n,
        }  # fmt: skip
    ).encode()


def _latency(spark: Any, workdir: Path, rate: float, seconds: float, source: str = OURS) -> dict:
    """NexMark q1 (a bid's price in euro) from ``source`` into the project's Kafka sink, fed
    at ``rate``: each output's broker time less its input's."""
    from pyspark.sql import functions as F

    admin = TopicAdmin()
    src, out = f"bench.lat.{uuid.uuid4().hex[:6]}", f"bench.latout.{uuid.uuid4().hex[:6]}"
    admin.create(src, 1, config=APPEND_TIME)
    admin.create(out, 1, config=APPEND_TIME)
    df = _read(spark, source, src)
    bid = F.from_json(F.col("value").cast("string"), BID_SCHEMA)
    q1 = F.to_json(
        F.struct(
            bid.auction.alias("auction"),
            bid.bidder.alias("bidder"),
            (bid.price * 0.908).alias("price"),  # q1: dollars to euro
            bid.dateTime.alias("dateTime"),
        )
    )
    stamped = df.select(
        q1.alias("value"),
        F.array(
            F.struct(
                F.lit("in_ts").alias("key"),
                F.unix_millis("timestamp").cast("string").cast("binary").alias("value"),
            )
        ).alias("headers"),
    )
    query = (
        stamped.writeStream.format(SOURCE_NAME)
        .option("topic", out)
        .option("mode", "dedup")
        # One checkpoint per run: a source runs at a rate once per round.
        .option("checkpointLocation", str(workdir / f"ck-lat-{source}-{src}"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    stop = threading.Event()

    def pace() -> None:
        producer = Producer({**client_config(), "linger.ms": str(FEED_LINGER_MS)})
        n = 0
        pacer = Pacer(rate)
        while not stop.is_set() and pacer.elapsed_s() < seconds:
            producer.produce(src, value=bid_json(n))
            producer.poll(0)
            n += 1
            pacer.wait(n)
        producer.flush(10)

    # Steady state: the first batch with input starts the Python workers (seconds; issue 56
    # measures that restart cost), so a few records go through before the measured ones.
    warm = Producer(client_config())
    for n in range(LATENCY_WARMUP_RECORDS):
        warm.produce(src, value=bid_json(-1 - n))
    warm.flush(10)
    deadline = time.monotonic() + LATENCY_WARMUP_TIMEOUT_S
    while sum(p["numInputRows"] for p in query.recentProgress) < LATENCY_WARMUP_RECORDS:
        if time.monotonic() > deadline or query.exception() is not None:
            query.stop()
            raise JobFailed(
                f"q1 ({source}) did not take its {LATENCY_WARMUP_RECORDS} warm-up records in "
                f"{LATENCY_WARMUP_TIMEOUT_S:.0f} s: {query.exception()}"
            )
        time.sleep(0.2)
    measured_from_ms = int(time.time() * 1000)
    pacer = threading.Thread(target=pace)
    pacer.start()
    pacer.join()
    time.sleep(3)
    # The measured batches only (not the warm-up's, which start the Python workers).
    busy = [
        p
        for p in query.recentProgress
        if p["numInputRows"] and _progress_ms(p["timestamp"]) >= measured_from_ms
    ]
    batch_ms = [p["durationMs"]["triggerExecution"] for p in busy]
    # Where a batch's time goes (Spark's phases: planning, the source's calls, the write).
    phases = sorted({phase for p in busy for phase in p["durationMs"]})
    phase_p50_ms = {
        phase: percentile(sorted(p["durationMs"].get(phase, 0) for p in busy), 50)
        for phase in phases
    }
    query.stop()
    latencies = []
    for record in DedupReader(out):
        in_ts = dict(record.headers).get("in_ts")
        if in_ts and int(in_ts) >= measured_from_ms:
            latencies.append(record.timestamp_ms - int(in_ts))
    latencies.sort()
    return {
        "source": source,
        "rate_eps": rate,
        "outputs": len(latencies),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "batch_p50_ms": percentile(batch_ms, 50),
        "batch_p99_ms": percentile(batch_ms, 99),
        "phase_p50_ms": phase_p50_ms,
        "latencies_ms": latencies,
    }


def run_io_bench(
    events: int = 300_000,
    out_prefix: str = "reports/bench_io",
    console: Console | None = None,
    latency_rate: float = 10.0,
    latency_seconds: float = 30.0,
) -> dict:
    console = console or Console()
    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    workdir = out.parent / f".bench-{uuid.uuid4().hex[:6]}"
    admin = TopicAdmin()
    topic = f"bench.src.{uuid.uuid4().hex[:6]}"
    admin.create(topic, PARTITIONS)
    report: dict[str, Any] = {
        "events": events,
        "partitions": PARTITIONS,
        "payload_bytes": len(PAYLOAD),
    }
    with console.status("broker ceiling: producing ...") as status:
        report["broker_produce_msgs_per_s"] = _produce(topic, events)
        status.update("broker ceiling: consuming ...")
        report["broker_consume_msgs_per_s"] = _consume(topic, events)
        report["broker_consume_tuned_msgs_per_s"] = _consume(topic, events, tuned=True)
        status.update("starting Spark ...")
        spark = build_session("bench_io")
        try:
            warm = f"bench.warm.{uuid.uuid4().hex[:6]}"
            admin.create(warm, PARTITIONS)
            _produce(warm, 20_000)
            paths = [(OURS, k) for k in ("noop", "noop_kv", "count", "kafka_sink")]
            # The driver path's bulk rate: every record through one Python process (its price).
            paths += [(DRIVER, "noop_kv")]
            paths += [(SPARKS, k) for k in ("noop", "noop_kv")]
            for source, kind in paths:
                out_topic = None
                if kind == "kafka_sink":
                    out_topic = f"bench.out.{uuid.uuid4().hex[:6]}"
                    admin.create(out_topic, PARTITIONS)
                name = path_name(source, kind)
                # Warm-up run of the same plan: Python workers of each kind start on first use.
                status.update(f"warm-up: {name} ...")
                _spark_rate(
                    spark, warm, workdir / f"ck-warm-{name}", kind, out_topic, source=source
                )
                status.update(f"{name} over {events:,} events ...")
                report[name] = _spark_rate(
                    spark, topic, workdir / f"ck-{name}", kind, out_topic, source=source
                )
            report["latency_by_source"] = []
            for rate in LATENCY_RATES:
                # Two rounds in opposite orders (ours, driver, Spark's; Spark's, driver, ours):
                # the run that comes first in a session is slower (its JVM less warm), so each
                # source's figures are the mean of an early and a late run.
                for rnd, order in enumerate((SOURCES, SOURCES[::-1])):
                    for source in order:
                        status.update(
                            f"q1 latency, {source} source, {rate:,.0f} ev/s, round {rnd + 1} ..."
                        )
                        entry = _latency(spark, workdir, rate, latency_seconds, source)
                        # The figures only: a run's latencies are 10^5 numbers (megabytes).
                        entry.pop("latencies_ms")
                        report["latency_by_source"].append({**entry, "round": rnd})
            status.update(f"latency at {latency_rate:g} ev/s for {latency_seconds:g} s ...")
            report["latency"] = _latency(spark, workdir, latency_rate, latency_seconds)
        finally:
            spark.stop()
            shutil.rmtree(workdir, ignore_errors=True)
    lat = report["latency"]
    report["summary"] = {
        "broker_produce_msgs_per_s": round(report["broker_produce_msgs_per_s"]),
        "broker_consume_msgs_per_s": round(report["broker_consume_msgs_per_s"]),
        "broker_consume_tuned_msgs_per_s": round(report["broker_consume_tuned_msgs_per_s"]),
        "source_to_noop_eps": round(report["source_to_noop"]["events_per_s"]),
        "source_key_value_to_noop_eps": round(report["source_to_noop_kv"]["events_per_s"]),
        "source_to_count_eps": round(report["source_to_count"]["events_per_s"]),
        "source_to_kafka_sink_eps": round(report["source_to_kafka_sink"]["events_per_s"]),
        "e2e_latency_p50_ms": lat["p50_ms"],
        "e2e_latency_p99_ms": lat["p99_ms"],
        # The source against a plain consumer (issue goal: >= 0.8 for key + value, >= 0.7 for
        # all columns), with librdkafka's defaults and with the source's own fetch settings.
        **{
            f"source{cols}_over_{base}": round(
                report[f"source_to_noop{kind}"]["events_per_s"]
                / report[f"broker_consume{suffix}_msgs_per_s"],
                3,
            )
            for cols, kind in (("", ""), ("_kv", "_kv"))
            for base, suffix in (("consume", ""), ("tuned_consume", "_tuned"))
        },
        "kafka_sink_over_noop": round(
            report["source_to_kafka_sink"]["events_per_s"]
            / report["source_to_noop"]["events_per_s"],
            3,
        ),
        "against_sparks_source": against_sparks_source(report),
    }
    write_json_report(f"{out}.json", report)
    _chart(report, Path(f"{out}.png"))
    console.print_json(json.dumps(report["summary"]))
    console.print(f"report: {out}.json, chart: {out}.png")
    return report


# Issue 55's goals for the project's source against Spark's: throughput and q1's p50.
GOAL_THROUGHPUT_RATIO = 0.8
GOAL_P50_RATIO = 1.2


def path_name(source: str, kind: str) -> str:
    """The report key of a measured path (the project's keep their old names)."""
    return f"source_to_{kind}" if source == OURS else f"{source}_source_to_{kind}"


def against_sparks_source(report: dict[str, Any]) -> dict[str, Any]:
    """The project's source over Spark's, each figure in the same run: throughput (goal
    >= 0.8x), CPU per million records, and q1's p50/p99 at each rate (goal: p50 <= 1.2x), for
    the default read path and (where the report has it) for readPath=driver."""
    out: dict[str, Any] = {}
    for kind, label in (("noop", "all_columns"), ("noop_kv", "key_value")):
        ours, theirs = report[path_name(OURS, kind)], report[path_name(SPARKS, kind)]
        ratio = ours["events_per_s"] / theirs["events_per_s"]
        out[label] = {
            "ours_eps": round(ours["events_per_s"]),
            "spark_eps": round(theirs["events_per_s"]),
            "ours_over_spark": round(ratio, 3),
            "within_goal": ratio >= GOAL_THROUGHPUT_RATIO,
            "ours_cpu_s_per_million": ours.get("cpu_s_per_million"),
            "spark_cpu_s_per_million": theirs.get("cpu_s_per_million"),
        }
    if path_name(DRIVER, "noop_kv") in report:
        driver = report[path_name(DRIVER, "noop_kv")]
        theirs = report[path_name(SPARKS, "noop_kv")]
        out["key_value_driver_read"] = {
            "driver_eps": round(driver["events_per_s"]),
            "driver_over_spark": round(driver["events_per_s"] / theirs["events_per_s"], 3),
            "driver_cpu_s_per_million": driver.get("cpu_s_per_million"),
        }
    latency: dict[str, Any] = {}
    for rate in sorted({r["rate_eps"] for r in report.get("latency_by_source", [])}):
        runs = [r for r in report["latency_by_source"] if r["rate_eps"] == rate]
        ours, driver, theirs = (
            _rounds_mean([r for r in runs if r["source"] == s]) for s in SOURCES
        )
        p50_ratio = ours["p50_ms"] / theirs["p50_ms"] if theirs["p50_ms"] else None
        driver_ratio = (
            driver["p50_ms"] / theirs["p50_ms"] if driver["p50_ms"] and theirs["p50_ms"] else None
        )
        latency[f"{rate:g}"] = {
            "ours_p50_ms": ours["p50_ms"],
            "spark_p50_ms": theirs["p50_ms"],
            "ours_p99_ms": ours["p99_ms"],
            "spark_p99_ms": theirs["p99_ms"],
            "p50_ours_over_spark": round(p50_ratio, 3) if p50_ratio is not None else None,
            "rounds_p50_ms": {OURS: ours["rounds_p50_ms"], SPARKS: theirs["rounds_p50_ms"]},
            "within_goal": p50_ratio is not None and p50_ratio <= GOAL_P50_RATIO,
            # readPath=driver (None in a report from before it).
            "driver_p50_ms": driver["p50_ms"],
            "driver_p99_ms": driver["p99_ms"],
            "p50_driver_over_spark": round(driver_ratio, 3) if driver_ratio is not None else None,
            "driver_within_goal": driver_ratio is not None and driver_ratio <= GOAL_P50_RATIO,
            # Where a batch's time goes with each source (the difference is the why).
            "batch_phase_p50_ms": {
                phase: {
                    OURS: ours.get("phase_p50_ms", {}).get(phase),
                    **(
                        {DRIVER: driver["phase_p50_ms"].get(phase)}
                        if driver["rounds_p50_ms"]
                        else {}
                    ),
                    SPARKS: ms,
                }
                for phase, ms in theirs.get("phase_p50_ms", {}).items()
            },
        }
        if driver["rounds_p50_ms"]:
            latency[f"{rate:g}"]["rounds_p50_ms"][DRIVER] = driver["rounds_p50_ms"]
    out["q1_latency_by_rate"] = latency
    return out


def _rounds_mean(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One source's latency figures at one rate: the mean over its rounds (a report from
    before the rounds has one run)."""

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return round(sum(known) / len(known), 1) if known else None

    phases = sorted({p for r in runs for p in r.get("phase_p50_ms", {})})
    return {
        "p50_ms": mean([r["p50_ms"] for r in runs]),
        "p99_ms": mean([r["p99_ms"] for r in runs]),
        "phase_p50_ms": {p: mean([r.get("phase_p50_ms", {}).get(p) for r in runs]) for p in phases},
        "rounds_p50_ms": [r["p50_ms"] for r in runs],
    }


def _chart(report: dict, path: Path) -> None:
    s = report["summary"]
    fig, (ax1, ax2, ax3) = new_figure(1, 3, figsize=(18, 4.8))
    names = [
        "broker\nproduce",
        "broker\nconsume",
        "broker\nconsume\n(tuned)",
        "source\n->noop",
        "source(k,v)\n->noop",
        "source\n->count",
        "source\n->Kafka sink",
        "Spark's\nsource\n->noop",
        "Spark's\nsource(k,v)\n->noop",
    ]
    values = [
        s["broker_produce_msgs_per_s"],
        s["broker_consume_msgs_per_s"],
        s["broker_consume_tuned_msgs_per_s"],
        s["source_to_noop_eps"],
        s["source_key_value_to_noop_eps"],
        s["source_to_count_eps"],
        s["source_to_kafka_sink_eps"],
        s["against_sparks_source"]["all_columns"]["spark_eps"],
        s["against_sparks_source"]["key_value"]["spark_eps"],
    ]
    colors = ["#999"] * 3 + ["#1f77b4"] * 4 + ["#ff7f0e"] * 2
    driver_read = s["against_sparks_source"].get("key_value_driver_read")
    if driver_read:
        names.append("source(k,v)\nreadPath=\ndriver\n->noop")
        values.append(driver_read["driver_eps"])
        colors.append("#2ca02c")
    bars = ax1.bar(range(len(names)), [v / 1000 for v in values], color=colors)
    ax1.set_xticks(range(len(names)), names, fontsize=7)
    ax1.bar_label(bars, fmt="%.0fk")
    ax1.set_ylabel("thousand events / s")
    ax1.set_title("throughput (one run, one machine)")
    lat = report["latency"]["latencies_ms"]
    if lat:
        ax2.hist(lat, bins=40, color="#2ca02c")
        ax2.axvline(
            s["e2e_latency_p50_ms"],
            color="k",
            linestyle="--",
            label=f"p50 {s['e2e_latency_p50_ms']:.0f} ms",
        )
        ax2.axvline(
            s["e2e_latency_p99_ms"],
            color="r",
            linestyle="--",
            label=f"p99 {s['e2e_latency_p99_ms']:.0f} ms",
        )
        ax2.legend()
    ax2.set_xlabel("end-to-end latency (ms)")
    ax2.set_title(f"stateless query at {report['latency']['rate_eps']:g} ev/s")
    by_rate = s["against_sparks_source"]["q1_latency_by_rate"]
    rates = list(by_rate)
    series = [
        ("ours_p50_ms", "ours p50", "#1f77b4"),
        ("driver_p50_ms", "ours, readPath=driver, p50", "#2ca02c"),
        ("spark_p50_ms", "Spark's p50", "#ff7f0e"),
        ("ours_p99_ms", "ours p99", "#aec7e8"),
        ("driver_p99_ms", "ours, readPath=driver, p99", "#98df8a"),
        ("spark_p99_ms", "Spark's p99", "#ffbb78"),
    ]
    series = [f for f in series if any(by_rate[r].get(f[0]) for r in rates)]
    width = 0.8 / max(len(series), 1)
    for i, (field, label, color) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(rates))]
        ax3.bar(xs, [by_rate[r].get(field) or 0 for r in rates], width, label=label, color=color)
    ax3.set_xticks(range(len(rates)), [f"{float(r):,.0f} ev/s" for r in rates])
    ax3.set_ylabel("end-to-end latency (ms)")
    ax3.set_title("NexMark q1: the project's source vs Spark's")
    ax3.set_ylim(top=ax3.get_ylim()[1] * 1.45)  # room for the legend above the bars
    ax3.legend(fontsize=7, ncol=2, loc="upper left")
    save_figure(fig, path, dpi=110)
