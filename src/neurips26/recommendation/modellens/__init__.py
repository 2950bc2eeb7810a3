"""ModelLens: Finding the Best for Your Task from Myriads of Models (arXiv 2605.07075).

Recommend which model to try on a NEW data set from public leaderboard records ``(model, data set, task,
metric, score)`` without running any candidate on it. Scores become z-values within each (data set, task,
metric) group (sign-flipped for losses, clipped at +-alpha [R]). A model is represented by a learned ID embedding
(replaced by UNK with probability ``id_dropout`` in training, so new models are scored from side information),
hashed name tokens, a frozen text embedding of its card, a size bucket and a family; a data set by its ID (UNK
when new), its standardised meta-features and a frozen embedding of its description. A two-layer MLP over the
sum of their projections gives ``s = (w_s . h + prior(size, family)) / T`` and a pointwise head ``z_hat``.
Training minimises ``0.5 ListMLE(s / tau) + BPR(s)`` with ``0.1 MSE(z_hat, z)`` terms (Adam, gradient clip,
early stopping on held-out data sets scored as new); ``loss="pointwise"`` is the MSE-only ablation.

[R] reconstructed: the z clip reading of the config's ``alpha``, pair weights ``|z_p - z_q|`` (mean one per
batch), widths (the paper's 1536-wide embeddings are cut to 32 by default for CPU), the text encoder
(all-MiniLM-L6-v2, offline). :func:`load_lcdb` reads the LCDB learning curves bundled in the PyPI ``lcdb`` package
as a leaderboard (cached after the first load).

    lens = ModelLens().fit(records, datasets=meta, models=cards)   # records: model, dataset, metric, score
    lens.rank({"description": "credit default", "NumberOfInstances": 3e4}, candidates, "accuracy")
"""

from .lcdb_data import LEARNERS, lcdb_models, load_lcdb, load_lcdb_datasets
from .modellens import ModelLens, family_from_name, name_tokens, zscore_groups
from .ranking_metrics import hit_at_1, ndcg_at_k, ranking_report, regret_at_1, weighted_tau

__all__ = [
    "ModelLens",
    "load_lcdb",
    "load_lcdb_datasets",
    "lcdb_models",
    "ranking_report",
    "ndcg_at_k",
    "weighted_tau",
    "hit_at_1",
    "regret_at_1",
    "zscore_groups",
    "LEARNERS",
    "family_from_name",
    "name_tokens",
]
