"""Streams: MaxSketch distinct counting, Kontoyiannis entropy-rate estimation and filtering."""

from .._lazy import attach

_EXPORTS = {
    "MaxSketch": ".maxsketch",
    "sketch_dask": ".maxsketch",
    "LogLinearCalibration": ".maxsketch",
    "estimate_noise_scale": ".maxsketch",
    "estimate_from_maxima": ".maxsketch",
    "entropy_rate": ".hk_entropy_filter",
    "EntropyRateFilter": ".hk_entropy_filter",
    "match_lengths": ".hk_entropy_filter",
    "entropy_from_match_lengths": ".hk_entropy_filter",
    "naive_match_lengths": ".hk_entropy_filter",
    "stdlib_docstrings": ".hk_entropy_filter",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
