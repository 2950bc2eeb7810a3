"""Optimal transport: semi-relaxed Gromov-Wasserstein graphon estimation."""

from .._lazy import attach

_EXPORTS = {
    "SRGWGraphonEstimator": ".srgw_graphon",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
