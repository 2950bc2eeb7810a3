"""Noisy alignment: a margin-based generalisation of GNN expressivity with robustness radii (NeurIPS 2026,
descriptive title; no arXiv id). Definitions are reconstructed from the abstract (see :mod:`.alignment`)."""

from .alignment import (
    alignment_margins,
    certified_flip_radius,
    empirical_flip_lipschitz,
    gin_flip_bound,
    margin_loss,
    project_spectral_norm,
    robustness_radius,
    separation_gaps,
    sources_with_neighbour_at,
    train_alignment,
    zero_noise_alignment,
)
from .atlas import AtlasFlipIndex
from .gnn import (
    DenseGNN,
    all_single_flips,
    degree_features,
    edge_index_to_dense,
    random_edge_flips,
    to_dense_batch,
)
from .node_certificate import (
    GINNodeClassifier,
    greedy_flip_attack,
    make_csbm,
    node_certificates,
    train_node_classifier,
)

__all__ = [
    "AtlasFlipIndex",
    "DenseGNN",
    "GINNodeClassifier",
    "alignment_margins",
    "all_single_flips",
    "certified_flip_radius",
    "degree_features",
    "edge_index_to_dense",
    "empirical_flip_lipschitz",
    "gin_flip_bound",
    "greedy_flip_attack",
    "make_csbm",
    "margin_loss",
    "node_certificates",
    "project_spectral_norm",
    "random_edge_flips",
    "robustness_radius",
    "separation_gaps",
    "sources_with_neighbour_at",
    "to_dense_batch",
    "train_alignment",
    "train_node_classifier",
    "zero_noise_alignment",
]
