"""Ranking quality of a recommended model list: NDCG@K, weighted Kendall tau, Hit@1, regret@1.

Every function takes ``true`` (the measured, higher-is-better scores of the candidates on one group) and
``pred`` (the recommender's scores, higher = ranked earlier) as 1-D arrays of the same length.

- NDCG gains are ``2^r - 1`` with ``r`` the true scores min-max normalised within the group (best 1, worst 0),
  as in the official ModelLens evaluation; NDCG@K is the discounted (log2) gain of the top-K picks over the best
  achievable.
  Ties in ``pred`` are averaged over their orderings (as scikit-learn's ``ndcg_score`` does).
- Weighted Kendall tau is :func:`scipy.stats.weightedtau` with the hyperbolic weigher and the weights taken
  from the TRUE ranking (``rank=None`` with ``true`` first), so swaps near the true top cost the most.
- Hit@1 is 1 when the top pick is a true best (a tie in ``pred`` at the top counts fractionally).
- regret@1 is the normalised gain lost by taking the top pick instead of the true best: 1 - gain(top pick).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import weightedtau


def _pair(true, pred) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(true, dtype=float)
    p = np.asarray(pred, dtype=float)
    if t.ndim != 1 or p.shape != t.shape:
        raise ValueError(f"true and pred must be 1-D arrays of one length, got {t.shape} and {p.shape}")
    if t.size < 2:
        raise ValueError(f"a ranking needs at least 2 candidates, got {t.size}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
        raise ValueError("true and pred must be finite")
    return t, p


def normalised_gain(true) -> np.ndarray:
    """Min-max normalised true scores (all ones when every candidate scores the same)."""
    t = np.asarray(true, dtype=float)
    span = t.max() - t.min()
    return np.ones_like(t) if span <= 0 else (t - t.min()) / span


def ndcg_at_k(true, pred, k: int = 3) -> float:
    """NDCG@k with gains ``2^r - 1`` of the min-max normalised true scores ``r``; ties in ``pred`` averaged."""
    t, p = _pair(true, pred)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    g = np.exp2(normalised_gain(t)) - 1.0
    k = min(int(k), t.size)
    discount = 1.0 / np.log2(np.arange(2, t.size + 2))
    discount[k:] = 0.0
    ideal = float(np.sort(g)[::-1] @ discount)
    # expected discounted gain over random orderings of tied predictions: each tie block shares its discounts
    order = np.argsort(-p, kind="stable")
    ps, gs = p[order], g[order]
    dcg = 0.0
    start = 0
    while start < t.size:
        stop = start + 1
        while stop < t.size and ps[stop] == ps[start]:
            stop += 1
        dcg += gs[start:stop].mean() * discount[start:stop].sum()
        start = stop
    return dcg / ideal if ideal > 0 else 1.0


def weighted_tau(true, pred) -> float:
    """Weighted Kendall tau (hyperbolic weights on the TRUE rank); 1 = same order, -1 = reversed."""
    t, p = _pair(true, pred)
    if np.ptp(p) == 0 or np.ptp(t) == 0:
        return 0.0  # a constant ranking carries no order information
    return float(weightedtau(t, p, rank=None).statistic)


def hit_at_1(true, pred) -> float:
    """1 when the top-ranked candidate is a true best (fractional over ties in ``pred``)."""
    t, p = _pair(true, pred)
    top = p == p.max()
    return float(np.mean(t[top] == t.max()))


def regret_at_1(true, pred) -> float:
    """Normalised gain lost by the top pick: 1 - gain(top), gains min-max normalised (mean over top ties)."""
    t, p = _pair(true, pred)
    g = normalised_gain(t)
    return float(1.0 - g[p == p.max()].mean())


def ranking_report(true, pred, k: int = 3) -> dict[str, float]:
    """All four metrics of one group."""
    return {
        f"ndcg@{k}": ndcg_at_k(true, pred, k),
        "tau_w": weighted_tau(true, pred),
        "hit@1": hit_at_1(true, pred),
        "regret@1": regret_at_1(true, pred),
    }
