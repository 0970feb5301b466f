"""Where a micro-batch ends. One small interface; the source asks its policy at every trigger.

``FreeCut`` (this module) cuts as far as data is there, bounded by the admission limit. Later
policies (marker-aligned, heartbeat-aligned, leader-published, forced) implement the same
``CutPolicy.cut`` and are selected by the source option ``cutPolicy``; ``planned`` tells a
policy that Spark logged and is about to read a batch (KaZoo's leader publishes it then).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from recovery_lib.io.exceptions import InvalidSourceOption
from recovery_lib.io.hooks import load_hook
from recovery_lib.io.offsets import Offsets


class CutPolicy(ABC):
    name: str = ""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)

    @abstractmethod
    def cut(self, start: Offsets, available: Offsets, max_rows: int | None) -> Offsets:
        """End offsets of the next batch: ``start <= end <= available`` per partition."""

    def planned(self, start: Offsets, end: Offsets) -> None:  # noqa: B027 - optional
        """Spark wrote the batch's offset-log entry and now plans its read (before any task
        runs); called again when a restarted query re-runs its last planned batch."""


class FreeCut(CutPolicy):
    """As far as data is there; with ``max_rows``, a fair share per partition."""

    name = "free"

    def cut(self, start: Offsets, available: Offsets, max_rows: int | None) -> Offsets:
        backlog = {
            (t, p): max(0, end - start.get(t, {}).get(p, end))
            for t, parts in available.items()
            for p, end in parts.items()
        }
        take = fair_share(backlog, max_rows)
        result: Offsets = {}
        for t, parts in available.items():
            result[t] = {}
            for p, end in parts.items():
                begin = start.get(t, {}).get(p, end)
                result[t][p] = begin + take[(t, p)] if (t, p) in take else end
        return result


def fair_share(
    backlog: Mapping[tuple[str, str], int], max_rows: int | None
) -> dict[tuple[str, str], int]:
    """Split ``max_rows`` over partitions: equal shares, leftovers to those with more backlog.

    Deterministic (sorted keys), never exceeds a partition's backlog or the total.
    """
    if max_rows is None or sum(backlog.values()) <= max_rows:
        return dict(backlog)
    take = {key: 0 for key in backlog}
    remaining = max_rows
    open_keys = sorted(k for k, v in backlog.items() if v > 0)
    while remaining > 0 and open_keys:
        share = max(1, remaining // len(open_keys))
        still_open = []
        for key in open_keys:
            if remaining == 0:
                break
            grant = min(share, backlog[key] - take[key], remaining)
            take[key] += grant
            remaining -= grant
            if take[key] < backlog[key]:
                still_open.append(key)
        open_keys = still_open
    return take


CUT_POLICIES: dict[str, type[CutPolicy]] = {FreeCut.name: FreeCut}


def make_cut_policy(name: str, options: Mapping[str, str]) -> CutPolicy:
    """A built-in policy by name, or a mechanism's ``CutPolicy`` subclass as ``module:attr``
    (e.g. the standby's follow policy; io does not import the mechanisms)."""
    if ":" in name:
        policy = load_hook(name, "cutPolicy", InvalidSourceOption)
        if not (isinstance(policy, type) and issubclass(policy, CutPolicy)):
            raise InvalidSourceOption(f"cutPolicy {name!r} is not a CutPolicy subclass")
        return policy(options)
    try:
        return CUT_POLICIES[name](options)
    except KeyError:
        raise InvalidSourceOption(
            f"unknown cutPolicy {name!r}; choose one of {sorted(CUT_POLICIES)} or a "
            "CutPolicy subclass as module:attr"
        ) from None
