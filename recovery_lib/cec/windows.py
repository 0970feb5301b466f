"""Window kinds of a CEC aggregate and its accumulator.

A window is identified by a string that a re-run computes again: a count window by its key and
the input position of the tuple that opened it, a time window by its key and start. The
identifier is the id of the window's result record, so readers that dedup by id also work."""

from __future__ import annotations

from dataclasses import dataclass

from recovery_lib.errors import JobError

AGGREGATES = ("avg", "sum", "count", "max", "min")


@dataclass(frozen=True)
class CountWindows:
    """A window per key closes at its ``size``-th tuple (the paper's workload: size 10)."""

    size: int

    def __post_init__(self) -> None:
        if self.size < 1:
            raise JobError(f"count window size {self.size}: must be at least 1")


@dataclass(frozen=True)
class TimeWindows:
    """Event-time windows per key, ``size_ms`` long, one starting every ``slide_ms`` (sliding
    when slide < size). A window closes when the watermark, the oldest of the input partitions'
    newest event times minus ``lateness_ms``, passes its end. A tuple older than an already
    closed window of its key is late: it is counted and left out (see docs/cec.md)."""

    size_ms: int
    slide_ms: int | None = None
    lateness_ms: int = 0

    def __post_init__(self) -> None:
        slide = self.slide
        if self.size_ms < 1 or slide < 1 or slide > self.size_ms:
            raise JobError(
                f"time windows size {self.size_ms} ms, slide {slide} ms: need 1 <= slide <= size"
            )
        if self.lateness_ms < 0:
            raise JobError(f"lateness {self.lateness_ms} ms: must be >= 0")

    @property
    def slide(self) -> int:
        return self.slide_ms if self.slide_ms is not None else self.size_ms

    def starts(self, event_ms: int) -> range:
        """Starts of the windows holding ``event_ms``, oldest first."""
        slide = self.slide
        last = event_ms - event_ms % slide
        first = last - (self.size_ms - 1) // slide * slide
        while first + self.size_ms <= event_ms:
            first += slide
        return range(first, last + 1, slide)


WindowKind = CountWindows | TimeWindows


# Window ids: the CEC operator and the native aggregate (native.py) must name a window alike,
# since the oracle compares their results.
def count_window_id(key: str, partition: int, offset: int) -> str:
    """A count window: its key and the input position of the tuple that opened it."""
    return f"{key}@{partition}:{offset}"


def count_window_partition(window: str) -> int:
    return int(window.rsplit("@", 1)[1].split(":")[0])


def time_window_id(key: str, start: int) -> str:
    """A time window: its key and start (ms)."""
    return f"{key}|{start}"


def time_window_start(window: str) -> int:
    return int(window.rsplit("|", 1)[1])


class Accumulator:
    """count, sum, max and min of a window's values; every aggregate reads from them."""

    __slots__ = ("count", "total", "high", "low")

    def __init__(self, count: int = 0, total: float = 0, high: float = 0, low: float = 0):
        self.count = count
        self.total = total
        self.high = high
        self.low = low

    def add(self, value: float) -> None:
        if self.count == 0:
            self.high = self.low = value
        elif value > self.high:
            self.high = value
        elif value < self.low:
            self.low = value
        self.count += 1
        self.total += value

    def as_list(self) -> list[float]:
        return [self.count, self.total, self.high, self.low]

    @classmethod
    def from_list(cls, values: list[float]) -> Accumulator:
        count, total, high, low = values
        return cls(int(count), total, high, low)

    def result(self, aggregate: str) -> float:
        if aggregate == "avg":
            return self.total / self.count
        if aggregate == "sum":
            return self.total
        if aggregate == "count":
            return self.count
        if aggregate == "max":
            return self.high
        if aggregate == "min":
            return self.low
        raise ValueError(f"aggregate {aggregate!r}: one of {', '.join(AGGREGATES)}")
