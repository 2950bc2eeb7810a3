"""Minimax Rates and Spectral Distillation for Tree Ensembles (Vu & Watson, arXiv 2605.11841).

A fitted random forest is a kernel smoother (leaf co-membership kernel ``K``), a squared-loss gradient
boosting model a linear smoother ``S``; their leading eigenfunctions (Nystrom) or singular vectors are
distilled into a tiny MLP (:class:`SpectralForestDistiller`). :class:`PrunedForest` is the forest-pruning
baseline (greedy tree subset + depth truncation under a node budget).
"""

from .distill import SpectralForestDistiller, mlp_parameter_count, student_layers_for_budget
from .pruning import PrunedForest, count_nodes
from .smoother import (
    TreeSmoother,
    eigen_decay_exponent,
    forest_kernel,
    leaf_membership,
    minimax_rate_exponent,
    refit_leaf_values,
    smoother_spectrum,
)

__all__ = [
    "SpectralForestDistiller",
    "PrunedForest",
    "TreeSmoother",
    "forest_kernel",
    "leaf_membership",
    "refit_leaf_values",
    "smoother_spectrum",
    "eigen_decay_exponent",
    "minimax_rate_exponent",
    "count_nodes",
    "mlp_parameter_count",
    "student_layers_for_budget",
]
