"""Launch a job process: ``python -m recovery_lib.job --job mod:attr [job options]``
(also the script spark-submit runs in cluster mode)."""

from __future__ import annotations

import sys

from recovery_lib.job.runner import run
from recovery_lib.job.spec import load_job


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--job" not in argv or argv.index("--job") + 1 >= len(argv):
        raise SystemExit("usage: python -m recovery_lib.job --job module:attr [options]")
    spec = load_job(argv[argv.index("--job") + 1])
    run(spec, argv)


if __name__ == "__main__":
    main()
