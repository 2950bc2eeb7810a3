"""Recommendation: ModelLens (which pretrained model to try on a new data set)."""

from .._lazy import attach

_EXPORTS = {
    "ModelLens": ".modellens",
    "load_lcdb": ".modellens",
    "load_lcdb_datasets": ".modellens",
    "lcdb_models": ".modellens",
    "ranking_report": ".modellens",
    "ndcg_at_k": ".modellens",
    "weighted_tau": ".modellens",
    "hit_at_1": ".modellens",
    "regret_at_1": ".modellens",
    "zscore_groups": ".modellens",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
