"""What an inconsistent verdict rests on, kept where it outlives the run's topics.

An experiment with network or broker faults runs on its own broker, and its topics go with it;
a verdict of lost or duplicated outputs is then only a count. ``save_topics`` copies every
record of the named topics, fenced and control records included, with their headers,
partitions and offsets, into one Parquet file per topic: enough to find which batch, epoch and
task wrote what (``duckdb -c "select * from 'faulty.parquet'"``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, TopicPartition

from recovery_lib.errors import OracleError
from recovery_lib.io.sinks.dedup_reader import topic_bounds

log = logging.getLogger(__name__)

EVIDENCE_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp_ms", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", pa.map_(pa.string(), pa.binary())),
    ]
)
ROWS_PER_GROUP = 50_000  # one Parquet row group: bounded memory for topics of any size


def save_topics(
    topics: Mapping[str, str], directory: Path, config: Mapping[str, str]
) -> dict[str, int]:
    """Every record of each topic in ``topics`` (name -> topic) to ``<directory>/<name>.parquet``;
    returns the records saved per name."""
    directory.mkdir(parents=True, exist_ok=True)
    return {
        name: save_topic(topic, directory / f"{name}.parquet", config)
        for name, topic in topics.items()
    }


def save_topic(topic: str, path: Path, config: Mapping[str, str]) -> int:
    client = dict(config)
    partitions, lows, ends = topic_bounds(topic, client, None)
    consumer = Consumer(
        {
            **client,
            "group.id": "recovery-evidence",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
        }
    )
    rows: list[dict] = []
    saved = 0
    tmp = path.with_name(f".{path.name}.tmp")
    with pq.ParquetWriter(tmp, EVIDENCE_SCHEMA) as writer:
        try:
            for part in partitions:
                if ends[part] <= lows[part]:
                    continue
                consumer.assign([TopicPartition(topic, part, lows[part])])
                position = lows[part]
                while position < ends[part]:
                    msgs = consumer.consume(num_messages=10_000, timeout=1.0)
                    for msg in msgs:
                        err = msg.error()
                        if err is not None:
                            if err.code() == KafkaError._PARTITION_EOF:
                                position = max(position, msg.offset())
                                continue
                            raise OracleError(f"saving {topic}/{part} as evidence: {err}")
                        if msg.offset() >= ends[part]:
                            position = ends[part]
                            break
                        position = msg.offset() + 1
                        rows.append(
                            {
                                "partition": part,
                                "offset": msg.offset(),
                                "timestamp_ms": msg.timestamp()[1],
                                "key": msg.key(),
                                "value": msg.value(),
                                "headers": list(msg.headers() or ()),
                            }
                        )
                    if len(rows) >= ROWS_PER_GROUP:
                        writer.write_table(pa.Table.from_pylist(rows, EVIDENCE_SCHEMA))
                        saved += len(rows)
                        rows = []
                consumer.unassign()
            if rows:
                writer.write_table(pa.Table.from_pylist(rows, EVIDENCE_SCHEMA))
                saved += len(rows)
        finally:
            consumer.close()
    tmp.replace(path)
    log.info("saved %d records of %s to %s", saved, topic, path)
    return saved
