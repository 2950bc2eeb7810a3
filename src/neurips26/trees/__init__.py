"""Tree ensembles: spectral distillation of random forests and boosting."""

from .._lazy import attach

_EXPORTS = {
    "SpectralForestDistiller": ".spectral_forests",
    "PrunedForest": ".spectral_forests",
    "TreeSmoother": ".spectral_forests",
    "forest_kernel": ".spectral_forests",
    "leaf_membership": ".spectral_forests",
    "refit_leaf_values": ".spectral_forests",
    "smoother_spectrum": ".spectral_forests",
    "eigen_decay_exponent": ".spectral_forests",
    "minimax_rate_exponent": ".spectral_forests",
    "count_nodes": ".spectral_forests",
    "mlp_parameter_count": ".spectral_forests",
    "student_layers_for_budget": ".spectral_forests",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
