r"""Semi-relaxed Gromov-Wasserstein (srGW) solvers for one graph against a K-block structure.

Network Learning with Semi-relaxed Gromov-Wasserstein (Dufour, Naepels, Santoro; arXiv 2606.02223).

With node weights :math:`p` (uniform, :math:`p_i = 1/n`), a coupling
:math:`T \in \mathbb{R}_+^{n\times K}` with :math:`T 1_K = p` (the columns are free: the *semi-relaxed*
constraint) and a symmetric block matrix :math:`C`, the square-loss srGW objective is

.. math::

    L(T, C) = \sum_{i,j,k,l} (A_{ik} - C_{jl})^2 T_{ij} T_{kl}
            = \langle A\odot A, p p^\top\rangle + \langle C\odot C, q q^\top\rangle
              - 2\langle A T C, T\rangle,
    \qquad q = T^\top 1_n .

The estimator minimises it by block-coordinate descent (the srGW barycenter of a single graph):

* C-step, closed form for the square loss: :math:`C_{jl} = (T^\top A T)_{jl} / (q_j q_l)`, empty blocks
  dropped (:func:`update_block_matrix`);
* T-step, Frank-Wolfe on the semi-relaxed polytope with :math:`C` fixed (:func:`srgw_conditional_gradient`):
  gradient :math:`\nabla_T L = 2\,1_n ((C\odot C) q)^\top - 4 A T C`, a row-wise argmin linear minimisation
  oracle (a deterministic vertex :math:`p_i e_{z_i}`), and an exact line search on the quadratic
  :math:`L(T + \alpha D)`.

Implementation notes. The oracle's vertex is a hard assignment, so :math:`A\,T_{\text{vertex}}` is a column
aggregation of :math:`A` (cost :math:`O(\mathrm{nnz}(A))` instead of :math:`O(n^2 K)`); :math:`A T` is then
updated incrementally, so one Frank-Wolfe step costs :math:`O(\mathrm{nnz}(A) + n K^2)`. Everything is float64
on the CPU (the expanded loss cancels; the authors saw negative losses in TF32). ``A`` may be a dense array or
a ``scipy.sparse`` matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = [
    "check_adjacency",
    "srgw_loss",
    "update_block_matrix",
    "srgw_conditional_gradient",
    "round_coupling",
]

_SYM_TOL = 1e-10


def check_adjacency(A: Any, name: str = "A") -> np.ndarray | sp.csr_matrix:
    """Validate a weighted undirected adjacency matrix: square, symmetric, finite, entries in [0, 1].

    Returns a float64 ``ndarray`` (or a CSR matrix when ``A`` is sparse). Raises ``ValueError`` naming
    ``name``.
    """
    if sp.issparse(A):
        A = sp.csr_matrix(A, dtype=np.float64)
        # networkx / scipy sparse arrays carry int64 indices, which scikit-learn's KMeans (the default start)
        # rejects; 32-bit indices hold any graph with fewer than 2^31 stored entries
        if A.nnz < np.iinfo(np.int32).max and A.indices.dtype != np.int32:
            A = sp.csr_matrix((A.data, A.indices.astype(np.int32), A.indptr.astype(np.int32)), shape=A.shape)
        data = A.data
    else:
        try:
            A = np.asarray(A, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be a numeric square matrix: {err}") from None
        data = A
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) matrix, got shape {A.shape}")
    if A.shape[0] < 2:
        raise ValueError(f"{name} must have at least 2 nodes, got n = {A.shape[0]}")
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{name} contains NaN or inf; entries must be finite and in [0, 1]")
    if data.size and (data.min() < 0.0 or data.max() > 1.0):
        raise ValueError(f"{name} entries must lie in [0, 1], got range [{data.min():.4g}, {data.max():.4g}]")
    asym = abs(A - A.T).max() if sp.issparse(A) else np.max(np.abs(A - A.T))
    if asym > _SYM_TOL:
        raise ValueError(f"{name} must be symmetric (undirected graph); max |A - A^T| = {asym:.3g}")
    return A


def _check_weights(p: Any, n: int) -> np.ndarray:
    if p is None:
        return np.full(n, 1.0 / n)
    p = np.asarray(p, dtype=np.float64)
    if p.shape != (n,) or not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise ValueError(f"p must be a positive finite vector of shape ({n},)")
    if abs(p.sum() - 1.0) > 1e-8:
        raise ValueError(f"p must sum to 1, got {p.sum():.6g}")
    return p


def _check_block_matrix(C: Any, name: str = "C") -> np.ndarray:
    C = np.asarray(C, dtype=np.float64)
    if C.ndim != 2 or C.shape[0] != C.shape[1] or C.shape[0] < 1:
        raise ValueError(f"{name} must be a square (K, K) matrix with K >= 1, got shape {C.shape}")
    if not np.all(np.isfinite(C)):
        raise ValueError(f"{name} must be finite")
    if np.max(np.abs(C - C.T)) > _SYM_TOL:
        raise ValueError(f"{name} must be symmetric")
    return C


def _check_coupling(T: Any, p: np.ndarray, K: int | None = None, name: str = "T0") -> np.ndarray:
    T = np.array(T, dtype=np.float64)
    n = p.shape[0]
    if T.ndim != 2 or T.shape[0] != n or (K is not None and T.shape[1] != K):
        want = f"({n}, {K})" if K is not None else f"({n}, K)"
        raise ValueError(f"{name} must have shape {want}, got {T.shape}")
    if not np.all(np.isfinite(T)) or np.any(T < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    if not np.allclose(T.sum(axis=1), p, atol=1e-8, rtol=0):
        raise ValueError(f"{name} rows must sum to p (T 1_K = p)")
    return T


def _check_plan_shape(T: np.ndarray, n: int, name: str = "T") -> None:
    if T.ndim != 2 or T.shape[0] != n or T.shape[1] < 1:
        raise ValueError(f"{name} must be an (n = {n}, K) coupling with K >= 1, got shape {T.shape}")
    if not np.all(np.isfinite(T)) or np.any(T < 0):
        raise ValueError(f"{name} must be finite and non-negative")


def _quad_a(A: np.ndarray | sp.csr_matrix, p: np.ndarray) -> float:
    """<A*A, p p^T>, the constant part of the loss."""
    A2 = A.multiply(A) if sp.issparse(A) else A * A
    return float(p @ (A2 @ p))


def _matmul(A: np.ndarray | sp.csr_matrix, X: np.ndarray) -> np.ndarray:
    out = A @ X
    return np.asarray(out)


def _vertex_product(A: np.ndarray | sp.csr_matrix, z: np.ndarray, p: np.ndarray, K: int) -> np.ndarray:
    """A @ V for the vertex V = p_i e_{z_i}: column j sums the columns of A of the nodes in block j."""
    n = p.shape[0]
    S = sp.csr_matrix((p, (z, np.arange(n))), shape=(K, n))  # V^T, sparse
    out = S @ A  # (K, n) = V^T A = (A V)^T since A is symmetric
    if sp.issparse(out):
        out = out.toarray()
    return np.asarray(out).T


def _vertex_product_update(
    A: np.ndarray | sp.csr_matrix,
    z: np.ndarray,
    p: np.ndarray,
    K: int,
    z_prev: np.ndarray | None,
    AV_prev: np.ndarray | None,
) -> np.ndarray:
    """A @ V for the vertex of ``z``, updated from the previous vertex's product when few nodes moved.

    Successive Frank-Wolfe vertices differ in a handful of rows; moving node i from block z' to z adds
    p_i A[:, i] to column z and removes it from column z' (cost O(n) per moved node instead of O(nnz(A))).
    """
    if z_prev is None or AV_prev is None:
        return _vertex_product(A, z, p, K)
    moved = np.flatnonzero(z != z_prev)
    if moved.size == 0:
        return AV_prev
    if moved.size * 8 > z.size:
        return _vertex_product(A, z, p, K)
    delta = np.zeros((moved.size, K))
    delta[np.arange(moved.size), z[moved]] = p[moved]
    delta[np.arange(moved.size), z_prev[moved]] -= p[moved]
    cols = A[:, moved]
    cols = cols.toarray() if sp.issparse(cols) else cols
    return AV_prev + cols @ delta


def srgw_loss(A: Any, T: Any, C: Any, p: Any = None) -> float:
    r"""Square-loss srGW objective :math:`L(T, C) = \sum_{ijkl} (A_{ik} - C_{jl})^2 T_{ij} T_{kl}`.

    Computed in the expanded form :math:`\langle A^2, pp^\top\rangle + \langle C^2, qq^\top\rangle
    - 2\langle ATC, T\rangle` with :math:`p = T 1_K` (float64).
    """
    A = check_adjacency(A)
    C = _check_block_matrix(C)
    T = np.asarray(T, dtype=np.float64)
    if T.ndim != 2 or T.shape != (A.shape[0], C.shape[0]):
        raise ValueError(f"T must have shape ({A.shape[0]}, {C.shape[0]}), got {T.shape}")
    if p is None:
        p = T.sum(axis=1)
    else:
        p = _check_weights(p, A.shape[0])
    return _loss(A, T, C, p, _matmul(A, T))


def _loss(
    A, T: np.ndarray, C: np.ndarray, p: np.ndarray, AT: np.ndarray, const: float | None = None
) -> float:
    if const is None:
        const = _quad_a(A, p)
    q = T.sum(axis=0)
    return float(const + q @ (C * C) @ q - 2.0 * np.sum((AT @ C) * T))


def update_block_matrix(
    A: Any, T: Any, *, AT: np.ndarray | None = None, drop_empty: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    r"""C-step: the minimiser of :math:`L(T, \cdot)`: :math:`C = T^\top A T / (q q^\top)`,
    :math:`q = T^\top 1`.

    Columns of ``T`` with zero mass (empty blocks) are dropped first (else the update divides by zero).

    Returns
    -------
    C : (K', K') block matrix, entries in [0, 1] (weighted means of entries of ``A``).
    keep : indices of the kept columns of ``T``.

    ``A`` and ``T`` are validated unless ``AT`` (the product ``A @ T``, from a solver's state) is given.
    """
    T = np.asarray(T, dtype=np.float64)
    if AT is None:
        A = check_adjacency(A)
        _check_plan_shape(T, A.shape[0])
    q = T.sum(axis=0)
    keep = np.flatnonzero(q > 0) if drop_empty else np.arange(T.shape[1])
    if keep.size == 0:
        raise ValueError("T has no mass")
    if AT is None:
        AT = _matmul(A, T[:, keep])
    else:
        AT = AT[:, keep]
    Tk, qk = T[:, keep], q[keep]
    C = (Tk.T @ AT) / np.outer(qk, qk)
    C = np.clip(0.5 * (C + C.T), 0.0, 1.0)  # symmetric by construction; clip float round-off only
    return C, keep


def srgw_conditional_gradient(
    A: Any,
    C: Any,
    T0: Any,
    p: Any = None,
    *,
    max_iter: int = 1000,
    tol: float = 1e-9,
    log: bool = False,
    _validated: bool = False,
    _AT0: np.ndarray | None = None,
    _const: float | None = None,
) -> np.ndarray | tuple[np.ndarray, dict[str, Any]]:
    r"""T-step: Frank-Wolfe for :math:`\min_{T \ge 0,\ T 1_K = p} L(T, C)` with ``C`` fixed, from ``T0``.

    Each step: gradient :math:`G = 2\,1_n ((C\odot C) q)^\top - 4 A T C`; vertex :math:`V_{i\cdot} = p_i
    e_{\arg\min_j G_{ij}}`; direction :math:`D = V - T`; exact step :math:`\alpha^\star = \arg\min_{[0,1]}
    a\alpha^2 + b\alpha` with :math:`a = \langle C^2 \Delta q, \Delta q\rangle - 2\langle A D C, D\rangle`,
    :math:`b = \langle G, D\rangle`. Stops when the Frank-Wolfe gap :math:`-b` is 0, when the relative
    decrease of the loss is at most ``tol``, or after ``max_iter`` steps. The loss never increases.

    This is the problem solved by ``ot.gromov.semirelaxed_gromov_wasserstein(A, C, p, G0=T0)``.

    Returns ``T`` and, if ``log``, a dict with ``loss`` (one value per iterate), ``n_iter``, ``AT`` and ``step``
    (the step size alpha of every Frank-Wolfe step; 1 means the iterate jumped to a vertex).
    """
    if not _validated:
        A = check_adjacency(A)
        C = _check_block_matrix(C)
        p = _check_weights(p, A.shape[0])
        T = _check_coupling(T0, p, C.shape[0])
        if not (isinstance(max_iter, (int, np.integer)) and max_iter >= 0):
            raise ValueError(f"max_iter must be an integer >= 0, got {max_iter!r}")
        if not (np.isfinite(tol) and tol >= 0):
            raise ValueError(f"tol must be a finite float >= 0, got {tol!r}")
    else:
        T = np.array(T0, dtype=np.float64)
    K = C.shape[0]
    C2 = C * C
    const = _quad_a(A, p) if _const is None else _const  # <A*A, pp^T>: an n^2 pass, done once per fit
    AT = _matmul(A, T) if _AT0 is None else _AT0.copy()
    q = T.sum(axis=0)
    loss = _loss(A, T, C, p, AT, const)
    losses = [loss]
    steps: list[float] = []
    rows = np.arange(T.shape[0])
    z_prev, AV = None, None
    it = 0
    while it < max_iter:
        it += 1
        ATC = AT @ C
        G = 2.0 * (C2 @ q)[None, :] - 4.0 * ATC
        z = np.argmin(G, axis=1)
        V = np.zeros_like(T)
        V[rows, z] = p
        D = V - T
        b = float(np.sum(G * D))  # directional derivative = -(Frank-Wolfe gap)
        if b >= 0.0:
            it -= 1
            break
        AV = _vertex_product_update(A, z, p, K, z_prev, AV)
        z_prev = z
        AD = AV - AT
        dq = V.sum(axis=0) - q
        a = float(dq @ C2 @ dq - 2.0 * np.sum((AD @ C) * D))
        if a > 0:
            alpha = min(1.0, -b / (2.0 * a))
        else:  # concave along D (or linear): an endpoint; b < 0 makes alpha = 1 optimal
            alpha = 1.0
        T += alpha * D
        AT += alpha * AD
        q += alpha * dq
        new_loss = loss + a * alpha * alpha + b * alpha
        losses.append(new_loss)
        steps.append(alpha)
        decrease = loss - new_loss
        loss = new_loss
        if decrease <= tol * abs(loss):
            break
    if log:
        return T, {"loss": losses, "n_iter": it, "AT": AT, "step": steps}
    return T


def round_coupling(
    A: Any, T: Any, p: Any = None, *, _validated: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Deterministic rounding: :math:`z_i = \arg\max_j T_{ij}`, hard map :math:`T_{ij} = p_i 1[j = z_i]`,
    C rebuilt from the hard map, empty blocks dropped and labels renumbered to ``0..K'-1``.

    ``p`` defaults to the row sums of ``T``. Returns ``labels`` (n,), ``T_hard`` (n, K') and ``C`` (K', K').
    """
    T = np.asarray(T, dtype=np.float64)
    if not _validated:
        A = check_adjacency(A)
        _check_plan_shape(T, A.shape[0])
        p = T.sum(axis=1) if p is None else _check_weights(p, A.shape[0])
    n, K = T.shape
    p = T.sum(axis=1) if p is None else np.asarray(p, dtype=np.float64)
    z = np.argmax(T, axis=1)
    used, labels = np.unique(z, return_inverse=True)
    Kp = used.size
    T_hard = np.zeros((n, Kp))
    T_hard[np.arange(n), labels] = p
    AT = _vertex_product(A, labels, p, Kp)
    C, _ = update_block_matrix(A, T_hard, AT=AT)
    return labels, T_hard, C
