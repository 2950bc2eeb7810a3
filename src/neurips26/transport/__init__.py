"""Optimal transport: semi-relaxed Gromov-Wasserstein graphon estimation; sparse support grounding MIL."""

from .._lazy import attach

_EXPORTS = {
    "SRGWGraphonEstimator": ".srgw_graphon",
    "srgw_conditional_gradient": ".srgw_graphon",
    "srgw_block_coordinate_descent": ".srgw_graphon",
    "usvt_estimate": ".srgw_graphon",
    "sas_estimate": ".srgw_graphon",
    "SparseSupportGroundingMIL": ".ssg_mil",
    "AttentionMIL": ".ssg_mil",
    "unbalanced_sinkhorn_log": ".ssg_mil",
    "retained_mass": ".ssg_mil",
    "grounding_weights": ".ssg_mil",
    "synthetic_bags": ".ssg_mil",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
