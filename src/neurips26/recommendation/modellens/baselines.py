"""Baselines of the ModelLens reproduction: each returns scores (higher = ranked earlier) for candidates.

All of them are fitted on the training records only (z-values within (data set, metric) groups).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd


def popularity_scores(train: pd.DataFrame, metric: str, candidates: Sequence[str]) -> np.ndarray:
    """B1: each candidate's mean training z on ``metric`` (0 for a candidate never seen)."""
    mean = train[train["metric"] == metric].groupby("model")["z"].mean()
    return mean.reindex(list(candidates)).fillna(0.0).to_numpy(float)


def meta_knn_scores(
    train: pd.DataFrame,
    train_meta: np.ndarray,
    train_names: Sequence[str],
    query_meta: np.ndarray,
    metric: str,
    candidates: Sequence[str],
    k: int = 10,
) -> np.ndarray:
    """B2: the mean z of each candidate over the ``k`` training data sets nearest in meta-feature space.

    ``train_meta`` / ``query_meta`` are standardised meta-feature rows (fit on the training data sets).
    Returns an (n_queries, n_candidates) array; a candidate absent on a neighbour is skipped there.
    """
    pivot = (
        train[train["metric"] == metric]
        .pivot_table(index="dataset", columns="model", values="z", aggfunc="mean")
        .reindex(index=list(train_names), columns=list(candidates))
    )
    Z = pivot.to_numpy(float)
    has = np.isfinite(Z).any(1)  # training data sets that report this metric
    meta, Z = train_meta[has], Z[has]
    d2 = ((query_meta[:, None, :] - meta[None, :, :]) ** 2).sum(-1)
    nn_idx = np.argsort(d2, axis=1)[:, : min(k, len(meta))]
    neigh = Z[nn_idx]  # (q, k, c)
    with warnings.catch_warnings():  # a candidate missing on every neighbour scores 0
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.nanmean(neigh, axis=1)
    return np.nan_to_num(out, nan=0.0)


def text_only_scores(
    encode: Callable[[list[str]], np.ndarray], query_texts: Sequence[str], candidate_texts: Sequence[str]
) -> np.ndarray:
    """B3: cosine similarity between each query text and each candidate's text (sentence embeddings)."""
    q = np.asarray(encode(list(query_texts)), dtype=float)
    c = np.asarray(encode(list(candidate_texts)), dtype=float)
    q /= np.linalg.norm(q, axis=1, keepdims=True) + 1e-12
    c /= np.linalg.norm(c, axis=1, keepdims=True) + 1e-12
    return q @ c.T


def family_mean_scores(
    z_seen: pd.Series, families: Mapping[str, str], new_models: Sequence[str]
) -> np.ndarray:
    """Family-mean baseline for new models: the mean z of the SEEN models of the same family on this group
    (the mean over all seen models when the family has none)."""
    seen_fam = pd.Series({m: families[m] for m in z_seen.index})
    overall = float(z_seen.mean()) if len(z_seen) else 0.0
    out = []
    for m in new_models:
        same = z_seen[seen_fam == families[m]] if len(z_seen) else z_seen
        out.append(float(same.mean()) if len(same) else overall)
    return np.asarray(out)
