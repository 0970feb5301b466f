"""Riding out a broker that stalls or a network that drops for a while.

Kafka's own clients wait through a leader election or a broker's long GC; a job here must too,
instead of paying a full restart. ``ride_out`` retries a call that failed on a transient error
(a timeout, a broken transport, no broker reachable) with a growing backoff, for up to the
outage budget (``RECOVERY_KAFKA_OUTAGE_BUDGET_S``, 60 s by default); a longer outage fails
loudly with ``BrokerOutage`` and the job's supervisor restarts it.

While it waits, a warning goes to the log at most every 10 s, and the wait is written to the
file named by ``RECOVERY_OUTAGE_FILE`` (the job's heartbeat carries it to its supervisor, so
the job's status says "waiting for the broker" instead of nothing). Spark runs a Python data
source in a worker process of its own: the environment variable reaches it there.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

from recovery_lib.kafka.exceptions import BrokerUnreachable, KafkaLayerError
from recovery_lib.settings import get_settings

log = logging.getLogger(__name__)
T = TypeVar("T")

OUTAGE_FILE_ENV = "RECOVERY_OUTAGE_FILE"
WARN_EVERY_S = 10.0
_MAX_BACKOFF_S = 5.0

TRANSIENT_CODES = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._RESOLVE,
        KafkaError._WAIT_COORD,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        # The client's own metadata lacks the partition: after connections were reset (a
        # blackhole in the faults campaign) until its metadata is fetched again. Callers ride
        # out only once the broker has answered them, so the partition was there; one that is
        # really gone fails after the budget, named.
        KafkaError._UNKNOWN_PARTITION,
        # A broker handle the client dropped while its connections were reset (seen in a
        # replica's release barrier during a blackhole); the next call gets a new one.
        KafkaError._DESTROY_BROKER,
    }
)


class BrokerOutage(KafkaLayerError):
    """The broker did not answer for longer than the outage budget."""


def is_transient(exc: BaseException) -> bool:
    """An error that a broker answering again would make go away."""
    if isinstance(exc, KafkaException):
        err = exc.args[0] if exc.args else None
        return isinstance(err, KafkaError) and (err.code() in TRANSIENT_CODES or err.retriable())
    return isinstance(exc, TimeoutError | BrokerUnreachable)


def outage_file() -> Path | None:
    named = os.environ.get(OUTAGE_FILE_ENV)
    return Path(named) if named else None


def read_outage(path: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The wait a job's process is in (what, since_ms, waited_s, budget_s), or None."""
    if path is None:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _note(what: str, since_ms: int, waited_s: float, budget_s: float, error: str) -> None:
    path = outage_file()
    if path is None:
        return
    note = {
        "what": what,
        "since_ms": since_ms,
        "waited_s": round(waited_s, 1),
        "budget_s": budget_s,
        "error": error,
    }
    try:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(note))
        os.replace(tmp, path)
    except OSError as exc:  # the wait goes on; only its display is lost
        log.debug("outage note not written: %s", exc)


def _clear() -> None:
    path = outage_file()
    if path is not None:
        path.unlink(missing_ok=True)


def ride_out(
    call: Callable[[], T],
    what: str,
    budget_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``call()``, again after each transient failure, until it succeeds or ``budget_s``
    (default: the settings' outage budget) passed since the first failure."""
    budget = get_settings().kafka_outage_budget_s if budget_s is None else budget_s
    started: float | None = None
    since_ms = 0
    warned = float("-inf")
    backoff = 0.2
    while True:
        try:
            result = call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            now = clock()
            if started is None:
                started, since_ms = now, int(time.time() * 1000)
            waited = now - started
            if waited >= budget:
                _clear()
                raise BrokerOutage(
                    f"{what}: the broker did not answer for {waited:.0f} s ({exc}); that is "
                    f"longer than the outage budget of {budget:g} s "
                    "(RECOVERY_KAFKA_OUTAGE_BUDGET_S): the job stops here and its supervisor "
                    "restarts it. Check the broker, or raise the budget if its stalls are "
                    "expected to last longer."
                ) from exc
            if now - warned >= WARN_EVERY_S:
                warned = now
                log.warning(
                    "%s: waiting for the broker, %.0f s of %g s (%s)", what, waited, budget, exc
                )
            _note(what, since_ms, waited, budget, str(exc))
            sleep(min(backoff, max(0.0, budget - waited)))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
            continue
        if started is not None:
            log.warning("%s: the broker answered again after %.1f s", what, clock() - started)
            _clear()
        return result
