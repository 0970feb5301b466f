"""One Kafka client per executor Python worker process and configuration.

Creating an idempotent producer costs ~500 ms on the embedded broker; Spark reuses Python
workers across tasks, so caching per process makes that a one-time cost.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from recovery_lib.kafka.control_topic import close_open_topics

log = logging.getLogger(__name__)

_lock = threading.Lock()
_clients: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
EXIT_FLUSH_TIMEOUT_S = 5.0


def cached(kind: str, config: Mapping[str, str], factory: Callable[[dict[str, str]], Any]) -> Any:
    key = (kind, tuple(sorted((str(k), str(v)) for k, v in config.items())))
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = factory(dict(config))
            _clients[key] = client
        return client


def evict(kind: str, config: Mapping[str, str]) -> None:
    key = (kind, tuple(sorted((str(k), str(v)) for k, v in config.items())))
    with _lock:
        _clients.pop(key, None)


@atexit.register
def close_all() -> list[str]:
    """At interpreter exit (or before the broker stops): flush every producer, close every
    consumer.

    What does not go well is printed to stderr (the executor's log) and returned: records
    still queued after the flush are lost with this process. The writers flush and check
    their own tasks' records, so this is normally empty. Every client is tried: one that
    fails must not keep the others from flushing. The configuration is not printed (it can
    hold SASL credentials), only the kind of client.
    """
    problems = []
    with _lock:
        for (kind, _), client in _clients.items():
            try:
                if kind.startswith("producer"):
                    undelivered = client.flush(EXIT_FLUSH_TIMEOUT_S)
                    if undelivered:
                        problems.append(
                            f"{kind}: {undelivered} records not delivered within "
                            f"{EXIT_FLUSH_TIMEOUT_S:.0f} s are lost at exit"
                        )
                elif kind.startswith("consumer"):
                    client.close()
            except Exception as exc:  # noqa: BLE001 - reported below; the next client is tried
                problems.append(f"{kind}: closing at exit failed: {exc!r}")
        _clients.clear()
    close_open_topics()  # the control topics' readers keep their own clients
    for problem in problems:
        log.warning("client cache: %s", problem)
    return problems
