"""The papers' own numbers (``paper_numbers.json``, one file, each row with its source)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from recovery_lib.errors import ConfigurationError

PAPER_NUMBERS = Path(__file__).with_name("paper_numbers.json")
PAPERS = ("clonos", "checkmate", "active-replication", "cec", "flamestream")


@dataclass(frozen=True)
class PaperRow:
    """One number a paper reports. ``value`` None: the paper states only a trend (``note``
    says which); ``approx``: read from a plot or a sentence such as "about 10 %"."""

    id: str
    paper: str
    source: str  # "Table II", "Fig. 7 / Section VII-B text", ...
    metric: str
    value: float | None
    unit: str
    setting: Mapping[str, Any] = field(default_factory=dict)
    approx: bool = False
    note: str = ""

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PaperRow:
        return cls(
            id=raw["id"],
            paper=raw["paper"],
            source=raw["source"],
            metric=raw["metric"],
            value=raw.get("value"),
            unit=raw.get("unit", ""),
            setting=raw.get("setting") or {},
            approx=bool(raw.get("approx", False)),
            note=raw.get("note", ""),
        )


@dataclass(frozen=True)
class Paper:
    key: str
    title: str
    venue: str
    file: str


@cache
def _load() -> tuple[dict[str, Paper], tuple[PaperRow, ...]]:
    raw = json.loads(PAPER_NUMBERS.read_text())
    papers = {
        key: Paper(key, p.get("title", key), p.get("venue", ""), p.get("file", ""))
        for key, p in raw["papers"].items()
    }
    rows = tuple(PaperRow.from_json(r) for r in raw["rows"])
    unknown = sorted({r.paper for r in rows} - set(papers))
    if unknown:
        raise ValueError(f"{PAPER_NUMBERS}: rows name unknown papers {unknown}")
    return papers, rows


def paper(key: str) -> Paper:
    papers, _ = _load()
    if key not in papers:
        raise ConfigurationError(f"unknown paper {key!r}; choose from {', '.join(PAPERS)}")
    return papers[key]


def paper_rows(key: str | None = None) -> list[PaperRow]:
    """Every row of paper ``key`` (all papers' rows with None), in file order."""
    if key is not None:
        paper(key)  # says what to choose from when the key is wrong
    return [r for r in _load()[1] if key is None or r.paper == key]
