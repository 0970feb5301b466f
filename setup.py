"""The project's one C extension; everything else about the package is in pyproject.toml.

kafka/_block_consumer.c hands blocks of Kafka records to the oracle's reader as columns
(kafka/block_consumer.py). Optional: without a C compiler the install goes on and the readers
use confluent-kafka's messages."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "recovery_lib.kafka._block_consumer",
            ["recovery_lib/kafka/_block_consumer.c"],
            libraries=["dl"],
            optional=True,
        )
    ]
)
