"""Grouped-feature FDR control with block mirror statistics (NeurIPS 2026; descriptive title, paper text not found).

Linear part: :class:`GroupedMirrorFDR` (block Gaussian mirror with matrix-valued perturbations ``C_g``; OLS, or
group-Lasso screening plus an OLS refit when ``p >= n``);
neural part: :class:`NeuralBlockMirrorFDR` (kernel-scaled mirror, block Permutation SHAP, SHAP derivatives).
Both constructions are our reconstruction from the paper's predecessors (Gaussian Mirror, NGM, CatNet).
"""

from .block_mirror import (
    GroupedMirrorFDR,
    benjamini_hochberg,
    block_mirror_statistics,
    gaussian_mirror_statistics,
    group_lasso,
    group_lasso_mirror_statistics,
    group_partial_f_pvalues,
    lagged_design,
    mirror_matrices,
    mirror_threshold,
)
from .neural_mirror import (
    NeuralBlockMirrorFDR,
    block_permutation_shap,
    hsic,
    kernel_mirror_scale,
    shap_derivatives,
)

__all__ = [
    "GroupedMirrorFDR",
    "NeuralBlockMirrorFDR",
    "block_mirror_statistics",
    "group_lasso_mirror_statistics",
    "gaussian_mirror_statistics",
    "mirror_threshold",
    "group_partial_f_pvalues",
    "benjamini_hochberg",
    "block_permutation_shap",
    "group_lasso",
    "hsic",
    "mirror_matrices",
    "kernel_mirror_scale",
    "lagged_design",
    "shap_derivatives",
]
