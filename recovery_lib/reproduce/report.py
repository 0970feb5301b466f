"""A paper's numbers beside ours: one row per paper row, Markdown + JSON + PNG."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from recovery_lib.charts import new_figure, save_figure
from recovery_lib.reproduce.measured import Extractor, Measured
from recovery_lib.reproduce.papers import PaperRow, paper, paper_rows
from recovery_lib.reproduce.runs import bench_commands

# One extractor per paper, named module:attr so that a paper's module is imported only when
# its report is made.
EXTRACTORS = {
    "clonos": "recovery_lib.reproduce.extract_clonos:extract",
    "checkmate": "recovery_lib.reproduce.extract_checkmate:extract",
    "active-replication": "recovery_lib.reproduce.extract_replication:extract",
    "cec": "recovery_lib.reproduce.extract_cec:extract",
    "flamestream": "recovery_lib.reproduce.extract_flamestream:extract",
}


def extractor(key: str) -> Extractor:
    module, _, attr = EXTRACTORS[key].partition(":")
    return getattr(importlib.import_module(module), attr)


def unanswered(key: str) -> dict[str, str]:
    """Paper ``key``'s rows no benchmark of ours answers: row-id pattern (fnmatch) -> why,
    the extractor module's ``UNANSWERED``."""
    module = EXTRACTORS[key].partition(":")[0]
    return dict(getattr(importlib.import_module(module), "UNANSWERED", {}))


def unanswered_because(reasons: dict[str, str], row_id: str) -> str:
    """The reason of the first pattern matching ``row_id``, or "" (no report written yet)."""
    return next((why for pattern, why in reasons.items() if fnmatchcase(row_id, pattern)), "")


# Every verdict a comparison row can have, in the order reports list them.
VERDICTS = ("agrees", "differs", "not comparable", "not measured")


@dataclass(frozen=True)
class Comparison:
    """A paper row and what we measured for it (several rows of ours when we ran it in more
    than one setting), and the verdict: agrees, differs, not comparable, not measured."""

    row: PaperRow
    ours: tuple[Measured, ...]
    unanswered_because: str = ""  # with no rows of ours: why no benchmark of ours answers it

    @property
    def verdict(self) -> str:
        if not self.ours:
            return "not measured"
        judged = [m.agrees for m in self.ours if m.agrees is not None]
        if not judged:
            return "not comparable"
        return "agrees" if all(judged) else "differs"

    def to_dict(self) -> dict[str, Any]:
        row = self.row
        return {
            "id": row.id,
            "source": row.source,
            "metric": row.metric,
            "setting": dict(row.setting),
            "paper": row.value,
            "unit": row.unit,
            "approx": row.approx,
            "paper_note": row.note,
            "ours": [m.to_dict() for m in self.ours],
            "verdict": self.verdict,
            "not_measured_because": "" if self.ours else self.unanswered_because,
        }


def compare(key: str, reports_dir: Path) -> list[Comparison]:
    """Every row of paper ``key`` with our measurements. An extractor row naming no row of
    the paper is an error (a typo would silently drop a measurement)."""
    rows = paper_rows(key)
    ours = extractor(key)(reports_dir)
    ids = {r.id for r in rows}
    stray = sorted({m.row_id for m in ours} - ids)
    if stray:
        raise ValueError(f"{key}: measured rows name no row of the paper: {stray}")
    reasons = unanswered(key)
    return [
        Comparison(r, tuple(m for m in ours if m.row_id == r.id), unanswered_because(reasons, r.id))
        for r in rows
    ]


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    text = f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{text} {unit}".strip()


def markdown(key: str, comparisons: list[Comparison]) -> str:
    p = paper(key)
    counts = {v: sum(c.verdict == v for c in comparisons) for v in
              VERDICTS}  # fmt: skip
    lines = [
        f"# {p.title}: the paper's numbers beside ours",
        "",
        f"Paper: {p.title} ({p.venue}); its numbers are in `recovery_lib/reproduce/"
        "paper_numbers.json` with their sources. Ours come from the benchmark reports named "
        "in each row (docs/benchmarks/), measured on one host with 2 cores on Spark "
        "micro-batches.",
        "",
        "Rows: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".",
        "",
        "| paper row | source | paper | ours | verdict | how we measured / why it differs |",
        "|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        row = c.row
        paper_value = _fmt(row.value, row.unit) + (" ~" if row.approx else "")
        if row.value is None:
            paper_value = f"trend: {row.note}" if row.note else "trend"
        ours = "; ".join(_fmt(m.value, m.unit) for m in c.ours) or "-"
        why = " ".join(
            (m.how + (f" Differs: {m.differs_because}" if m.differs_because else "")).strip()
            for m in c.ours
        )
        if not c.ours and c.unanswered_because:
            why = f"Not measured here: {c.unanswered_because}."
        lines.append(
            f"| {row.metric} `{row.id}` | {row.source} | {paper_value} | {ours} | "
            f"{c.verdict} | {why} |".replace("\n", " ")
        )
    if counts["not measured"]:
        lines += ["", f"Rows not measured say why when no benchmark of ours covers them; the "
                  f"others wait for a report not written yet. The reports come from: "
                  f"{', '.join(f'`{c}`' for c in bench_commands(key))} (or "
                  f"`recovery reproduce {key} --run`)."]  # fmt: skip
    differs = [c for c in comparisons if c.verdict == "differs"]
    if differs:
        lines += ["", "## Where ours disagrees, and why", ""]
        for c in differs:
            for m in c.ours:
                if m.agrees is False:
                    lines.append(f"- `{c.row.id}` ({c.row.source}): {m.differs_because}")
    return "\n".join(lines) + "\n"


def chart(key: str, comparisons: list[Comparison], path: Path) -> None:
    """Paper against ours for every row both give a number for in the same unit."""
    pairs = [
        (c.row.id.split(".", 1)[1], c.row.value, m.value)
        for c in comparisons
        for m in c.ours[:1]
        if c.row.value is not None and m.value is not None and m.unit == c.row.unit
    ]
    fig, ax = new_figure(figsize=(max(8, 0.5 * len(pairs) + 4), 6))
    if pairs:
        xs = range(len(pairs))
        ax.bar([x - 0.2 for x in xs], [p for _, p, _ in pairs], 0.4, label="paper")
        ax.bar([x + 0.2 for x in xs], [o for _, _, o in pairs], 0.4, label="ours")
        ax.set_xticks(list(xs), [n for n, _, _ in pairs], rotation=60, ha="right", fontsize=7)
        ax.set_yscale("symlog")
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no row with a number on both sides yet", ha="center")
    ax.set_title(f"{paper(key).title[:70]}: paper vs ours (same unit)")
    save_figure(fig, path, dpi=100)


def write(key: str, reports_dir: Path, out_dir: Path) -> tuple[dict[str, Path], list[Comparison]]:
    """``<out_dir>/<paper>.md``, ``.json`` and ``.png``; returns their paths and the rows."""
    comparisons = compare(key, reports_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {ext: out_dir / f"{key}.{ext}" for ext in ("md", "json", "png")}
    paths["md"].write_text(markdown(key, comparisons))
    paths["json"].write_text(
        json.dumps({"paper": key, "rows": [c.to_dict() for c in comparisons]}, indent=2)
    )
    chart(key, comparisons, paths["png"])
    return paths, comparisons
