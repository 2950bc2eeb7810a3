"""Representation learning: topological memorization diagnostics, non-colliding identity provisioning."""

from .._lazy import attach

_EXPORTS = {
    "TopologicalMemorizationTracker": ".topo_memorization",
    "TopologyMonitor": ".topo_memorization",
    "penultimate_features": ".topo_memorization",
    "persistence_trajectory": ".topo_memorization",
    "NoiseSeverityCalibrator": ".topo_memorization",
    "PenultimateMLP": ".topo_memorization",
    "h1_total_persistence": ".topo_memorization",
    "persistence_diagrams": ".topo_memorization",
    "corrupt_labels": ".topo_memorization",
    "leave_one_rate_out_r2": ".topo_memorization",
    "grokking_trajectory": ".topo_memorization",
    "provision_identities": ".bip_gapgen",
    "IdentityProvisioner": ".bip_gapgen",
    "count_collisions": ".bip_gapgen",
    "density_realisability": ".bip_gapgen",
    "knn_cosines": ".bip_gapgen",
    "impostor_threshold": ".bip_gapgen",
    "real_subspace": ".bip_gapgen",
    "realisability": ".bip_gapgen",
    "synthetic_gallery": ".bip_gapgen",
    "minilm_name_gallery": ".bip_gapgen",
    "uniform_sphere": ".bip_gapgen",
    "MPOAdapter": ".nota_cil",
    "LoRAAdapter": ".nota_cil",
    "AdaptedLinear": ".nota_cil",
    "ClassIncrementalLearner": ".nota_cil",
    "SimpleCIL": ".nota_cil",
    "pretrain_denoising_autoencoder": ".nota_cil",
    "run_stream": ".nota_cil",
    "digits_stream": ".nota_cil",
    "gaussian_class_data": ".nota_cil",
    "gaussian_stream": ".nota_cil",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
