"""The experiment harness: claims declarations, :class:`Run`, the runner, run records, executors, report.

Names are loaded on first use, so that reading a declaration (``neurips26 show``) imports nothing heavy.
"""

from .._lazy import attach

_EXPORTS = {
    "KINDS": ".claims",
    "MODES": ".claims",
    "OUTCOMES": ".claims",
    "VERDICTS": ".claims",
    "CheckSpec": ".claims",
    "Claims": ".claims",
    "ClaimsError": ".claims",
    "load_claims": ".claims",
    "parse_claims": ".claims",
    "verdict_from": ".claims",
    "MissingDependency": ".deps",
    "Slope": ".measure",
    "Timer": ".measure",
    "line_fit": ".measure",
    "loglog_slope": ".measure",
    "time_repeats": ".measure",
    "load_result": ".records",
    "load_sweep": ".records",
    "ProgressSink": ".run",
    "Run": ".run",
    "ExperimentNotAvailable": ".runner",
    "load_experiment": ".runner",
    "run_experiment": ".runner",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
