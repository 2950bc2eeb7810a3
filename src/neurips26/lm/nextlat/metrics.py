"""Representation metrics of NextLat's experiment: effective rank and linear-probe accuracy."""

from __future__ import annotations

import numpy as np

__all__ = ["effective_rank", "linear_probe_accuracy"]


def effective_rank(H: np.ndarray, center: bool = True) -> float:
    """``exp(entropy(s / sum(s)))`` of the singular values ``s`` of ``H`` (n, d), after centring the rows
    (Roy & Vetterli 2007). Between 1 (rank one) and min(n, d) (a flat spectrum)."""
    H = np.asarray(H, dtype=np.float64)
    if H.ndim != 2 or min(H.shape) < 1:
        raise ValueError(f"H must be a non-empty 2-D array (n, d), got shape {H.shape}")
    if not np.all(np.isfinite(H)):
        raise ValueError("H must be finite")
    if center:
        H = H - H.mean(axis=0, keepdims=True)
    s = np.linalg.svd(H, compute_uv=False)
    total = s.sum()
    if total <= 0:
        raise ValueError("H has no variance (all singular values are zero)")
    p = s[s > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))


def linear_probe_accuracy(
    train_X: np.ndarray,
    train_y: np.ndarray,
    test_X: np.ndarray,
    test_y: np.ndarray,
    C: float = 1.0,
    max_iter: int = 300,
) -> float:
    """Held-out accuracy of a multinomial logistic regression (lbfgs, ``max_iter`` iterations) on standardised
    features."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if isinstance(C, bool) or not isinstance(C, (int, float)) or not (C > 0 and np.isfinite(C)):
        raise ValueError(f"C must be a positive number, got {C!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    train_X, test_X = np.asarray(train_X), np.asarray(test_X)
    if train_X.ndim != 2 or test_X.ndim != 2 or train_X.shape[1] != test_X.shape[1]:
        raise ValueError(
            f"train_X and test_X must be 2-D with the same columns, got {train_X.shape}, {test_X.shape}"
        )
    if len(train_X) != len(train_y) or len(test_X) != len(test_y):
        raise ValueError("each X must have one label per row")
    if len(np.unique(np.asarray(train_y))) < 2:
        raise ValueError("train_y must hold at least two classes")
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter))
    with warnings.catch_warnings():  # an unconverged probe is still a (slightly pessimistic) linear probe
        warnings.simplefilter("ignore", ConvergenceWarning)
        probe.fit(train_X, np.asarray(train_y))
    return float(probe.score(test_X, np.asarray(test_y)))
