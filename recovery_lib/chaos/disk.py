"""A checkpoint directory that refuses writes for a while (a full or read-only volume, a lost
mount): every directory of the tree refuses new entries, so Spark can write neither its offset
log nor its commits nor a state store version. As root (permission bits do not stop root) the
directories are made immutable (``chattr +i``, ext4 and most Linux file systems); otherwise
their write permission is taken away. ``thaw`` restores them exactly; it runs from a timer and
again at ``stop``, so a tree is never left frozen.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Frozen:
    """One freeze: when, for how long, how many directories."""

    frozen_ms: int
    seconds: float
    directories: int
    thawed_ms: int | None = None


class UnwritableTree:
    def __init__(self) -> None:
        self._frozen: list[tuple[Path, int]] = []  # directory, its mode before (chmod)
        self._immutable = os.geteuid() == 0 and shutil.which("chattr") is not None
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.freezes: list[Frozen] = []

    def freeze(self, root: Path, seconds: float) -> Frozen:
        """Every directory under ``root`` (and ``root``) refuses new entries for ``seconds``."""
        with self._lock:
            if self._frozen:
                raise RuntimeError("a tree is frozen already: thaw it first")
            dirs = [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]
            if self._immutable:
                subprocess.run(["chattr", "+i", *map(str, dirs)], check=True, capture_output=True)
                self._frozen = [(d, 0) for d in dirs]
            else:
                for d in dirs:
                    mode = stat.S_IMODE(d.stat().st_mode)
                    d.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
                    self._frozen.append((d, mode))
            frozen = Frozen(_now_ms(), seconds, len(dirs))
            self.freezes.append(frozen)
        log.info("%s refuses writes for %.1f s (%d directories)", root, seconds, len(dirs))
        self._timer = threading.Timer(seconds, self.thaw)
        self._timer.daemon = True
        self._timer.start()
        return frozen

    def frozen(self) -> bool:
        return bool(self._frozen)

    def thaw(self) -> None:
        """Writable again, as before; safe to call twice."""
        with self._lock:
            if not self._frozen:
                return
            existing = [(d, m) for d, m in self._frozen if d.exists()]
            if self._immutable:
                subprocess.run(
                    ["chattr", "-i", *(str(d) for d, _ in existing)],
                    check=False,
                    capture_output=True,
                )
            else:
                for d, mode in existing:
                    d.chmod(mode)
            self._frozen = []
            self.freezes[-1].thawed_ms = _now_ms()
        log.info("the checkpoint accepts writes again")

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.thaw()
