"""The public job API: one ``JobSpec`` per job, the only thing every part of the toolkit reads
(experiments, the job daemon and its jobs file, the DAGs, standby pairs, GC, the oracle, the
GX suites, the dashboard).

A user's job is an ordinary Python module anywhere on ``PYTHONPATH``::

    # mycompany/fraud.py
    from recovery_lib.job import JobSpec, JobOptions, output, read_json_input
    from recovery_lib.verify.contract import ConsistencyContract, Fields

    def build(spark, opts: JobOptions):
        tx = read_json_input(spark, opts, "transactions", "id long, amount double", ["id"])
        ...                      # its logic, with recovery_lib.causal where nondeterministic
        return tx.select(*output(F.col("id"), [F.col("id"), F.col("score")], F.col("ingest_ms")))

    JOB = JobSpec(name="fraud", build=build, inputs=("transactions",),
                  contract=ConsistencyContract(deterministic=False, agreement=Fields(("id",))))

and is named ``mycompany.fraud:JOB`` (or ``mycompany.fraud``, whose ``JOB`` is taken).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from recovery_lib.errors import JobError
from recovery_lib.verify.contract import ConsistencyContract

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from recovery_lib.job.options import JobOptions


# Spark's output modes a job may declare (complete mode rewrites every key each batch).
OUTPUT_MODES = ("append", "update")


@runtime_checkable
class StartsItsQuery(Protocol):
    """What a job's ``build`` may return instead of a DataFrame: a plan that starts its own
    streaming query (a CEC aggregate, recovery_lib/cec). ``own_log``: the job runs in a mode
    whose state lives in its own output log (mode cec) rather than in Spark's state store.
    ``events(kind, detail)`` reports what the plan did to the run's metrics."""

    def start_own_query(
        self,
        opts: JobOptions,
        own_log: bool,
        events: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> Any: ...


@dataclass(frozen=True)
class ClosingTicks:
    """Records sent to an input after the real input ended, so that windows cut by processing
    time close (Q12).

    Args:
        input: The input (one of ``JobSpec.inputs``) the ticks go to.
        value: Each tick's record value.
        every_s: Seconds between two ticks.
        count: How many ticks.
    """

    input: str
    value: bytes
    every_s: float
    count: int = 2


@contextmanager
def _no_services() -> Iterator[dict[str, str]]:
    yield {}


@dataclass(frozen=True)
class JobSpec:
    """A streaming job: what every part of the toolkit reads about it.

    Name it ``module:attr`` (``--job``, the jobs file); ``load_job`` imports it.

    Args:
        name: The job's name: its checkpoint directory and its name in the metrics. Letters,
            digits and ``_``.
        build: ``build(spark, opts)``, called once per process (primary, restart, standby).
            It returns the output DataFrame with columns ``key`` (string), ``value`` (a
            struct, written as JSON with its Spark type recorded for the oracle, or a JSON
            string) and ``ingest_ms`` (the newest input's ingest time); the runtime writes it
            through the sink (``output`` builds these columns). It may instead return a plan
            that starts its own query (``StartsItsQuery``, a CEC aggregate).
        inputs: The job's input names, at least one (see ``JobOptions.topic_for``).
        contract: What every failure-free run agrees on; the oracle judges by it.
        default_prefix: The topic prefix when the launch gives none.
        params: Names the job requires as ``--param name=value`` (``JobOptions.param``).
        services: Entered around an experiment's runs; yields params the job needs (e.g. a
            local HTTP service's URL).
        closing_ticks: Records sent after the input ends so processing-time windows close.
        description: One line for listings.
        output_mode: "append", or "update": the output is a running aggregate without a
            window (``groupBy(...).agg(...)``) and each micro-batch writes the rows whose
            aggregate changed.
        ref: Where the job was found (``module:attr``); ``load_job`` fills it in.
        own_sink: The job writes its output itself (a team's unchanged Spark job,
            ``spark_query_job``): the project's sink modes, fence records, rehearsals and
            replicas do not apply, and its output carries no lineage ids.

    Raises:
        JobError: The name has other characters, no input is declared, or the output mode
            is neither append nor update.
    """

    name: str
    build: Callable[[SparkSession, JobOptions], DataFrame]
    inputs: tuple[str, ...]
    contract: ConsistencyContract = field(default_factory=ConsistencyContract)
    default_prefix: str = ""
    params: tuple[str, ...] = ()
    services: Callable[[], AbstractContextManager[dict[str, str]]] = _no_services
    closing_ticks: ClosingTicks | None = None
    description: str = ""
    output_mode: str = "append"
    ref: str = ""
    own_sink: bool = False

    def __post_init__(self) -> None:
        if not self.name.replace("_", "").isalnum():
            raise JobError(f"job name {self.name!r}: letters, digits and _ only")
        if not self.inputs:
            raise JobError(f"job {self.name}: declare at least one input")
        if self.output_mode not in OUTPUT_MODES:
            raise JobError(
                f"job {self.name}: output_mode {self.output_mode!r}; choose {list(OUTPUT_MODES)}"
            )

    @property
    def nondeterministic(self) -> bool:
        """Whether failure-free runs on the same input may differ (the contract says so)."""
        return not self.contract.deterministic


def import_job_module(name: str) -> ModuleType:
    """Module ``name`` of a job from PYTHONPATH; ``JobError`` says where to look."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise JobError(
            f"cannot import job module {name!r} ({exc}); is its directory on PYTHONPATH?"
        ) from exc


def load_job(ref: str) -> JobSpec:
    """The job named ``module:attr`` or ``module`` (its ``JOB``), imported from PYTHONPATH.

    Args:
        ref: ``module:attr`` or ``module``. The attribute is a ``JobSpec`` or a function
            that returns one.

    Returns:
        The job, its ``ref`` set to ``module:attr``.

    Raises:
        JobError: The module cannot be imported, has no such attribute, or the attribute is
            not a ``JobSpec``.
    """
    module_name, _, attr = ref.partition(":")
    attr = attr or "JOB"
    spec = getattr(import_job_module(module_name), attr, None)
    if spec is None:
        raise JobError(f"module {module_name} has no {attr!r}: define {attr} = JobSpec(...)")
    if callable(spec) and not isinstance(spec, JobSpec):
        spec = spec()
    if not isinstance(spec, JobSpec):
        raise JobError(
            f"{ref} is a {type(spec).__name__}, not a recovery_lib.job.JobSpec; point it at a "
            "JobSpec or a function that returns one"
        )
    canonical = f"{module_name}:{attr}"
    if spec.ref != canonical:
        object.__setattr__(spec, "ref", canonical)
    return spec


def resolve_job(name: str) -> JobSpec:
    """``module:attr`` or ``module`` as in ``load_job``; a bare name (``q3``, ``prices``) is a
    job of this repository's ``jobs`` package (``jobs.nexmark.<name>``, else ``jobs.<name>``)."""
    if ":" in name or "." in name:
        return load_job(name)
    for module in (f"jobs.nexmark.{name}", f"jobs.{name}"):
        if importlib.util.find_spec(module.rsplit(".", 1)[0]) is None:
            continue
        if importlib.util.find_spec(module) is not None:
            return load_job(module)
    raise JobError(
        f"no job {name!r}: give a job as module:attr (e.g. mypkg.myjob:JOB, its directory on "
        "PYTHONPATH), or the name of a job in this repository's jobs/ (e.g. q3, prices)"
    )
