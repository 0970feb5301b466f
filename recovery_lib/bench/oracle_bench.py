"""``recovery bench oracle``: how long the oracle takes, and how much memory, for 10^4 .. 10^7
outputs per side, against the physical limit: a plain confluent-kafka consumer that only reads
both topics (one after the other, and both at once in two processes).

Per size, one pair of topics (a reference run and a run with the same outputs under other
ids, as another batching gives) is judged three times, once per agreement (Exact, Fields,
KeyTotals). Every measurement runs in a fresh process, so its peak RSS is its own. Reported
per measurement: read_s (reading both topics, the DuckDB ingest overlapped), judge_s
(everything after), total_s, peak_rss_mb, and total / plain read as the ratio the goal names
(also against both topics read at once, in two plain reader processes).

``Exact (messages)``: Exact once more with the block consumer off (``RECOVERY_KAFKA_BLOCK_READER``
false: a confluent-kafka Message per record), the before of the reader's change in the same run.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import resource
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition

from recovery_lib.charts import new_figure, save_figure
from recovery_lib.errors import JobFailed
from recovery_lib.files import write_json_report
from recovery_lib.io.sinks.dedup_reader import topic_bounds
from recovery_lib.io.sinks.ids import ID_HEADER
from recovery_lib.kafka.admin import TopicAdmin
from recovery_lib.kafka.clients import BULK_READS, client_config
from recovery_lib.kafka.exceptions import RecordsNotAcknowledged
from recovery_lib.settings import reload_settings
from recovery_lib.verify.contract import ConsistencyContract, Fields, KeyTotals, Windows
from recovery_lib.verify.oracle import judge_topics
from recovery_lib.verify.schema import OutputSchema

PARTITIONS = 4
SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
# The goals for the largest size (10^7 outputs per side).
GOAL_JUDGE_S = 60.0
GOAL_RATIO = 1.3
GOAL_RSS_MB = 2048.0
MESSAGES = "Exact (messages)"  # the reader before the block consumer, for the before/after

CONTRACTS: dict[str, ConsistencyContract] = {
    "Exact": ConsistencyContract(),
    "Fields": ConsistencyContract(
        deterministic=False,
        agreement=Fields(("auction", "bidder", "dateTime", "price")),
        free=("euro",),
    ),
    "KeyTotals": ConsistencyContract(
        deterministic=False, agreement=KeyTotals(("bidder", "window_start"), "num", "sum")
    ),
}
# The values' Spark type (output_value) and their windows: each agreement once more with every
# output checked against them, in the same run (the check's cost is the ratio to the above).
OUTPUT_SCHEMA = OutputSchema.declared(
    {
        "auction": "long",
        "bidder": "long",
        "price": "long",
        "dateTime": "long",
        "num": "long",
        "window_start": "long",
        "euro": "double",
    }
)
CHECKED = " + schema"
GOAL_CHECK_RATIO = 1.10  # the schema and window checks within 10 % of the judge without them
JUDGED: dict[str, ConsistencyContract] = {
    **CONTRACTS,
    **{
        name + CHECKED: dataclasses.replace(
            contract,
            output_schema=OUTPUT_SCHEMA,
            windows=Windows("window_start", size_ms=10_000, clock="processing"),
        )
        for name, contract in CONTRACTS.items()
    },
}


def output_value(i: int) -> tuple[bytes, bytes]:
    """Output ``i`` (key, value): a bid with its window count and a converted price."""
    bidder = 1000 + (i * 7919) % 50_000
    value = {
        "auction": 1000 + i % 100_003,
        "bidder": bidder,
        "price": 100 + (i * 31) % 9_000,
        "dateTime": 1_700_000_000_000 + i,
        "num": 1 + i % 9,
        "window_start": 1_700_000_000_000 + (i // 50_000) * 10_000,
        "euro": round((100 + (i * 31) % 9_000) * 0.89, 2),
    }
    return str(bidder).encode(), json.dumps(value, separators=(",", ":")).encode()


def produce_side(topic: str, count: int, id_prefix: str, progress: Callable[[int], None]) -> None:
    """``count`` outputs into ``topic`` (created with PARTITIONS partitions), each with an id."""
    TopicAdmin(client_config()).create(topic, PARTITIONS)
    producer = Producer(
        {
            **client_config(),
            "linger.ms": "20",
            "batch.num.messages": "10000",
            "queue.buffering.max.messages": "1000000",
            "queue.buffering.max.kbytes": str(512 * 1024),
            "compression.type": "none",
        }
    )
    for i in range(count):
        key, value = output_value(i)
        while True:
            try:
                producer.produce(
                    topic,
                    value=value,
                    key=key,
                    partition=i % PARTITIONS,
                    headers=[(ID_HEADER, f"{id_prefix}-{i % PARTITIONS}-{i}".encode())],
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 100_000 == 0:
            producer.poll(0)
            progress(i)
    if producer.flush(300):
        raise RecordsNotAcknowledged(
            f"{topic}: outputs not acknowledged by the broker in 300 s; check the broker is up"
        )


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def plain_read(config: dict[str, str], topics: list[str]) -> dict[str, Any]:
    """The physical limit: every record of ``topics`` read (all partitions of a topic at once,
    as the oracle's reader does), its value touched, nothing kept."""
    started = time.perf_counter()
    records = 0
    for topic in topics:
        partitions, lows, ends = topic_bounds(topic, config, None)
        todo = {p for p in partitions if ends[p] > lows[p]}
        consumer = Consumer(
            {
                **config,
                **BULK_READS,
                "group.id": f"bench-oracle-{uuid.uuid4().hex}",
                "enable.auto.commit": "false",
            }
        )
        consumer.assign([TopicPartition(topic, p, lows[p]) for p in todo])
        try:
            while todo:
                msgs = consumer.consume(num_messages=10_000, timeout=1.0)
                values = list(map(Message.value, msgs))
                records += len(values)
                for p, o in zip(
                    map(Message.partition, msgs), map(Message.offset, msgs), strict=True
                ):
                    if o + 1 >= ends[p]:
                        todo.discard(p)
        finally:
            consumer.close()
    return {
        "records": records,
        "total_s": time.perf_counter() - started,
        "peak_rss_mb": _peak_rss_mb(),
    }


def plain_read_parallel(config: dict[str, str], topics: list[str]) -> dict[str, Any]:
    """Both topics read at once, one plain reader process each: the limit with both cores."""
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=len(topics), mp_context=context) as pool:
        results = list(pool.map(plain_read, [config] * len(topics), [[t] for t in topics]))
    return {
        "records": sum(r["records"] for r in results),
        "total_s": time.perf_counter() - started,
        "peak_rss_mb": sum(r["peak_rss_mb"] for r in results),
    }


def judged(
    config: dict[str, str], agreement: str, run: str, reference: str, blocks: bool = True
) -> dict[str, Any]:
    """One judgement of ``run`` against ``reference`` under the named agreement (``blocks``:
    read with the block consumer, else with confluent-kafka's messages)."""
    os.environ["RECOVERY_KAFKA_BLOCK_READER"] = str(blocks).lower()
    reload_settings()  # a fresh process: nothing else reads the settings

    timings: dict[str, float] = {}
    started = time.perf_counter()
    report = judge_topics(
        f"bench-{agreement}",
        JUDGED[agreement],
        run,
        reference,
        True,
        config=config,
        timings=timings,
    )
    return {
        **timings,
        "total_s": time.perf_counter() - started,
        "peak_rss_mb": _peak_rss_mb(),
        "verdict": str(report.verdict),
        "outputs": report.outputs,
        "reference_outputs": report.reference_outputs,
    }


def _child(queue: Any, fn: Callable[..., dict[str, Any]], args: tuple[Any, ...]) -> None:
    try:
        queue.put(fn(*args))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def in_fresh_process(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """``fn(*args)`` in a new process (its own peak RSS); stopped if it outlives the bench."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    # Not a daemon: plain_read_parallel starts reader processes of its own.
    process = ctx.Process(target=_child, args=(queue, fn, args))
    process.start()
    try:
        result = queue.get()
    finally:
        process.join(30)
        if process.is_alive():
            process.kill()
            process.join()
    if "error" in result:
        raise JobFailed(f"{fn.__name__}: {result['error']}")
    return result


def run_oracle_bench(
    sizes: tuple[int, ...],
    out_prefix: str,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Measure every size, write ``out_prefix``.json and .png, return the report."""
    config = client_config()
    rows: list[dict[str, Any]] = []
    admin = TopicAdmin(config)
    for size in sizes:
        tag = uuid.uuid4().hex[:8]
        run_topic, reference_topic = f"bench-oracle-{tag}.run", f"bench-oracle-{tag}.ref"
        started = time.perf_counter()
        for topic, prefix in ((reference_topic, "r"), (run_topic, "f")):
            produce_side(
                topic,
                size,
                prefix,
                lambda i, t=topic, n=size: progress(f"{t}: {i:,} of {n:,} produced") if i else None,
            )
        produce_s = time.perf_counter() - started
        try:
            plain = in_fresh_process(plain_read, config, [run_topic, reference_topic])
            parallel = in_fresh_process(plain_read_parallel, config, [run_topic, reference_topic])
            progress(
                f"{size:,} per side: plain read {plain['total_s']:.1f} s, "
                f"both topics at once {parallel['total_s']:.1f} s"
            )
            row: dict[str, Any] = {
                "outputs_per_side": size,
                "produce_s": produce_s,
                "plain": plain,
                "plain_parallel": parallel,
            }
            for agreement in JUDGED:
                result = in_fresh_process(judged, config, agreement, run_topic, reference_topic)
                result["ratio_to_plain_read"] = result["total_s"] / plain["total_s"]
                result["ratio_to_parallel_plain_read"] = result["total_s"] / parallel["total_s"]
                row[agreement] = result
                progress(
                    f"{size:,} per side, {agreement}: read {result['read_s']:.1f} s + judge "
                    f"{result['judge_s']:.1f} s = {result['ratio_to_plain_read']:.2f}x plain "
                    f"({result['ratio_to_parallel_plain_read']:.2f}x both at once), "
                    f"{result['peak_rss_mb']:.0f} MB, {result['verdict']}"
                )
            before = in_fresh_process(judged, config, "Exact", run_topic, reference_topic, False)
            before["ratio_to_plain_read"] = before["total_s"] / plain["total_s"]
            row[MESSAGES] = before
            progress(
                f"{size:,} per side, {MESSAGES}: {before['total_s']:.1f} s = "
                f"{before['ratio_to_plain_read']:.2f}x plain, {before['peak_rss_mb']:.0f} MB"
            )
            rows.append(row)
        finally:
            for topic in (run_topic, reference_topic):
                admin.delete(topic)
    report = {"sizes": rows, "goals": _goals(rows), "partitions": PARTITIONS}
    Path(out_prefix).parent.mkdir(parents=True, exist_ok=True)
    write_json_report(f"{out_prefix}.json", report)
    _chart(rows, f"{out_prefix}.png")
    return report


def _goals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The goals at the largest size measured, and time per output across sizes (linearity)."""
    if not rows:
        return {}
    top = rows[-1]
    out: dict[str, Any] = {"outputs_per_side": top["outputs_per_side"]}
    for agreement in CONTRACTS:
        r = top[agreement]
        per_output = [row[agreement]["total_s"] / row["outputs_per_side"] for row in rows]
        out[agreement] = {
            "judge_s": r["judge_s"],
            "judge_within_60_s": r["judge_s"] <= GOAL_JUDGE_S,
            "ratio_to_plain_read": r["ratio_to_plain_read"],
            "within_1_3x": r["ratio_to_plain_read"] <= GOAL_RATIO,
            "ratio_to_parallel_plain_read": r["ratio_to_parallel_plain_read"],
            "within_1_3x_of_parallel": r["ratio_to_parallel_plain_read"] <= GOAL_RATIO,
            "peak_rss_mb": r["peak_rss_mb"],
            "within_2_gib": r["peak_rss_mb"] <= GOAL_RSS_MB,
            "us_per_output_by_size": [round(x * 1e6, 2) for x in per_output],
            "verdict": r["verdict"],
        }
        checked = top.get(agreement + CHECKED)
        if checked is not None:
            ratio = checked["total_s"] / r["total_s"]
            out[agreement + CHECKED] = {
                "total_s": checked["total_s"],
                "ratio_to_unchecked": ratio,
                "within_10_percent": ratio <= GOAL_CHECK_RATIO,
                "verdict": checked["verdict"],
            }
    if MESSAGES in top:
        out[MESSAGES] = {"ratio_to_plain_read": top[MESSAGES]["ratio_to_plain_read"]}
    return out


def _chart(rows: list[dict[str, Any]], path: str) -> None:
    sizes = [r["outputs_per_side"] for r in rows]
    fig, (left, right) = new_figure(1, 2, figsize=(11, 4.2))
    left.plot(sizes, [r["plain"]["total_s"] for r in rows], "k--", marker="o", label="plain read")
    left.plot(
        sizes,
        [r["plain_parallel"]["total_s"] for r in rows],
        "k:",
        marker="s",
        label="plain read, both topics at once",
    )
    for agreement in JUDGED:
        if not all(agreement in r for r in rows):
            continue  # a report from before the checked variants
        style = "--" if agreement.endswith(CHECKED) else "-"
        left.plot(
            sizes, [r[agreement]["total_s"] for r in rows], style, marker="o", label=agreement
        )
        right.plot(
            sizes, [r[agreement]["peak_rss_mb"] for r in rows], style, marker="o", label=agreement
        )
    if all(MESSAGES in r for r in rows):
        left.plot(sizes, [r[MESSAGES]["total_s"] for r in rows], "c:", marker="x", label=MESSAGES)
    right.plot(
        sizes, [r["plain"]["peak_rss_mb"] for r in rows], "k--", marker="o", label="plain read"
    )
    right.axhline(GOAL_RSS_MB, color="red", linewidth=0.8, label="2 GiB goal")
    for ax, title, unit in (
        (left, "time to judge (read both topics + judge)", "seconds"),
        (right, "peak memory of the judging process", "MB (RSS)"),
    ):
        ax.set_xscale("log")
        ax.set_xlabel("outputs per side")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    left.set_yscale("log")
    save_figure(fig, path, dpi=110)
