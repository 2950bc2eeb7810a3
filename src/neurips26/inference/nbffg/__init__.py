"""Neural Backward Filtering Forward Guiding (Yang, van der Meulen and Sommer, arXiv 2601.23030).

Backward filter of a linear-Gaussian proxy on a tree, guided forward proposals, a neural residual trained on
the reverse-KL objective with unbiased root-to-leaf path subsampling; exact references (dense Gaussian
conditioning, 1-D grid sum-product) and the baselines (bootstrap IS, mean-field Gaussian VI, BFFG-MCMC).
"""

from .backward_filter import (
    CanonicalMessages,
    backward_filter,
    dense_gaussian_tree_posterior,
    gaussian_tree_smoother,
    root_log_evidence,
)
from .baselines import MeanFieldGaussianVI, bffg_mcmc
from .grid import GridPosterior, grid_posterior_1d
from .nbffg import (
    NBFFG,
    ConditionalAffineResidual,
    bootstrap_importance_sampling,
    importance_summary,
    linearised_proxy,
    simulate_tree,
)
from .tree import Tree, as_tree, balanced_binary_tree, diffusion_grid, subdivide_edges

__all__ = [
    "NBFFG",
    "MeanFieldGaussianVI",
    "bffg_mcmc",
    "diffusion_grid",
    "grid_posterior_1d",
    "bootstrap_importance_sampling",
    "dense_gaussian_tree_posterior",
    "CanonicalMessages",
    "ConditionalAffineResidual",
    "GridPosterior",
    "Tree",
    "as_tree",
    "backward_filter",
    "balanced_binary_tree",
    "gaussian_tree_smoother",
    "importance_summary",
    "linearised_proxy",
    "root_log_evidence",
    "simulate_tree",
    "subdivide_edges",
]
