"""An experiment that does not keep its output deletes its own topics, and only its own."""

from __future__ import annotations

from recovery_lib.experiment.runner import Experiment
from recovery_lib.nexmark.config import GeneratorConfig


class FakeAdmin:
    def __init__(self, topics: list[str]) -> None:
        self.topics = topics
        self.deleted: list[str] = []

    def list(self) -> list[str]:
        return list(self.topics)

    def delete(self, name: str) -> bool:
        if name == "exp.q3-native-abc.out.stuck":
            raise RuntimeError("broker said no")
        self.deleted.append(name)
        return True


def test_an_experiment_deletes_the_topics_named_after_it_and_no_others() -> None:
    exp = object.__new__(Experiment)  # only what _delete_topics reads
    exp.gen = GeneratorConfig(topic_prefix="exp.q3-native-abc")
    exp.admin = FakeAdmin(
        [
            "exp.q3-native-abc.out.faulty",
            "exp.q3-native-abc.out.reference",
            "exp.q3-native-abc.out.faulty.order",
            "exp.q3-native-abc.out.stuck",
            "exp.q3-native-abcd.out.faulty",  # another experiment whose id extends this one's
            "prices.out",
        ]
    )
    said: list[str] = []
    exp.progress = said.append

    exp._delete_topics()

    assert exp.admin.deleted == [
        "exp.q3-native-abc.out.faulty",
        "exp.q3-native-abc.out.reference",
        "exp.q3-native-abc.out.faulty.order",
    ]
    assert said == ["could not delete topic exp.q3-native-abc.out.stuck: broker said no"]
