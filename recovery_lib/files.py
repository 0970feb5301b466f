"""Files that readers in other processes poll (heartbeats, statuses, what a host is wanted to
run): each written whole or not at all."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path``'s content with ``text`` at once: a reader sees the old file or the new
    one, never a part. The temporary file is the writing thread's own, so two writers of one
    file (a host acknowledging a stop while the stopped query's writer still ends) never
    collide."""
    target = Path(path)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)
