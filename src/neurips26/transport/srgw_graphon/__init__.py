"""Network Learning with Semi-relaxed Gromov-Wasserstein (Dufour, Naepels, Santoro; arXiv 2606.02223).

Estimate a stochastic block model or a graphon from one graph by minimising the square-loss semi-relaxed
Gromov-Wasserstein objective between the adjacency matrix and a K-block structure (block-coordinate descent:
closed-form block matrix, Frank-Wolfe coupling), then rounding the coupling to a hard partition.
"""

from .baselines import sas_estimate, spectral_sbm_estimate, usvt_estimate
from .estimator import SRGWGraphonEstimator, initial_coupling, srgw_block_coordinate_descent
from .random_graphs import GRAPHONS, SBMS, sample_graphon, sample_sbm, theta_mse
from .srgw import round_coupling, srgw_conditional_gradient, srgw_loss, update_block_matrix

__all__ = [
    "SRGWGraphonEstimator",
    "srgw_conditional_gradient",
    "srgw_block_coordinate_descent",
    "usvt_estimate",
    "sas_estimate",
    "srgw_loss",
    "update_block_matrix",
    "round_coupling",
    "initial_coupling",
    "spectral_sbm_estimate",
    "sample_sbm",
    "sample_graphon",
    "theta_mse",
    "GRAPHONS",
    "SBMS",
]
