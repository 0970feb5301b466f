"""Causal services: the nondeterminism a function may use, recorded and replayed (Clonos 3.3).

A ``CausalContext`` serves one stream of determinants: one scope (a named operator) in one
partition of one micro-batch. The first time the stream runs, every service runs live and
appends a determinant; when the batch is re-executed (driver restart or Spark task retry) the
services return the logged values in the same order, and past the end of the logged prefix run
live again and log.

    ctx.clock.now_ms()          current time in ms; one determinant per changed millisecond
    ctx.random                  a numpy Generator whose seed is logged once per stream
    ctx.call(fn, *args)         the (JSON-serialisable) result of an external call
    ctx.service(fn)             wraps any nondeterministic callable the same way
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from recovery_lib.causal.determinants import (
    CALL,
    CLOCK,
    SEED,
    Determinant,
    DeterminantMismatch,
    DeterminantRun,
    StreamKey,
)
from recovery_lib.causal.log import DeterminantLog

T = TypeVar("T")


class DeterminantSource(Protocol):
    """Where a stream's determinants come from when another process computes the same stream
    at the same time (active replication: recovery_lib/ha/replication/shared_determinants.py).
    Called by ``CausalContext`` for every position of the stream, from the task's thread."""

    def determinant(self, seq: int) -> Determinant | None:
        """The determinant the stream's writer logged at ``seq``, waiting until it is logged;
        None when this process is the writer from ``seq`` on and runs live (raises
        ``DeterminantError`` when it waited too long)."""
        ...

    def writer(self) -> tuple[str, int]:
        """Who this process logs as: its writer id and its term as the stream's writer."""
        ...

    def check_still_writer(self) -> None:
        """After this process's determinants were flushed and before an output that depends
        on them leaves: raise if another writer took the stream over meanwhile (a zombie must
        not release outputs that the stream's accepted determinants do not explain)."""
        ...


class CausalClock:
    """Wall-clock milliseconds, logged only when the millisecond changes (Clonos caches the
    timestamp per millisecond, so a busy function does not log a determinant per call).

    A function reads it as ``ctx.clock``; ``CausalContext`` builds it.

    Args:
        ctx: The context whose stream the readings are logged in.
        source: The live clock, in seconds.
    """

    def __init__(self, ctx: CausalContext, source: Callable[[], float] = time.time) -> None:
        self._ctx = ctx
        self._source = source
        self._calls = 0
        self._current: int | None = None

    def now_ms(self) -> int:
        """The time now, or, in a re-execution, the time the first run read at this call.

        Returns:
            Milliseconds since the epoch.

        Raises:
            DeterminantMismatch: A re-execution asks for the time where the first run did
                not (its calls come in another order).
        """
        call = self._calls
        self._calls += 1
        ctx = self._ctx
        if ctx.source is not None:
            # A shared stream logs every reading: a process that follows another's stream
            # cannot tell "no change here" from "not logged yet".
            reading = ctx._next(CLOCK, lambda: [call, int(self._source() * 1000)])
            self._current = int(reading[1])
            return self._current
        if not ctx.prefix_exhausted:
            # Replaying: the first run logged a reading at this call only if the millisecond
            # changed here; otherwise the time is the one read last.
            det = ctx._peek(CLOCK)
            if det is not None and det.value[0] == call:
                ctx._consume()
                self._current = int(det.value[1])
            if self._current is None:
                raise DeterminantMismatch(
                    f"{ctx.key}: call {call} asks for the time but no clock reading was logged "
                    "for it; the function's calls must come in the same order"
                )
            return self._current
        now = int(self._source() * 1000)
        if now != self._current:
            self._current = now
            ctx._record(CLOCK, [call, now])
        return now


class CausalContext:
    """One stream of determinants: one scope in one partition of one micro-batch.

    The wrappers (``map_in_pandas``, ``current``, ...) open it and hand it to the function;
    a function takes its nondeterminism from it: ``ctx.clock.now_ms()``, ``ctx.random``,
    ``ctx.call(fn, *args)``, ``ctx.service(fn)``.

    Args:
        key: The stream (job, batch, scope, partition).
        log: Where its determinants go.
        replay: Determinants a previous run logged, returned in order before anything runs
            live.
        attempt: Spark's attempt number of the task.
        epoch: The fencing epoch the determinants are logged in.
        auto_flush: Flush after every determinant (no wrapper flushes before outputs).
        source: Another process computes the same stream (active replication): it gives
            the determinants.

    Attributes:
        clock: The causal clock (``CausalClock``).
        replayed: Determinants returned from the log so far.
        logged: Determinants recorded live so far.
    """

    def __init__(
        self,
        key: StreamKey,
        log: DeterminantLog,
        replay: list[Determinant] | None = None,
        attempt: int = 0,
        epoch: int = 0,
        auto_flush: bool = False,
        source: DeterminantSource | None = None,
    ) -> None:
        self.key = key
        self.source = source
        self._live_from: int | None = None  # shared stream: this process writes from here on
        self.log = log
        self.attempt = attempt
        self.epoch = epoch
        self.auto_flush = auto_flush
        self._replay = replay or []
        self._pos = 0  # next sequence number
        self._unflushed: list[Determinant] = []
        self._unflushed_from = 0
        self.clock = CausalClock(self)
        self._random: Any = None
        self.replayed = 0
        self.logged = 0

    # -- replay bookkeeping --------------------------------------------------------------------

    @property
    def replaying(self) -> bool:
        """Whether the stream was opened with logged determinants to replay."""
        return bool(self._replay)

    @property
    def prefix_exhausted(self) -> bool:
        """Whether every logged determinant has been replayed (the stream now runs live)."""
        return self._pos >= len(self._replay)

    def _peek(self, kind: str) -> Determinant | None:
        if self._pos < len(self._replay) and self._replay[self._pos].kind == kind:
            return self._replay[self._pos]
        return None

    def _consume(self) -> Determinant:
        det = self._replay[self._pos]
        self._pos += 1
        self.replayed += 1
        return det

    def _next(self, kind: str, live: Callable[[], Any]) -> Any:
        if self._pos < len(self._replay):
            det = self._replay[self._pos]
            self._check_kind(det, kind)
            return self._consume().value
        if self.source is not None and self._live_from is None:
            det = self.source.determinant(self._pos)
            if det is not None:  # the stream's writer logged it: use its value
                self._check_kind(det, kind)
                self._pos += 1
                self.replayed += 1
                return det.value
            self._live_from = self._pos
        value = live()
        self._record(kind, value)
        return value

    def _check_kind(self, det: Determinant, kind: str) -> None:
        if det.kind != kind:
            raise DeterminantMismatch(
                f"{self.key}: determinant {self._pos} was logged as {det.kind!r} but this "
                f"execution asks for {kind!r}; the function's calls must come in the same "
                "order (order the input with recovery_lib.causal.ordered)"
            )

    def _record(self, kind: str, value: Any) -> None:
        if not self._unflushed:
            self._unflushed_from = self._pos
        self._unflushed.append(Determinant(kind, value))
        self._pos += 1
        self.logged += 1
        if self.auto_flush:
            self.flush()

    def flush(self) -> None:
        """Make this stream's new determinants durable: call before releasing any output."""
        if self._unflushed:
            writer, epoch = self.source.writer() if self.source is not None else ("", self.epoch)
            self.log.append(
                DeterminantRun(
                    self.key,
                    self._unflushed_from,
                    tuple(self._unflushed),
                    self.attempt,
                    epoch,
                    writer,
                )
            )
            self._unflushed = []
            self.log.flush()
            if self.source is not None:
                self.source.check_still_writer()
        else:
            self.log.flush()

    # -- services ----------------------------------------------------------------------------

    @property
    def random(self) -> Any:
        """A numpy ``Generator`` seeded once per stream; the seed is the determinant."""
        if self._random is None:
            import numpy as np

            seed = self._next(SEED, lambda: secrets.randbits(63))
            self._random = np.random.default_rng(int(seed))
        return self._random

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` live (and log its result) or return the logged result on replay.

        Args:
            fn: The nondeterministic call (an HTTP request, a lookup).
            *args: Its positional arguments.
            **kwargs: Its keyword arguments.

        Returns:
            ``fn``'s result: JSON-serialisable data or bytes, so that it can be logged.

        Raises:
            TypeError: ``fn`` returned something else.
            DeterminantMismatch: A re-execution calls where the first run did something else.
        """

        def live() -> Any:
            result = fn(*args, **kwargs)
            if not isinstance(result, bytes):
                try:
                    json.dumps(result)
                except (TypeError, ValueError) as exc:
                    raise TypeError(
                        f"causal call {getattr(fn, '__name__', fn)!r} returned a "
                        f"{type(result).__name__}; return JSON-serialisable data or bytes "
                        "so the result can be logged"
                    ) from exc
            return result

        return self._next(CALL, live)

    def service(self, fn: Callable[..., T]) -> Callable[..., T]:
        """``fn`` wrapped so that each call goes through ``call``.

        Args:
            fn: Any nondeterministic callable.

        Returns:
            A callable with ``fn``'s arguments whose results are logged and replayed.
        """

        def wrapped(*args: Any, **kwargs: Any) -> T:
            return self.call(fn, *args, **kwargs)

        wrapped.__name__ = getattr(fn, "__name__", "service")
        return wrapped
