"""The charts every report draws: a matplotlib figure without a display, saved beside the
report's JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def new_figure(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``plt.subplots(*args, **kwargs)`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(fig: Any, path: str | Path, dpi: int = 100) -> None:
    """Lay out, write ``path`` and free the figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
