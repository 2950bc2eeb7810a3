"""Graphs: noisy-alignment margins and certified radii for GNNs."""

from .._lazy import attach

_EXPORTS = {
    "AtlasFlipIndex": ".noisy_gnn_margin",
    "DenseGNN": ".noisy_gnn_margin",
    "GINNodeClassifier": ".noisy_gnn_margin",
    "alignment_margins": ".noisy_gnn_margin",
    "all_single_flips": ".noisy_gnn_margin",
    "certified_flip_radius": ".noisy_gnn_margin",
    "degree_features": ".noisy_gnn_margin",
    "edge_index_to_dense": ".noisy_gnn_margin",
    "empirical_flip_lipschitz": ".noisy_gnn_margin",
    "gin_flip_bound": ".noisy_gnn_margin",
    "greedy_flip_attack": ".noisy_gnn_margin",
    "make_csbm": ".noisy_gnn_margin",
    "margin_loss": ".noisy_gnn_margin",
    "node_certificates": ".noisy_gnn_margin",
    "project_spectral_norm": ".noisy_gnn_margin",
    "random_edge_flips": ".noisy_gnn_margin",
    "robustness_radius": ".noisy_gnn_margin",
    "separation_gaps": ".noisy_gnn_margin",
    "sources_with_neighbour_at": ".noisy_gnn_margin",
    "to_dense_batch": ".noisy_gnn_margin",
    "train_alignment": ".noisy_gnn_margin",
    "train_node_classifier": ".noisy_gnn_margin",
    "zero_noise_alignment": ".noisy_gnn_margin",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
