"""Topology of noisy-label memorization: H1 persistent homology of penultimate representations (NeurIPS 2026,
descriptive title; no arXiv id found).

The total H1 persistence of the Vietoris-Rips filtration of L2-normalised penultimate features of a fixed
probe set is a label-free signal of label-noise memorisation: it grows with the noise rate, calibrates the
noise severity per pipeline, and stays near the clean level under learnable (asymmetric) noise.
"""

from .calibration import NoiseSeverityCalibrator, leave_one_rate_out_r2
from .grokking import grokking_trajectory, h1_falls_during_grokking, modular_addition_data
from .noise import corrupt_labels
from .persistence import (
    activation_variance,
    cohens_d,
    diagram_summary,
    h1_total_persistence,
    normalize_cloud,
    partial_correlation,
    per_class_h1,
    persistence_diagrams,
    topological_summary,
    twonn_dimension,
)
from .tracker import (
    PenultimateMLP,
    TopologicalMemorizationTracker,
    TopologyMonitor,
    crossover_epoch,
    penultimate_features,
    penultimate_layer,
    persistence_trajectory,
    stratified_probe_index,
)

__all__ = [
    "TopologicalMemorizationTracker",
    "TopologyMonitor",
    "penultimate_features",
    "persistence_trajectory",
    "NoiseSeverityCalibrator",
    "PenultimateMLP",
    "h1_total_persistence",
    "persistence_diagrams",
    "corrupt_labels",
    "leave_one_rate_out_r2",
    "grokking_trajectory",
    "activation_variance",
    "cohens_d",
    "crossover_epoch",
    "diagram_summary",
    "h1_falls_during_grokking",
    "modular_addition_data",
    "normalize_cloud",
    "partial_correlation",
    "penultimate_layer",
    "per_class_h1",
    "stratified_probe_index",
    "topological_summary",
    "twonn_dimension",
]
