"""The public job API and the generic job runtime.

``JobSpec`` (spec.py) declares a job: its builder, inputs, consistency contract and services.
``JobOptions`` (options.py) is what a running job is told. ``read_json_input``, ``output`` and
``write_output`` (frames.py) are the pieces a builder uses. ``spark_query_job``
(spark_query.py) declares a team's unchanged Spark job, which writes its output itself. ``run``
(runner.py) runs a job as a supervised process; ``python -m recovery_lib.job --job mod:attr`` is
its launcher.
"""

from recovery_lib.job.frames import output, read_json_input, route_dead_letters, write_output
from recovery_lib.job.options import JobOptions
from recovery_lib.job.spark_query import spark_query_job
from recovery_lib.job.spec import ClosingTicks, JobSpec, load_job

__all__ = [
    "ClosingTicks",
    "JobOptions",
    "JobSpec",
    "load_job",
    "output",
    "read_json_input",
    "route_dead_letters",
    "spark_query_job",
    "write_output",
]
