"""The experiment harness: :class:`Run`, the runner, results and the report."""

from .run import MODES, VERDICTS, Check, ProgressSink, Run
from .runner import ExperimentNotAvailable, load_experiment, load_result, run_experiment

__all__ = [
    "MODES",
    "VERDICTS",
    "Check",
    "ExperimentNotAvailable",
    "ProgressSink",
    "Run",
    "load_experiment",
    "load_result",
    "run_experiment",
]
