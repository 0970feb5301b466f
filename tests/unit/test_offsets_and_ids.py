import pytest

from recovery_lib.io.cut_policies import CutPolicy
from recovery_lib.io.exceptions import InvalidSinkOption, InvalidSourceOption
from recovery_lib.io.offsets import parse_starting_offsets
from recovery_lib.io.sinks.ids import output_id, parse_output_id
from recovery_lib.io.sinks.kafka_sink import SinkOptions, validate_sink_schema
from recovery_lib.io.source import SourceOptions


def test_starting_offsets_keywords_and_json():
    assert parse_starting_offsets("Earliest", ["t"]) == "earliest"
    assert parse_starting_offsets("latest", ["t"]) == "latest"
    assert parse_starting_offsets('{"t": {"0": 5, "1": -2}}', ["t"]) == {"t": {"0": 5, "1": -2}}


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('{"t": {"0": 5}', "valid JSON"),
        ('{"other": {"0": 1}}', "not subscribed"),
        ('{"t": {"x": 1}}', "partitions are non-negative"),
        ('{"t": {"0": "abc"}}', "must be integers"),
        ('["t"]', "must map topic"),
    ],
)
def test_malformed_starting_offsets_name_the_fix(text, fragment):
    with pytest.raises(InvalidSourceOption, match=fragment):
        parse_starting_offsets(text, ["t"])


def test_source_options_require_subscribe_and_positive_limit():
    base = {"kafka.bootstrap.servers": "127.0.0.1:1"}
    with pytest.raises(InvalidSourceOption, match="subscribe"):
        SourceOptions.parse(base)
    with pytest.raises(InvalidSourceOption, match="positive integer"):
        SourceOptions.parse({**base, "subscribe": "t", "maxOffsetsPerTrigger": "-3"})
    with pytest.raises(InvalidSourceOption, match="valueFormat"):
        SourceOptions.parse({**base, "subscribe": "t", "valueFormat": "avro"})
    opts = SourceOptions.parse({**base, "subscribe": "a, b", "maxOffsetsPerTrigger": "10"})
    assert opts.topics == ["a", "b"] and opts.max_records == 10


def test_read_path_is_executors_by_default_and_driver_on_request():
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    assert SourceOptions.parse(base).read_path == "executors"
    assert SourceOptions.parse({**base, "readPath": "Driver"}).read_path == "driver"
    with pytest.raises(InvalidSourceOption, match="readPath must be one of"):
        SourceOptions.parse({**base, "readPath": "jvm"})


class HalfCuts(CutPolicy):
    """A mechanism's policy stand-in (any policy but the free one)."""

    def cut(self, start, available, max_rows):
        return available


def test_driver_reads_refuse_what_needs_a_task_per_range():
    from pyspark.errors import PySparkNotImplementedError

    from recovery_lib.io.driver_read import KafkaDriverStreamReader
    from recovery_lib.io.source import KafkaDataSource, KafkaStreamReader, source_schema

    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "readPath": "driver"}
    with pytest.raises(InvalidSourceOption, match="free policy only"):
        KafkaDriverStreamReader(
            KafkaStreamReader(
                SourceOptions.parse({**base, "cutPolicy": f"{__name__}:HalfCuts"}), None
            )
        )
    with pytest.raises(InvalidSourceOption, match="drop auditPath"):
        KafkaDriverStreamReader(
            KafkaStreamReader(SourceOptions.parse({**base, "auditPath": "/tmp/a"}), None)
        )
    # PySpark falls back to simpleStreamReader when streamReader is not implemented.
    source = KafkaDataSource(base)
    with pytest.raises(PySparkNotImplementedError):
        source.streamReader(source_schema())
    assert isinstance(source.simpleStreamReader(source_schema()), KafkaDriverStreamReader)
    assert not isinstance(
        KafkaDataSource({**base, "readPath": "executors"}).streamReader(source_schema()),
        KafkaDriverStreamReader,
    )


def test_output_ids_round_trip_and_exclude_the_epoch():
    rid = output_id(12, 3, 40, "q1")
    assert parse_output_id(rid) == ("q1", 12, 3, 40)
    assert output_id(12, 3, 40) == "12-3-40"


def test_transactional_mode_is_refused_without_the_broker_flag():
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "o"}
    with pytest.raises(InvalidSinkOption, match="tansu"):
        SinkOptions.parse({**base, "mode": "transactional"})
    opts = SinkOptions.parse(
        {**base, "mode": "transactional", "brokerSupportsTransactions": "true"}
    )
    assert opts.mode == "transactional"


def test_sink_schema_errors_name_the_fix():
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    with pytest.raises(InvalidSinkOption, match="needs a 'value' column"):
        validate_sink_schema(StructType([StructField("key", StringType())]))
    with pytest.raises(InvalidSinkOption, match="to_json"):
        validate_sink_schema(StructType([StructField("value", IntegerType())]))
    with pytest.raises(InvalidSinkOption, match="cannot be written"):
        validate_sink_schema(
            StructType([StructField("value", StringType()), StructField("extra", StringType())])
        )
