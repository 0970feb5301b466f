"""Writes the public API reference, docs/api/ (run: make docs-api).

The public API is what a user's job or script imports: the job spec, ``causal.*``, contracts
and agreements, sinks and their options, the oracle and the experiment. Each module below has
an ``__all__``; pdoc documents those names only. A pdoc warning (a name in ``__all__`` that
does not resolve, an annotation it cannot read) fails the build.
tests/unit/test_api_docs.py builds it the same way and checks the docstrings.
"""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

MODULES = (
    "recovery_lib.job",
    "recovery_lib.causal",
    "recovery_lib.verify.contract",
    "recovery_lib.verify.inputs",
    "recovery_lib.verify.schema",
    "recovery_lib.verify.oracle",
    "recovery_lib.io.sinks.modes",
    "recovery_lib.io.sinks.kafka_sink",
    "recovery_lib.io.sinks.table_target",
    "recovery_lib.experiment",
    "recovery_lib.errors",
)


def build(out: Path) -> None:
    """Write the reference of ``MODULES`` to ``out`` (emptied first).

    Args:
        out: The directory to write; its previous contents are removed.

    Raises:
        Warning: Any warning pdoc (or an import) issues, turned into an error.
    """
    import pdoc
    import pdoc.render

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    pdoc.render.configure(docformat="google", show_source=False, search=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pdoc.pdoc(*MODULES, output_directory=out)


if __name__ == "__main__":
    build(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "api"))
