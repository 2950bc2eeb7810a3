"""Evaluation: auditing reported results and a shared evaluation harness (geospatial foundation models)."""

from .._lazy import attach

_EXPORTS = {
    "ResultsAuditor": ".gfm_audit",
    "AuditReport": ".gfm_audit",
    "normalize_protocol": ".gfm_audit",
    "AliasTable": ".gfm_audit",
    "read_results_csv": ".gfm_audit",
    "benchmark_concentration": ".gfm_audit",
    "gini": ".gfm_audit",
    "hhi": ".gfm_audit",
    "top_k_share": ".gfm_audit",
    "bootstrap_ci": ".gfm_audit",
    "pretraining_uniqueness": ".gfm_audit",
    "release_rates": ".gfm_audit",
    "EvaluationHarness": ".gfm_audit",
    "PCABackbone": ".gfm_audit",
    "RandomConvBackbone": ".gfm_audit",
    "TinyCNNBackbone": ".gfm_audit",
    "SoftmaxProbe": ".gfm_audit",
    "synthetic_literature": ".gfm_audit",
    "synthetic_eo_benchmark": ".gfm_audit",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
