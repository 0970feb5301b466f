"""What a broker the experiment starts for itself offers (chaos/network.py's single broker
behind the fault proxy, chaos/cluster.py's three nodes): a context manager, and ``use()``,
which points this process's settings and its children's environment at it."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Self

from recovery_lib.settings import environment, plaintext_client_environment


class PrivateKafka(ABC):
    @property
    @abstractmethod
    def bootstrap(self) -> str:
        """The address clients bootstrap with."""

    @abstractmethod
    def start(self) -> str:
        """Start it; the bootstrap."""

    @abstractmethod
    def stop(self) -> None:
        """Stop every process it started and remove its data; safe to call twice."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextlib.contextmanager
    def use(self) -> Iterator[str]:
        """This process's settings and its children's environment on it while inside; what
        was there before afterwards."""
        # The project's own broker listens PLAINTEXT: a secured cluster's settings stay out.
        with environment({**plaintext_client_environment(), "KAFKA_BOOTSTRAP": self.bootstrap}):
            yield self.bootstrap
