r"""Baseline network / graphon estimators named by the srGW paper's digest (arXiv 2606.02223).

* :func:`spectral_sbm_estimate`: spectral clustering (scikit-learn ``SpectralClustering`` on the adjacency as
  a precomputed affinity) followed by block averaging :math:`\hat\Theta_{ik} = \bar A_{z_i z_k}`.
* :func:`usvt_estimate`: universal singular value thresholding (Chatterjee 2015, Ann. Statist.): map the
  entries to [-1, 1], keep the singular values at least :math:`(2 + \eta)\sqrt{n}` (all entries observed),
  map back and clip to [0, 1].
* :func:`sas_estimate`: sort-and-smooth (Chan and Airoldi 2014, ICML): sort the nodes by degree, average
  ``A`` over :math:`h \times h` blocks of the sorted order (a histogram), denoise the histogram by
  total-variation (ROF) minimisation solved with Chambolle's projection algorithm, read the node-level
  estimate back in the original order.

Choices that the original papers leave open and we fixed [R]: the SAS block size defaults to
``h = max(2, round(log n))`` and the TV weight to 0.05 (histogram values are edge densities in [0, 1]).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.cluster import SpectralClustering
from sklearn.utils import check_random_state

from .srgw import check_adjacency

__all__ = ["spectral_sbm_estimate", "usvt_estimate", "sas_estimate", "block_average", "tv_denoise"]


def _dense(A: Any) -> np.ndarray:
    A = check_adjacency(A)
    return A.toarray() if hasattr(A, "toarray") else A


def block_average(A: np.ndarray, labels: np.ndarray) -> np.ndarray:
    r"""Block means :math:`\bar A_{jl} = \sum_{z_i = j, z_k = l} A_{ik} / (n_j n_l)` over all pairs
    (as the srGW C-step on a hard map); returns the (K, K) matrix for labels ``0..K-1``."""
    labels = np.asarray(labels)
    K = int(labels.max()) + 1
    Z = np.zeros((A.shape[0], K))
    Z[np.arange(A.shape[0]), labels] = 1.0
    counts = Z.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        B = (Z.T @ A @ Z) / np.outer(counts, counts)
    return np.nan_to_num(B)


def spectral_sbm_estimate(A: Any, n_blocks: int, random_state: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Spectral clustering (adjacency as precomputed affinity) + block averaging.

    Returns ``(Theta_hat (n, n), labels (n,))``.
    """
    A = _dense(A)
    n = A.shape[0]
    if not isinstance(n_blocks, numbers.Integral) or not 1 <= n_blocks <= n:
        raise ValueError(f"n_blocks must be an integer in [1, n = {n}], got {n_blocks!r}")
    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    if n_blocks == 1:
        labels = np.zeros(n, dtype=int)
    else:
        labels = SpectralClustering(
            n_clusters=int(n_blocks), affinity="precomputed", random_state=seed, n_init=10
        ).fit_predict(A + 1e-12)  # tiny offset keeps isolated nodes connected for the Laplacian
    _, labels = np.unique(labels, return_inverse=True)
    B = block_average(A, labels)
    return B[np.ix_(labels, labels)], labels


def usvt_estimate(A: Any, eta: float = 0.01) -> np.ndarray:
    r"""Universal singular value thresholding (Chatterjee 2015) for a fully observed [0, 1] matrix.

    :math:`M = 2A - 1 \in [-1, 1]`; keep the singular values :math:`\ge (2 + \eta)\sqrt{n}`; the estimate is
    :math:`(\hat M + 1) / 2` clipped to [0, 1].
    """
    A = _dense(A)
    if not isinstance(eta, numbers.Real) or not 0 < eta < 1:
        raise ValueError(f"eta must be a float in (0, 1), got {eta!r}")
    n = A.shape[0]
    M = 2.0 * A - 1.0
    thr = (2.0 + eta) * np.sqrt(n)
    w, U = _eigs_beyond(M, thr)  # symmetric: the singular values are the |eigenvalues|
    M_hat = (U * w) @ U.T
    return np.clip(0.5 * (M_hat + 1.0), 0.0, 1.0)


def _eigs_beyond(M: np.ndarray, thr: float) -> tuple[np.ndarray, np.ndarray]:
    """Every eigenpair of the symmetric ``M`` with |eigenvalue| >= ``thr``.

    Few eigenvalues survive the USVT threshold, so each end of the spectrum is read with Lanczos (``eigsh``,
    largest and smallest algebraic), doubling k until the last eigenvalue found lies inside (-thr, thr):
    O(n^2 k) instead of a dense O(n^3) eigendecomposition, which is the fallback when k would reach n / 4.
    """
    from scipy.sparse.linalg import eigsh

    n = M.shape[0]
    v0 = np.random.default_rng(0).uniform(0.5, 1.5, size=n)  # fixed start: the result is deterministic
    ws, Us = [], []
    for which, sign in (("LA", 1.0), ("SA", -1.0)):
        k = 4
        while True:
            if 4 * k >= n:
                w, U = np.linalg.eigh(M)
                keep = np.abs(w) >= thr
                return w[keep], U[:, keep]
            w, U = eigsh(M, k=k, which=which, v0=v0, ncv=min(n, max(2 * k + 1, 24)), tol=1e-12)
            if np.min(sign * w) < thr:  # the spectrum's edge on this side is fully inside the result
                keep = sign * w >= thr
                ws.append(w[keep])
                Us.append(U[:, keep])
                break
            k *= 2
    return np.concatenate(ws), np.concatenate(Us, axis=1)


def tv_denoise(f: np.ndarray, weight: float, n_iter: int = 200, step: float = 0.125) -> np.ndarray:
    r"""Isotropic TV (ROF) denoising :math:`\min_u \frac12\|u - f\|^2 + w\,TV(u)` by Chambolle's (2004)
    dual projection algorithm (vectorised, Neumann boundary)."""
    f = np.asarray(f, dtype=np.float64)
    if weight <= 0:
        return f.copy()
    px = np.zeros_like(f)
    py = np.zeros_like(f)

    def div(px: np.ndarray, py: np.ndarray) -> np.ndarray:
        dx = np.zeros_like(px)
        dx[0] = px[0]
        dx[1:-1] = px[1:-1] - px[:-2]
        dx[-1] = -px[-2]
        dy = np.zeros_like(py)
        dy[:, 0] = py[:, 0]
        dy[:, 1:-1] = py[:, 1:-1] - py[:, :-2]
        dy[:, -1] = -py[:, -2]
        return dx + dy

    for _ in range(n_iter):
        g = div(px, py) - f / weight
        gx = np.zeros_like(g)
        gy = np.zeros_like(g)
        gx[:-1] = g[1:] - g[:-1]
        gy[:, :-1] = g[:, 1:] - g[:, :-1]
        norm = 1.0 + step * np.sqrt(gx * gx + gy * gy)
        px = (px + step * gx) / norm
        py = (py + step * gy) / norm
    return f - weight * div(px, py)


def sas_estimate(A: Any, h: int | None = None, tv_weight: float = 0.05) -> np.ndarray:
    """Sort-and-smooth (Chan and Airoldi 2014): degree sort, h x h histogram, TV denoising.

    Returns the node-level estimate ``Theta_hat`` (n, n) in the original node order.
    """
    A = _dense(A)
    n = A.shape[0]
    if h is None:
        h = max(2, int(round(np.log(n))))
    if not isinstance(h, numbers.Integral) or not 1 <= h <= n:
        raise ValueError(f"h must be an integer in [1, n = {n}], got {h!r}")
    if not isinstance(tv_weight, numbers.Real) or not np.isfinite(tv_weight) or tv_weight < 0:
        raise ValueError(f"tv_weight must be a finite float >= 0, got {tv_weight!r}")
    degree = A.sum(axis=1)
    order = np.argsort(degree, kind="stable")
    # block of each sorted position; the last block absorbs the remainder
    n_bins = max(1, n // h)
    bins = np.minimum(np.arange(n) // h, n_bins - 1)
    labels = np.empty(n, dtype=int)
    labels[order] = bins
    H = block_average(A, labels)
    H = np.clip(tv_denoise(H, tv_weight), 0.0, 1.0)
    return H[np.ix_(labels, labels)]
