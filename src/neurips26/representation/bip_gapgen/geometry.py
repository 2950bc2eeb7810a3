"""Gallery geometry for biometric identity provisioning: impostor thresholds, the real subspace, exact
collision counts and the realisability proxy (BIP / GapGen, arXiv 2605.18238).

Everything here works on unit vectors (rows) of a recognizer's embedding sphere. Two identities *collide* at
threshold ``tau`` when their cosine is ``>= tau``. The collision counts are exact in float64: the bulk is a
blocked float32 matrix product (optionally in the coordinates of an orthonormal basis, with a rigorous bound on
what the basis leaves out), and every pair whose float32 value lies within the rounding band of ``tau`` is
recomputed in float64 in the full space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# float32 rounding of a dot product of two unit vectors of dimension <= 4096 stays far below this band
_F32_BAND = 1e-4
_UNIT_TOL = 1e-4


def check_unit_rows(X: object, name: str, *, allow_empty: bool = False) -> np.ndarray:
    """``X`` as a float64 2-D array of finite unit rows, or a ``ValueError`` naming ``name``."""
    if isinstance(X, (str, bytes)) or X is None:
        raise TypeError(f"{name} must be a 2-D array of unit vectors, got {type(X).__name__}")
    try:
        A = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric 2-D array of unit vectors") from exc
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n, d), got shape {A.shape}")
    if A.shape[1] < 2:
        raise ValueError(f"{name} must have at least 2 columns (embedding dimension), got {A.shape[1]}")
    if A.shape[0] == 0 and not allow_empty:
        raise ValueError(f"{name} must have at least one row")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or inf")
    norms = np.linalg.norm(A, axis=1)
    if A.shape[0] and np.max(np.abs(norms - 1.0)) > _UNIT_TOL:
        raise ValueError(
            f"{name} rows must be unit vectors (|norm - 1| <= {_UNIT_TOL}); max deviation "
            f"{np.max(np.abs(norms - 1.0)):.3g}; normalise them first"
        )
    return A


def _check_far(far: float) -> float:
    if not isinstance(far, (int, float, np.floating)) or not (0.0 < float(far) < 1.0):
        raise ValueError(f"far must be a float in (0, 1), got {far!r}")
    return float(far)


def impostor_threshold(
    gallery: object, far: float = 1e-4, *, block: int = 4096, random_state: int = 0
) -> float:
    """Cosine threshold at false-accept rate ``far``: the ``(1 - far)`` quantile of the cosine between distinct
    gallery identities (all ``n (n - 1) / 2`` pairs, linear interpolation as ``numpy.quantile``).

    Exact and memory-light: a pair sample gives a safe lower bound, then one blocked pass keeps only the pairs
    above it (the digest's "thresholds from the gallery's impostor distribution").
    """
    R = check_unit_rows(gallery, "gallery")
    far = _check_far(far)
    n = R.shape[0]
    if n < 2:
        raise ValueError(f"gallery must have at least 2 rows to define impostor pairs, got {n}")
    n_pairs = n * (n - 1) // 2
    pos = (n_pairs - 1) * far  # distance of the quantile from the top, in sorted-descending order
    k_needed = int(math.floor(pos)) + 2
    rng = np.random.default_rng(random_state)
    R32 = R.astype(np.float32)
    lower = -np.inf
    if n_pairs > 200_000:
        m = 1_000_000
        i = rng.integers(0, n, m)
        j = rng.integers(0, n, m)
        keep = i != j
        s = np.einsum("ij,ij->i", R32[i[keep]], R32[j[keep]])
        lower = float(np.quantile(s, max(0.0, 1.0 - 8.0 * far - 5e-4))) - 1e-3
    while True:
        vals = []
        for a in range(0, n, block):
            G = R32[a : a + block] @ R32[a:].T
            i, j = np.nonzero(G > lower)
            upper = j > i  # distinct pairs once (column j is row a + j)
            vals.append(G[i[upper], j[upper]])
        top = np.concatenate(vals) if vals else np.empty(0, np.float32)
        if top.size >= k_needed or not np.isfinite(lower):
            break
        lower = -np.inf  # the sampled bound was too high: take every pair (rare, small galleries only)
    top = np.sort(top.astype(np.float64))[::-1]
    lo = int(math.floor(pos))
    frac = pos - lo
    hi_val = top[lo]
    lo_val = top[min(lo + 1, top.size - 1)]
    return float(hi_val + frac * (lo_val - hi_val))


@dataclass(frozen=True)
class RealSubspace:
    """Top-``q`` directions of the gallery's second-moment matrix (uncentred PCA on the sphere).

    Attributes: ``basis`` (d, q) orthonormal columns P; ``explained`` fraction of the gallery's energy kept;
    ``effective_rank`` participation ratio ``(sum l)^2 / sum l^2`` of the full spectrum.
    """

    basis: np.ndarray
    explained: float
    effective_rank: float

    @property
    def dim(self) -> int:
        return int(self.basis.shape[1])


def real_subspace(gallery: object, variance_kept: float = 0.97) -> RealSubspace:
    """The smallest top-``q`` subspace holding ``variance_kept`` of the gallery's energy ``sum ||r||^2``."""
    R = check_unit_rows(gallery, "gallery")
    if not (0.0 < float(variance_kept) <= 1.0):
        raise ValueError(f"variance_kept must be in (0, 1], got {variance_kept!r}")
    _, s, Vt = np.linalg.svd(R, full_matrices=False)
    lam = s**2
    cum = np.cumsum(lam) / lam.sum()
    q = int(np.searchsorted(cum, float(variance_kept) - 1e-12) + 1)
    q = min(max(q, 2), Vt.shape[0])
    eff = float(lam.sum() ** 2 / np.sum(lam**2))
    return RealSubspace(basis=Vt[:q].T.copy(), explained=float(cum[q - 1]), effective_rank=eff)


def realisability(X: object, basis: np.ndarray) -> np.ndarray:
    """Per-row in-subspace energy ``||P P^T x||^2 = ||P^T x||^2`` (the digest's realisability proxy)."""
    A = check_unit_rows(X, "X")
    P = np.asarray(basis, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != A.shape[1]:
        raise ValueError(f"basis must have shape (d, q) with d = {A.shape[1]}, got {P.shape}")
    return np.sum((A @ P) ** 2, axis=1)


def count_collisions(
    X: object,
    Y: object | None = None,
    threshold: float = 0.5,
    *,
    basis: np.ndarray | None = None,
    block: int = 1024,
) -> int:
    """Exact number of pairs with cosine ``>= threshold``: rows of ``X`` against rows of ``Y``, or, when ``Y``
    is None, distinct unordered pairs within ``X``.

    With an orthonormal ``basis`` P (d, q) the bulk runs in q dimensions: ``x.y = (P^T x).(P^T y) + x_perp.y_perp``
    and ``|x_perp.y_perp| <= ||x_perp|| ||y_perp||``, so only pairs within that bound (plus float32 rounding) of
    the threshold are recomputed in float64 in the full space. The count is exact either way.
    """
    A = check_unit_rows(X, "X", allow_empty=True)
    B = A if Y is None else check_unit_rows(Y, "Y", allow_empty=True)
    if B.shape[1] != A.shape[1]:
        raise ValueError(f"Y must have the same number of columns as X ({A.shape[1]}), got {B.shape[1]}")
    if not (-1.0 <= float(threshold) <= 1.0):
        raise ValueError(f"threshold must be a cosine in [-1, 1], got {threshold!r}")
    if block < 1:
        raise ValueError(f"block must be a positive integer, got {block!r}")
    if A.shape[0] == 0 or B.shape[0] == 0:
        return 0
    t = float(threshold)
    if basis is not None:
        P = np.asarray(basis, dtype=np.float64)
        if P.ndim != 2 or P.shape[0] != A.shape[1]:
            raise ValueError(f"basis must have shape (d, q) with d = {A.shape[1]}, got {P.shape}")
        if not np.allclose(P.T @ P, np.eye(P.shape[1]), atol=1e-8):
            raise ValueError("basis must have orthonormal columns")
        ca, cb = A @ P, B @ P
        ra = np.linalg.norm(A - ca @ P.T, axis=1)  # ||x_perp||
        rb = ra if Y is None else np.linalg.norm(B - cb @ P.T, axis=1)
    else:
        ca, cb = A, B
        ra = np.zeros(A.shape[0])
        rb = np.zeros(B.shape[0])
    ca32, cb32 = ca.astype(np.float32), cb.astype(np.float32)
    rb_max = float(rb.max())
    total = 0
    for a in range(0, A.shape[0], block):
        b0 = a if Y is None else 0
        G = ca32[a : a + block] @ cb32[b0:].T
        slack = ra[a : a + block, None] * rb_max + _F32_BAND
        ii, jj = np.nonzero(G >= t - slack)  # everything that might collide
        if Y is None:  # distinct pairs once (column j is row a + j)
            upper = jj > ii
            ii, jj = ii[upper], jj[upper]
        if ii.size:
            g = G[ii, jj]
            sure = g >= t + slack[ii, 0]
            total += int(np.count_nonzero(sure))
            ii, jj = ii[~sure], jj[~sure]
            exact = np.einsum("ij,ij->i", A[a + ii], B[b0 + jj])
            total += int(np.count_nonzero(exact >= t))
    return total
