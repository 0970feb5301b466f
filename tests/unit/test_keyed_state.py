"""The keyed-state job's pieces without Spark: its generated input, the batch write that carries
a streaming batch's id (update mode goes through foreachBatch), the state stores' metrics."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from recovery_lib.experiment.inputs import KeyedInput
from recovery_lib.experiment.runner import ExperimentConfig
from recovery_lib.io.exceptions import InvalidSinkOption
from recovery_lib.io.sinks.kafka_sink import KafkaBatchWriter, SinkOptions
from recovery_lib.job.spec import JobSpec, resolve_job
from recovery_lib.metrics.listener import state_custom_metrics

SCHEMA = StructType([StructField("key", StringType()), StructField("value", StringType())])
KAFKA = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "out"}


def test_the_warm_up_states_every_key_once_then_keys_are_drawn_from_the_same_set() -> None:
    keyed = KeyedInput("events", keys=1_000, prefix="t", seed=7)
    first = keyed.events(0, 1_000)
    assert [k for k, _ in first] == [f"a{i:08d}".encode() for i in range(1_000)]
    later = keyed.events(1_000, 5_000)
    keys = {json.loads(v)["account"] for _, v in later}
    assert keys <= {f"a{i:08d}" for i in range(1_000)}
    assert len(keys) > 900  # uniform over the key set, not a few hot keys
    assert all(0 <= json.loads(v)["amount"] < 100 for _, v in later)
    assert all(k.decode() == json.loads(v)["account"] for k, v in later)  # Kafka key = the key


def test_any_range_of_keyed_events_is_regenerated_alike() -> None:
    a = KeyedInput("events", keys=50, prefix="t", seed=3)
    whole = a.events(0, 400)
    assert a.events(120, 80) == whole[120:200]
    other_seed = KeyedInput("events", keys=50, prefix="t", seed=4).events(50, 350)
    assert other_seed != whole[50:]


def test_keyed_input_refuses_no_keys() -> None:
    with pytest.raises(ValueError, match="at least one key"):
        KeyedInput("events", keys=0, prefix="t", seed=1)


def test_an_experiment_with_keys_needs_a_job_with_one_input() -> None:
    with pytest.raises(ValueError, match="--keys generates one keyed input"):
        ExperimentConfig(query="q3", keys=100).validate()  # q3 reads persons and auctions
    with pytest.raises(ValueError, match="--keys must be at least 1"):
        ExperimentConfig(query="keyed_state", keys=0).validate()
    ExperimentConfig(query="keyed_state", keys=100, fail=None).validate()


def test_a_batch_write_of_the_sink_needs_the_streaming_batch_id() -> None:
    with pytest.raises(InvalidSinkOption, match="foreachBatch"):
        KafkaBatchWriter(SinkOptions.parse(KAFKA), SCHEMA)
    with pytest.raises(InvalidSinkOption, match="batchId must be"):
        SinkOptions.parse({**KAFKA, "batchId": "seven"})
    writer = KafkaBatchWriter(SinkOptions.parse({**KAFKA, "batchId": "7"}), SCHEMA)
    assert writer.batch_id == 7 and writer.stream.options.batch_id == 7
    assert SinkOptions.parse(KAFKA).batch_id is None  # a stream write takes Spark's


def test_the_keyed_job_declares_update_output_and_a_count_per_key() -> None:
    job = resolve_job("keyed_state")
    assert job.output_mode == "update"
    assert job.contract.view is not None and job.contract.view.fields == ("account", "count")
    with pytest.raises(ValueError, match="output_mode 'complete'"):
        JobSpec(name="x", build=job.build, inputs=("a",), output_mode="complete")


def test_state_store_metrics_are_summed_over_the_stateful_operators() -> None:
    ops = [
        SimpleNamespace(customMetrics={"rocksdbLoadLatencyMs": 120, "rocksdbSstFileSize": 10}),
        SimpleNamespace(customMetrics={"rocksdbLoadLatencyMs": 5}),
        SimpleNamespace(customMetrics=None),
    ]
    assert state_custom_metrics(ops) == {"rocksdbLoadLatencyMs": 125, "rocksdbSstFileSize": 10}
    assert state_custom_metrics([]) == {}


def test_a_batch_deterministic_job_replays_without_a_causal_log() -> None:
    from recovery_lib.job.runner import check_sink_mode
    from recovery_lib.verify.contract import ConsistencyContract

    keyed = resolve_job("keyed_state")
    assert not keyed.contract.replay_needs_causal
    check_sink_mode(keyed, "release", causal=False)  # a re-run batch recomputes its outputs
    view = keyed.contract.view
    ordered = ConsistencyContract(
        deterministic=False, batch_deterministic=True, agreement=view, ordered=True
    )
    assert ordered.replay_needs_causal  # an order-sensitive operator still needs the log
    assert ConsistencyContract(deterministic=False, agreement=view).replay_needs_causal
    with pytest.raises(ValueError, match="release needs a replay"):
        check_sink_mode(resolve_job("lastbids"), "release", causal=False)
