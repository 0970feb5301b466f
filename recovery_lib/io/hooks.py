"""Narrow hooks through which the mechanisms built on io reach its source and sinks; io imports
none of them.

A hook is named in a source or sink option as ``module:attr`` and imported where it runs (a
Python worker for sinks, the source's runner process for cut policies), so mechanisms plug in
without io knowing them:

* ``cutPolicy`` (source): a ``CutPolicy`` subclass, e.g. the standby's follow policy;
* ``writeGuard`` (sink): ``factory(options) -> WriteGuard | None``, e.g. fencing epochs;
* ``writeFault`` (sink): ``factory() -> WriteFault | None``, e.g. the armed mid-write kill;
* ``commitHook`` (sink): ``factory(options) -> CommitHook``, e.g. a checkpoint protocol's
  channel record and marker forwarding;
* ``recordHeaders`` (sink): ``factory(options) -> RecordHeaders``, e.g. the piggybacked
  clocks of communication-induced checkpointing.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from recovery_lib.io.exceptions import InvalidSinkOption, IOLayerError


def writer_epoch(options: Mapping[str, str]) -> int:
    """The fencing epoch a sink writes with: sink option ``epochFile``'s content when the file
    exists (a hot standby's, rewritten at its takeover), else option ``epoch`` (default 0)."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    path = opts.get("epochfile")
    if path:
        try:
            return int(Path(path).read_text().strip())
        except (FileNotFoundError, ValueError):
            pass
    try:
        return int(opts.get("epoch", "0"))
    except ValueError:
        raise InvalidSinkOption(f"epoch must be an integer, got {opts['epoch']!r}") from None


class WriteGuard(Protocol):
    """Asked by a sink task of micro-batch ``batch_id`` before it writes and after every Arrow
    batch it handed to the broker. ``check`` raises ``WriterFenced`` (io.exceptions) when this
    writer may no longer write; the sink then drops what it still queued and fails the task."""

    def check(self, what: str, batch_id: int | None = None) -> None: ...


class WriteFault(Protocol):
    """Asked by a sink task after each record it handed to the broker (``rows_written`` counts
    from 1 within the task). When ``should_fire`` says so, the sink flushes what it wrote and
    calls ``fire``, which kills the job, raises (the task fails and Spark retries it), or
    stops the job's processes until whoever armed the fault resumes them."""

    def should_fire(self, batch_id: int | None, rows_written: int) -> bool: ...

    def fire(self) -> None: ...


class CommitHook(Protocol):
    """Called on the driver once every task of micro-batch ``batch_id`` succeeded and its
    records are acknowledged, before Spark writes the batch to its commit log. A re-run of
    the batch calls it again. Raising fails the batch (Spark re-runs it)."""

    def committed(self, batch_id: int) -> None: ...


class RecordHeaders(Protocol):
    """Asked by a sink task for headers to add to every record of ``batch_id``."""

    def for_batch(self, batch_id: int) -> list[tuple[str, bytes]]: ...


def load_hook(ref: str, option: str, error: type[IOLayerError] = InvalidSinkOption) -> Any:
    """The object named ``module:attr`` by option ``option`` (``error`` says what is wrong)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise error(f"{option} must name a hook as module:attr, got {ref!r}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise error(f"{option}={ref!r} cannot be loaded: {exc}") from exc
