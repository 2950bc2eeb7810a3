"""Optimal transport: semi-relaxed Gromov-Wasserstein graphon estimation."""

from .._lazy import attach

_EXPORTS = {
    "SRGWGraphonEstimator": ".srgw_graphon",
    "srgw_conditional_gradient": ".srgw_graphon",
    "srgw_block_coordinate_descent": ".srgw_graphon",
    "usvt_estimate": ".srgw_graphon",
    "sas_estimate": ".srgw_graphon",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
