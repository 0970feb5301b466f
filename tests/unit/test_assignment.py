"""kafka/assignment.py: a consumer asks for the metadata of each topic new to it once, before
its assignment, and is assigned even when the lookup fails."""

from __future__ import annotations

from confluent_kafka import KafkaException, TopicPartition

from recovery_lib.kafka.assignment import assign, forget


class RecordingConsumer:
    def __init__(self, failing: set[str] | None = None) -> None:
        self.calls: list[tuple[str, object]] = []
        self.failing = failing or set()

    def list_topics(self, topic: str, timeout: float) -> None:
        self.calls.append(("metadata", topic))
        if topic in self.failing:
            raise KafkaException("timed out")

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assign", [(tp.topic, tp.partition, tp.offset) for tp in partitions]))


def test_a_topic_new_to_the_consumer_is_looked_up_once_before_its_assignment():
    consumer = RecordingConsumer()
    assign(consumer, [TopicPartition("a", 0, 5), TopicPartition("a", 1, 7)])
    assign(consumer, [TopicPartition("a", 0, 9)])
    assign(consumer, [TopicPartition("b", 0, 0), TopicPartition("a", 2, 0)])
    assert consumer.calls == [
        ("metadata", "a"),
        ("assign", [("a", 0, 5), ("a", 1, 7)]),
        ("assign", [("a", 0, 9)]),
        ("metadata", "b"),
        ("assign", [("b", 0, 0), ("a", 2, 0)]),
    ]
    forget(consumer)


def test_each_consumer_looks_up_for_itself_and_forget_starts_over():
    first, second = RecordingConsumer(), RecordingConsumer()
    assign(first, [TopicPartition("t", 0, 0)])
    assign(second, [TopicPartition("t", 0, 0)])
    assert second.calls[0] == ("metadata", "t")
    forget(first)
    assign(first, [TopicPartition("t", 0, 1)])
    assert [c for c in first.calls if c[0] == "metadata"] == [("metadata", "t"), ("metadata", "t")]
    forget(second)
    forget(first)


def test_a_failed_lookup_still_assigns_and_is_tried_again_next_time():
    consumer = RecordingConsumer(failing={"t"})
    assign(consumer, [TopicPartition("t", 0, 3)])
    assert consumer.calls == [("metadata", "t"), ("assign", [("t", 0, 3)])]
    consumer.failing.clear()
    assign(consumer, [TopicPartition("t", 0, 4)])
    assert consumer.calls[2] == ("metadata", "t")
    forget(consumer)
