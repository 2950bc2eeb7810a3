"""Kernels: manifold and graph random features."""

from .._lazy import attach

_EXPORTS = {
    "ManifoldRandomFeatures": ".manifold_random_features",
    "GraphRandomFeatures": ".manifold_random_features",
    "heat_time_to_sigma2": ".manifold_random_features",
    "intrinsic_dimension": ".manifold_random_features",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
