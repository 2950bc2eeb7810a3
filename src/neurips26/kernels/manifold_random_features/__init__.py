"""Manifold Random Features (Parashar, Long, Saha, Choromanski; arXiv 2602.03797).

Positive, bounded random features for heat/diffusion kernels on a sampled manifold: a kNN graph of the samples,
graph random features (random walks with importance-weighted loads and a modulation function that is the
deconvolution square root of the kernel's power series), and a small neural field that extends them to any point.

- :class:`GraphRandomFeatures`: GRFs of ``exp(-sigma2 L)`` / ``(I + sigma2 L)^{-1}`` on a weighted graph;
- :class:`ManifoldRandomFeatures`: the full pipeline, ``fit(X)`` then ``transform`` / ``kernel_matrix``
  (``heat_time=t`` sets the graph time from the manifold's heat time);
- ``manifolds``: Swiss roll, flat torus, sphere and lattice with closed-form heat kernels (the ground truth).
"""

from .graph_random_features import GraphRandomFeatures, modulation_function
from .manifold_random_features import (
    ManifoldRandomFeatures,
    farthest_point_sampling,
    heat_time_to_sigma2,
    intrinsic_dimension,
    knn_gaussian_graph,
)

__all__ = [
    "ManifoldRandomFeatures",
    "GraphRandomFeatures",
    "heat_time_to_sigma2",
    "intrinsic_dimension",
    "farthest_point_sampling",
    "knn_gaussian_graph",
    "modulation_function",
]
