"""Recovery experiments: a faulty and a reference run on the same input, judged by the oracle.

``ExperimentConfig`` says what to run (the job, its mode and sink, the failures, the input);
``Experiment(cfg).run()`` runs it and returns the report, which ``write_report`` saves as JSON
with a PNG timeline beside it. ``recovery experiment run`` is this on the command line.
"""

from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report

__all__ = ["Experiment", "ExperimentConfig", "write_report"]
