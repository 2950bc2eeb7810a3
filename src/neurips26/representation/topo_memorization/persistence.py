"""Persistent-homology summaries of a representation point cloud, and the baseline statistics they are
compared with.

Paper (descriptive title; no arXiv id found): "Topology of noisy-label memorization: H1 persistent homology of
penultimate representations" (NeurIPS 2026, abstract 11 of seed 000_35944da5716e589d).

The signal (digest, method steps 3-4): take the penultimate features ``F`` (n x d) of a fixed probe set,
L2-normalise each row, build the Vietoris-Rips filtration of the Euclidean point cloud and compute its
persistence diagrams up to H1 with ripser. For the diagram ``D_k = {(b_i, d_i)}`` of dimension k

    total persistence  P_k = sum_i (d_i - b_i),      count  N_k = |D_k|,      max  M_k = max_i (d_i - b_i),   (1)

over the finite bars (H0's one infinite bar is dropped). ``P_1`` is the paper's H1 signal; ``P_0`` is the
contrast. Since the H0 deaths of a Rips filtration are the edge lengths of a Euclidean minimum spanning tree,
``P_0`` equals the MST's total length (tested).

Baseline statistics (digest, method step 6): activation variance (mean per-unit variance over the probe set),
TwoNN intrinsic dimension (Facco et al. 2017, the slope of ``-log(1 - F(mu))`` against ``log mu``),
and a partial correlation that controls for a covariate.

Reconstructed [R]: the global-cloud protocol (200 probe points, L2-normalised features) is the digest's
pre-registered choice, not the paper's text; the per-class variant (median-distance normalised clouds per
class) is the robustness check the digest names.
"""

from __future__ import annotations

import numbers

import numpy as np
from ripser import ripser
from scipy.spatial.distance import cdist, pdist, squareform
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.validation import check_array

NORMALIZATIONS = ("l2", "median", "none")


def _check_cloud(X, name: str = "X", min_points: int = 2) -> np.ndarray:
    if np.asarray(X).size == 0:
        raise ValueError(f"{name} is empty; it needs at least {min_points} points")
    X = check_array(X, dtype=np.float64, ensure_all_finite=True, input_name=name, ensure_min_samples=1)
    if X.shape[0] < min_points:
        raise ValueError(f"{name} needs at least {min_points} points, got {X.shape[0]}")
    return X


def normalize_cloud(X, normalize: str = "l2") -> np.ndarray:
    """Scale a point cloud before persistence: ``"l2"`` puts every row on the unit sphere (zero rows stay 0),
    ``"median"`` divides by the median pairwise distance, ``"none"`` leaves it as is."""
    X = _check_cloud(X)
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")
    if normalize == "l2":
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        return X / np.where(norms > 0, norms, 1.0)
    if normalize == "median":
        med = float(np.median(pdist(X)))
        return X / med if med > 0 else X.copy()
    return X.copy()


def _check_ripser_options(thresh, n_perm, coeff, n_points: int) -> None:
    if not isinstance(thresh, numbers.Real) or isinstance(thresh, bool) or np.isnan(thresh) or thresh <= 0:
        raise ValueError(f"thresh must be a positive float (np.inf for the full filtration), got {thresh!r}")
    if n_perm is not None and (
        isinstance(n_perm, bool) or not isinstance(n_perm, numbers.Integral) or not 2 <= n_perm <= n_points
    ):
        raise ValueError(f"n_perm must be None or an integer in [2, n_points = {n_points}], got {n_perm!r}")
    if isinstance(coeff, bool) or not isinstance(coeff, numbers.Integral) or coeff < 2:
        raise ValueError(f"coeff must be a prime integer >= 2, got {coeff!r}")
    if any(coeff % p == 0 for p in range(2, int(coeff**0.5) + 1)):
        raise ValueError(f"coeff must be a prime integer >= 2, got {coeff!r}")


def persistence_diagrams(
    X,
    maxdim: int = 1,
    normalize: str = "l2",
    *,
    thresh: float = np.inf,
    n_perm: int | None = None,
    coeff: int = 2,
) -> list[np.ndarray]:
    """Vietoris-Rips persistence diagrams ``[D_0, ..., D_maxdim]`` of the rows of ``X`` (ripser).

    Each diagram is an ``(m, 2)`` array of (birth, death); H0 keeps its infinite bar (death = inf). ripser's
    options pass through: ``thresh`` stops the filtration at that distance (bars alive there get death = inf,
    and the summaries of equation (1) drop them), ``n_perm`` computes on a greedy (furthest-point) subsample of
    that many points (faster; ripser bounds the error by the covering radius), ``coeff`` is the prime field.

    Cost: without ``n_perm`` the dense n x n distance matrix is built (``8 n^2`` bytes: 80 MB at n = 3000).
    With ``n_perm = k < n`` only ``O(n + k^2)`` memory is used: the furthest-point sample is chosen one
    distance row at a time (``O(k n d)`` time) and ripser sees the k x k matrix of the sample, the same
    sample and diagrams as ripser's own ``n_perm`` on the full matrix (tested).
    """
    if not isinstance(maxdim, numbers.Integral) or not 0 <= maxdim <= 2:
        raise ValueError(f"maxdim must be an integer in [0, 2], got {maxdim!r}")
    Xn = normalize_cloud(X, normalize)
    _check_ripser_options(thresh, n_perm, coeff, Xn.shape[0])
    if n_perm is not None and n_perm < Xn.shape[0]:
        Xn = Xn[_furthest_point_sample(Xn, int(n_perm))]
    D = squareform(pdist(Xn))
    out = ripser(D, maxdim=int(maxdim), distance_matrix=True, thresh=float(thresh), coeff=int(coeff))
    return [np.asarray(d, dtype=float) for d in out["dgms"]]


def _furthest_point_sample(X, n_perm: int) -> np.ndarray:
    """Indices of the greedy furthest-point sample of ``n_perm`` rows of ``X`` (Euclidean), starting at row 0.

    Each step adds the row furthest from those chosen (first index on ties): ripser's ``n_perm`` rule, with
    one distance row in memory at a time instead of the ``n_perm x n`` block ripser keeps.
    """
    X = _check_cloud(X)
    n = X.shape[0]
    if isinstance(n_perm, bool) or not isinstance(n_perm, numbers.Integral) or not 1 <= n_perm <= n:
        raise ValueError(f"n_perm must be an integer in [1, n_points = {n}], got {n_perm!r}")
    idx = np.zeros(int(n_perm), dtype=np.int64)
    dist_to_sample = cdist(X[:1], X)[0]
    dist_to_sample[0] = 0.0
    for i in range(1, int(n_perm)):
        idx[i] = int(np.argmax(dist_to_sample))
        row = cdist(X[idx[i] : idx[i] + 1], X)[0]
        row[idx[i]] = 0.0
        np.minimum(dist_to_sample, row, out=dist_to_sample)
    return idx


def diagram_summary(diagram) -> dict[str, float]:
    """Equation (1) for one diagram: total persistence, number of bars and the longest bar (finite bars)."""
    dgm = np.asarray(diagram, dtype=float)
    if dgm.ndim != 2 or (dgm.size and dgm.shape[1] != 2):
        raise ValueError(f"diagram must have shape (m, 2), got {dgm.shape}")
    if dgm.size == 0:
        return {"total": 0.0, "count": 0.0, "max": 0.0}
    if np.isnan(dgm).any():
        raise ValueError("diagram must not contain NaN")
    life = dgm[:, 1] - dgm[:, 0]
    life = life[np.isfinite(life)]
    if (life < 0).any():
        raise ValueError("diagram has a bar with death < birth")
    return {
        "total": float(life.sum()),
        "count": float(life.size),
        "max": float(life.max()) if life.size else 0.0,
    }


def topological_summary(X, maxdim: int = 1, normalize: str = "l2", **ripser_options) -> dict[str, float]:
    """The paper's signal and its H0 contrast for one point cloud.

    Returns ``{"h0_total", "h0_count", "h0_max", "h1_total", "h1_count", "h1_max", ...}`` (up to ``maxdim``),
    equation (1) per homology dimension. ``ripser_options`` (``thresh``, ``n_perm``, ``coeff``) pass through to
    :func:`persistence_diagrams`.
    """
    out: dict[str, float] = {}
    for k, dgm in enumerate(persistence_diagrams(X, maxdim=maxdim, normalize=normalize, **ripser_options)):
        for key, value in diagram_summary(dgm).items():
            out[f"h{k}_{key}"] = value
    return out


def h1_total_persistence(X, normalize: str = "l2", **ripser_options) -> float:
    """Total H1 persistence ``P_1`` of the Rips filtration of ``X`` (the paper's signal)."""
    return topological_summary(X, maxdim=1, normalize=normalize, **ripser_options)["h1_total"]


def per_class_h1(X, labels, normalize: str = "median", min_points: int = 5) -> float:
    """Robustness variant: mean over classes of the H1 total persistence of each class's own cloud
    (median-distance normalised by default, as in the digest's first prototype protocol)."""
    X = _check_cloud(X)
    labels = np.asarray(labels)
    if labels.shape != (X.shape[0],):
        raise ValueError(f"labels must have shape ({X.shape[0]},), got {labels.shape}")
    if not isinstance(min_points, numbers.Integral) or min_points < 3:
        raise ValueError(f"min_points must be an integer >= 3, got {min_points!r}")
    values = [
        h1_total_persistence(X[labels == c], normalize=normalize)
        for c in np.unique(labels)
        if (labels == c).sum() >= min_points
    ]
    if not values:
        raise ValueError(f"no class has at least min_points = {min_points} points")
    return float(np.mean(values))


def activation_variance(X) -> float:
    """Mean over units of the variance of the activations across the probe set (raw features)."""
    X = _check_cloud(X)
    return float(X.var(axis=0).mean())


def twonn_dimension(X, discard_fraction: float = 0.1) -> float:
    """TwoNN intrinsic dimension (Facco, d'Errico, Rodriguez and Laio, Sci. Rep. 2017).

    With ``mu_i = r2_i / r1_i`` the ratio of the distances to the second and first nearest neighbours,
    ``mu`` is Pareto(d) distributed, ``-log(1 - F(mu)) = d log mu``; ``d`` is the slope through the origin of
    that line fitted to the empirical CDF after discarding the ``discard_fraction`` largest ratios (Facco et
    al.'s estimator). Duplicate points are dropped.
    """
    X = _check_cloud(X, min_points=3)
    if not isinstance(discard_fraction, numbers.Real) or not 0.0 <= discard_fraction < 1.0:
        raise ValueError(f"discard_fraction must be in [0, 1), got {discard_fraction!r}")
    X = np.unique(X, axis=0)
    if X.shape[0] < 3:
        raise ValueError("X needs at least 3 distinct points")
    dist, _ = NearestNeighbors(n_neighbors=3).fit(X).kneighbors(X)
    mu = np.sort(dist[:, 2] / dist[:, 1])
    n = mu.size
    keep = max(2, int(np.floor(n * (1.0 - discard_fraction))))
    keep = min(keep, n - 1)  # F = 1 at the last point would give log(0)
    x = np.log(mu[:keep])
    y = -np.log(1.0 - np.arange(1, keep + 1) / n)
    sxx = float(x @ x)
    return float(x @ y / sxx) if sxx > 0 else float("inf")


def partial_correlation(x, y, covariate) -> float:
    """Pearson correlation of ``x`` and ``y`` after regressing both on ``covariate`` (with an intercept)."""
    x, y, z = (np.asarray(v, dtype=float).ravel() for v in (x, y, covariate))
    if not (x.shape == y.shape == z.shape):
        raise ValueError(f"x, y and covariate must have equal length, got {x.size}, {y.size}, {z.size}")
    if x.size < 4:
        raise ValueError(f"x needs at least 4 observations, got {x.size}")
    if not (np.isfinite(x).all() and np.isfinite(y).all() and np.isfinite(z).all()):
        raise ValueError("x, y and covariate must be finite")
    A = np.column_stack([np.ones_like(z), z])
    rx = x - A @ np.linalg.lstsq(A, x, rcond=None)[0]
    ry = y - A @ np.linalg.lstsq(A, y, rcond=None)[0]
    denom = np.sqrt((rx @ rx) * (ry @ ry))
    return float(rx @ ry / denom) if denom > 0 else float("nan")


def cohens_d(a, b) -> float:
    """Effect size of ``mean(a) - mean(b)`` in pooled standard deviations (reported, not gated)."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.size < 1 or b.size < 1:
        raise ValueError("a and b must be non-empty")
    dof = a.size + b.size - 2
    pooled = (
        np.sqrt(
            (
                (a.size - 1) * a.var(ddof=1 if a.size > 1 else 0)
                + (b.size - 1) * b.var(ddof=1 if b.size > 1 else 0)
            )
            / dof
        )
        if dof > 0
        else 0.0
    )
    diff = a.mean() - b.mean()
    if pooled == 0:
        return float(np.sign(diff) * np.inf) if diff != 0 else 0.0
    return float(diff / pooled)
