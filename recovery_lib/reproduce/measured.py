"""Our side of a comparison: ``Measured`` rows, and the extractor interface each paper's
module implements (``extract_<paper>.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


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
