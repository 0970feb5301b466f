"""Files that readers in other processes poll (heartbeats, statuses, what a host is wanted to
run), each written whole or not at all; and reports, written without this machine's paths."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path``'s content with ``text`` at once: a reader sees the old file or the new
    one, never a part. The temporary file is the writing thread's own, so two writers of one
    file (a host acknowledging a stop while the stopped query's writer still ends) never
    collide."""
    target = Path(path)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def portable_paths(value: Any, root: str | os.PathLike[str] | None = None) -> Any:
    """``value`` (a report: dicts, lists, strings) with this machine's paths taken out, so a
    committed report reads the same on every clone: a path under ``root`` (default: the working
    directory, the repository when run from it) becomes relative to it, one under the temporary
    directory starts with ``$TMPDIR/``, one under the home directory with ``~/``. Paths inside
    longer strings (``delta:/…/table``, an error message) are rewritten too."""
    prefixes = [
        (f"{Path(root or Path.cwd()).resolve()}/", ""),
        (f"{Path(tempfile.gettempdir()).resolve()}/", "$TMPDIR/"),
        (f"{Path.home().resolve()}/", "~/"),
    ]
    # Longest first: a repository under the home directory is made relative, not ~/-based.
    prefixes.sort(key=lambda p: len(p[0]), reverse=True)

    def scrub(item: Any) -> Any:
        if isinstance(item, os.PathLike):
            item = os.fspath(item)
        if isinstance(item, str):
            for prefix, replacement in prefixes:
                if prefix != "/" and prefix in item:
                    item = item.replace(prefix, replacement)
            return item
        if isinstance(item, dict):
            return {scrub(k): scrub(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [scrub(v) for v in item]
        return item

    return scrub(value)


def write_json_report(path: str | os.PathLike[str], report: Any) -> Path:
    """Write a report for people and for the repository: indented JSON, paths made portable
    (``portable_paths``), values JSON cannot hold written as text."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(portable_paths(report), indent=2, default=str))
    return target
