"""One Kafka client per executor Python worker process and configuration.

Creating an idempotent producer costs ~500 ms on the embedded broker; Spark reuses Python
workers across tasks, so caching per process makes that a one-time cost.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Mapping
from typing import Any

_lock = threading.Lock()
_clients: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}


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
def _close_all() -> None:
    with _lock:
        for (kind, _), client in _clients.items():
            try:
                if kind.startswith("producer"):
                    client.flush(5)
                elif kind.startswith("consumer"):
                    client.close()
            except Exception:
                pass
        _clients.clear()
