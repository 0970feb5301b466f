"""Our side of a comparison: ``Measured`` rows, and the extractor interface each paper's
module implements (``extract_<paper>.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from recovery_lib.errors import ReportError


@dataclass(frozen=True)
class Measured:
    """Our number for the paper row ``row_id``, read from one of our benchmark reports.

    ``agrees``: True when ours shows what the paper's number shows (within the tolerance the
    extractor states in ``how``), False when it does not, None when the two are not comparable
    (e.g. absolute times on other hardware, or a trend-only paper row judged by ``how``).
    ``differs_because`` says why ours differs (Spark micro-batches, one host, 2 cores, the
    scale), and is required whenever ``agrees`` is False."""

    row_id: str
    value: float | None
    unit: str
    report: str  # the report it comes from, relative to the repository
    how: str  # what we ran and how the number is derived, in one sentence
    agrees: bool | None = None
    differs_because: str = ""

    def __post_init__(self) -> None:
        if self.agrees is False and not self.differs_because:
            raise ValueError(f"{self.row_id}: a disagreement must say why (differs_because)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# An extractor reads the benchmark reports under ``reports_dir`` (docs/benchmarks) and returns
# our rows. A report that is missing yields no rows (the comparison says "not measured");
# a report that exists but lacks a field the extractor needs raises, naming the field.
Extractor = Callable[[Path], list[Measured]]


REPO = Path(__file__).resolve().parents[2]


def load_report(reports_dir: Path, name: str) -> dict[str, Any] | None:
    """The benchmark report ``name`` under ``reports_dir``, or None if it was not written."""
    path = reports_dir / name
    return json.loads(path.read_text()) if path.exists() else None


def field(where: str, obj: Any, *keys: str | int) -> Any:
    """``obj[k0][k1]...``; a missing field raises, naming ``where`` (the report, and the entry
    ``obj`` is in it) and the field, so a changed report format fails loudly."""
    for i, key in enumerate(keys):
        try:
            obj = obj[key]
        except (KeyError, IndexError, TypeError):
            name = ".".join(str(k) for k in keys[: i + 1])
            raise ReportError(
                f"{where}: missing field {name}; re-run the benchmark that writes it"
            ) from None
    return obj


def report_path(path: Path) -> str:
    """A report's path as rows cite it: relative to the repository when it lies inside."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)
