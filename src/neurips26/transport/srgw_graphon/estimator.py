r"""``SRGWGraphonEstimator``: network / graphon estimation by semi-relaxed Gromov-Wasserstein.

Network Learning with Semi-relaxed Gromov-Wasserstein (Dufour, Naepels, Santoro; arXiv 2606.02223).

Given one undirected graph (adjacency ``A``), fit a K-block model by minimising the srGW objective
:math:`L(T, C)` (see :mod:`.srgw`) over a coupling :math:`T` (rows sum to :math:`p = 1/n`, columns free) and a
block matrix :math:`C`, by block-coordinate descent (the srGW barycenter with one input graph):

1. initialise :math:`T` (default: k-means on the rows of ``A``, a hard partition, as in the authors' code);
2. C-step :math:`C = T^\top A T / (q q^\top)`, empty blocks dropped;
3. T-step: Frank-Wolfe with exact line search, warm-started from the previous :math:`T`;
4. repeat 2-3 until :math:`\|C - C_{prev}\|_F \le` ``tol``;
5. deterministic rounding :math:`z_i = \arg\max_j T_{ij}`, C rebuilt from the hard map.

The estimated probability matrix is :math:`\hat\Theta_{ik} = C_{z_i z_k}` (after rounding) or
:math:`(T C T^\top)_{ik} / (p_i p_k)` (relaxed), and the graphon estimate is the step function
:math:`\hat W(u, v) = C_{b(u) b(v)}` with block :math:`j` occupying an interval of length :math:`q_j`.

Reconstructed [R] from the digest (the paper's full text was not available): the "product" start adds a
symmetric U(-0.01, 0.01) perturbation to the constant C (as POT's barycenter solver does) so that the first
T-step can leave the product coupling; blocks of the step-function graphon are ordered by expected degree.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.cluster import KMeans
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .srgw import (
    _check_coupling,
    _check_weights,
    _loss,
    _matmul,
    _quad_a,
    check_adjacency,
    round_coupling,
    srgw_conditional_gradient,
    update_block_matrix,
)

__all__ = ["SRGWGraphonEstimator", "srgw_block_coordinate_descent", "initial_coupling"]

INITS = ("kmeans", "spectral", "product", "random")


def initial_coupling(
    A: Any,
    n_blocks: int,
    init: str = "kmeans",
    random_state: Any = None,
    p: Any = None,
    *,
    _validated: bool = False,
) -> np.ndarray:
    """Initial coupling ``T0`` (n, K) with rows summing to the node weights ``p`` (default uniform, ``1/n``).

    ``"kmeans"``: k-means (one start, nodes weighted by ``p``) on the rows of ``A``; ``"spectral"``: the same on
    the adjacency spectral embedding (top-K eigenvectors of ``A`` by |eigenvalue|, scaled by sqrt|eigenvalue|);
    ``"product"``: :math:`T = p q^\\top` with uniform ``q`` (fractional); ``"random"``: uniform random rows,
    rescaled to sum to ``p_i`` (fractional).
    """
    if not _validated:  # fit validates A once (check_adjacency allocates an n x n temporary)
        A = check_adjacency(A)
    n = A.shape[0]
    K = _check_n_blocks(n_blocks, n)
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS} or an (n, K) array, got {init!r}")
    rng = check_random_state(random_state)
    p = _check_weights(p, n)
    if init == "product":
        return np.outer(p, np.full(K, 1.0 / K))
    if init == "random":
        U = rng.uniform(size=(n, K))
        return U * (p / U.sum(axis=1))[:, None]
    if init == "kmeans":
        X = A
    else:
        from scipy.sparse.linalg import eigsh

        k = min(K, n - 1)
        if n <= 500 or k >= n // 2:
            dense = A.toarray() if sp.issparse(A) else A
            w, U = np.linalg.eigh(dense)
            order = np.argsort(-np.abs(w))[:k]
            w, U = w[order], U[:, order]
        else:
            w, U = eigsh(A, k=k, which="LM", v0=rng.uniform(size=n))
        X = U * np.sqrt(np.abs(w))[None, :]
    seed = int(rng.randint(np.iinfo(np.int32).max))
    labels = KMeans(n_clusters=K, n_init=1, random_state=seed).fit_predict(X, sample_weight=p)
    T = np.zeros((n, K))
    T[np.arange(n), labels] = p
    return T


def _node_weights(weights: Any, n: int) -> np.ndarray:
    """Node weights normalised to a probability vector (uniform when ``None``)."""
    if weights is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(
            f"node_weights must be a positive finite vector of shape ({n},), got shape {w.shape}"
        )
    return w / w.sum()


def _check_n_blocks(n_blocks: Any, n: int) -> int:
    if isinstance(n_blocks, str):
        if n_blocks != "sqrt":
            raise ValueError(f"n_blocks must be a positive integer <= n or 'sqrt', got {n_blocks!r}")
        return max(1, int(np.floor(np.sqrt(n))))
    if not isinstance(n_blocks, numbers.Integral) or isinstance(n_blocks, bool) or not 1 <= n_blocks <= n:
        raise ValueError(f"n_blocks must be an integer in [1, n = {n}] or 'sqrt', got {n_blocks!r}")
    return int(n_blocks)


def srgw_block_coordinate_descent(
    A: Any,
    T0: Any,
    C0: Any = None,
    p: Any = None,
    *,
    max_iter: int = 1000,
    tol: float = 1e-6,
    max_iter_fw: int = 1000,
    tol_fw: float = 1e-9,
    log: bool = False,
    _validated: bool = False,
) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    r"""Alternate the C-step and the warm-started Frank-Wolfe T-step on :math:`L(T, C)` (srGW barycenter,
    S = 1).

    Starts from ``(T0, C0)`` (``C0`` defaults to the C-step of ``T0``) and stops when
    :math:`\|C - C_{prev}\|_F \le` ``tol`` (same number of blocks) or after ``max_iter`` outer iterations.
    Empty blocks are dropped. The loss is non-increasing along the recorded history. ``p`` are the node
    weights (positive, summing to 1; default uniform ``1/n``); the rows of ``T0`` must sum to them. This is
    ``ot.gromov.semirelaxed_gromov_barycenters`` with one input graph.

    Returns ``T`` (n, K'), ``C`` (K', K') and, if ``log``, a dict with ``loss`` (after every half-step),
    ``n_iter``, ``n_fw_iter`` and ``step`` (every Frank-Wolfe step size; 1 = a jump onto a vertex).
    """
    if not _validated:
        A = check_adjacency(A)
    n = A.shape[0]
    p = _check_weights(p, n)
    T = _check_coupling(T0, p)
    for name, value in (("max_iter", max_iter), ("max_iter_fw", max_iter_fw)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    for name, value in (("tol", tol), ("tol_fw", tol_fw)):
        if not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite float >= 0, got {value!r}")
    const = _quad_a(A, p)
    if C0 is None:
        C, keep = update_block_matrix(A, T, AT=_matmul(A, T))
        T = T[:, keep]
    else:
        C = np.asarray(C0, dtype=np.float64)
        if C.shape != (T.shape[1], T.shape[1]) or not np.all(np.isfinite(C)):
            raise ValueError(f"C0 must be a finite ({T.shape[1]}, {T.shape[1]}) matrix")
        if np.max(np.abs(C - C.T)) > 1e-10:
            raise ValueError("C0 must be symmetric")
    AT = _matmul(A, T)
    losses = [_loss(A, T, C, p, AT, const)]
    n_fw = 0
    steps: list[float] = []
    it = 0
    while it < max_iter:
        it += 1
        T, info = srgw_conditional_gradient(
            A, C, T, p, max_iter=max_iter_fw, tol=tol_fw, log=True, _validated=True, _AT0=AT, _const=const
        )
        AT = info["AT"]
        n_fw += info["n_iter"]
        steps += info["step"]
        losses.append(info["loss"][-1])
        C_prev = C
        C, keep = update_block_matrix(A, T, AT=AT)
        if keep.size < T.shape[1]:
            T, AT = T[:, keep], AT[:, keep]
        losses.append(_loss(A, T, C, p, AT, const))
        if C.shape == C_prev.shape and np.linalg.norm(C - C_prev) <= tol:
            break
    if log:
        return T, C, {"loss": losses, "n_iter": it, "n_fw_iter": n_fw, "step": steps}
    return T, C


class SRGWGraphonEstimator(BaseEstimator):
    """Network / graphon estimation by semi-relaxed Gromov-Wasserstein (arXiv 2606.02223).

    Parameters
    ----------
    n_blocks : int in [1, n] or ``"sqrt"`` (``floor(sqrt(n))``, the authors' choice for graphons).
    init : ``"kmeans"`` (default, as the authors), ``"spectral"``, ``"product"`` (fractional
        :math:`T = pq^\\top` with a small symmetric noise on C), ``"random"`` (fractional random rows), or an
        (n, n_blocks) array with rows summing to the node weights (1/n by default).
    max_iter : maximum number of outer (C-step + T-step) iterations, >= 1.
    tol : stop when the Frobenius change of C is at most ``tol`` (>= 0).
    max_iter_fw : maximum Frank-Wolfe steps per T-step, >= 1.
    tol_fw : Frank-Wolfe stops on a relative loss decrease at most ``tol_fw`` (>= 0).
    n_init : int >= 1 or ``"auto"`` (default): number of starts, as in scikit-learn's ``KMeans``; the fit with
        the lowest srGW loss at the rounded solution (``loss_``) is kept. The first start uses ``init``; when
        ``init`` is a string other than ``"spectral"``, the second is the spectral start (it recovers unequal
        blocks where a single k-means start on the rows of ``A`` stops in a worse local optimum); the others use
        ``init`` again with fresh random draws. ``"auto"``: 3 for a string ``init``, 1 for an array ``init`` (an
        explicit array is one start: ``n_init > 1`` then warns and runs it once). ``n_init=1`` with
        ``init="kmeans"`` is the authors' protocol.
    random_state : seed / ``RandomState`` for the initialisation.

    Attributes
    ----------
    coupling_ : (n, K') relaxed coupling T at convergence (before rounding).
    relaxed_block_matrix_ : (K', K') C at convergence (before rounding).
    relaxed_loss_ : L(T, C) before rounding.
    labels_ : (n,) block of each node after deterministic rounding (argmax of the coupling rows).
    block_matrix_ : (K'', K'') C rebuilt from the rounded (hard) map.
    block_proportions_ : (K'',) fraction of nodes per block after rounding.
    loss_ : L at the rounded solution (GW loss to A, "loss_to_A").
    loss_history_ : losses after every half-step of the block-coordinate descent (non-increasing).
    n_blocks_ : number of non-empty blocks after rounding.
    n_iter_, n_fw_iter_ : outer iterations and total Frank-Wolfe steps.
    fw_steps_ : (n_fw_iter_,) the Frank-Wolfe step sizes in order (1: the iterate jumped onto a vertex).
    fractional_rows_ : fraction of rows with max_j T_ij / p_i < 0.99.
    node_weights_ : (n,) node weights p used (uniform unless ``fit(..., node_weights=...)``).
    n_init_ : number of starts run; init_losses_ : (n_init_,) ``loss_`` of each start, in order;
    best_init_ : the start kept (``"kmeans"``, ``"spectral"``, ..., or ``"array"``).
    """

    def __init__(
        self,
        n_blocks: int | str = "sqrt",
        *,
        init: str | np.ndarray = "kmeans",
        max_iter: int = 1000,
        tol: float = 1e-6,
        max_iter_fw: int = 1000,
        tol_fw: float = 1e-9,
        n_init: int | str = "auto",
        random_state: Any = None,
    ) -> None:
        self.n_blocks = n_blocks
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.max_iter_fw = max_iter_fw
        self.tol_fw = tol_fw
        self.n_init = n_init
        self.random_state = random_state

    def _validate_params_(self) -> None:
        for name in ("max_iter", "max_iter_fw"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        for name in ("tol", "tol_fw"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not np.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite float >= 0, got {v!r}")
        n_init = self.n_init
        if isinstance(n_init, str):
            valid = n_init == "auto"
        else:
            valid = isinstance(n_init, numbers.Integral) and not isinstance(n_init, bool) and n_init >= 1
        if not valid:
            raise ValueError(f"n_init must be an integer >= 1 or 'auto', got {n_init!r}")

    def _starts(self) -> list[str | None]:
        """The start of each run: an init name, or ``None`` for the user's array."""
        if not isinstance(self.init, str):
            if self.n_init != "auto" and self.n_init > 1:
                warnings.warn(
                    f"init is an explicit coupling: running one start instead of n_init = {self.n_init}",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return [None]
        n_init = 3 if self.n_init == "auto" else int(self.n_init)
        starts = [self.init] * n_init
        if n_init > 1 and self.init != "spectral":
            starts[1] = "spectral"
        return starts

    def fit(self, A: Any, y: None = None, node_weights: Any = None) -> SRGWGraphonEstimator:
        """Fit the block model to the adjacency matrix ``A`` (n, n), symmetric with entries in [0, 1].

        ``node_weights`` (n,): positive weights of the nodes (the srGW source measure ``p``), normalised to sum
        to 1; default uniform. A node of weight ``2/n`` counts as two identical nodes.
        """
        A = check_adjacency(A)
        self._validate_params_()
        n = A.shape[0]
        K = _check_n_blocks(self.n_blocks, n)
        rng = check_random_state(self.random_state)
        p = _node_weights(node_weights, n)
        runs = [self._fit_one(A, K, start, rng, p) for start in self._starts()]
        losses = [run["loss_"] for run in runs]
        best = int(np.argmin(losses))  # the first of equal losses: deterministic
        for name, value in runs[best].items():
            setattr(self, name, value)
        self.n_init_ = len(runs)
        self.init_losses_ = np.asarray(losses)
        self.n_nodes_ = n
        self.node_weights_ = p
        return self

    def _fit_one(self, A: Any, K: int, start: str | None, rng: Any, p: np.ndarray) -> dict[str, Any]:
        """One block-coordinate descent from one start; returns the fitted attributes."""
        C0 = None
        if start is not None:
            T0 = initial_coupling(A, K, start, rng, p=p, _validated=True)
            if start == "product":
                C0, _ = update_block_matrix(A, T0, AT=_matmul(A, T0))
                noise = rng.uniform(-0.01, 0.01, size=(K, K))
                C0 = np.clip(C0 + 0.5 * (noise + noise.T), 0.0, 1.0)
        else:
            T0 = _check_coupling(self.init, p, K, name="init")
        T, C, info = srgw_block_coordinate_descent(
            A,
            T0,
            C0,
            p,
            max_iter=self.max_iter,
            tol=self.tol,
            max_iter_fw=self.max_iter_fw,
            tol_fw=self.tol_fw,
            log=True,
            _validated=True,
        )
        labels, T_hard, C_hard = round_coupling(A, T, p, _validated=True)
        return {
            "coupling_": T,
            "relaxed_block_matrix_": C,
            "relaxed_loss_": float(info["loss"][-1]),
            "loss_history_": np.asarray(info["loss"]),
            "n_iter_": info["n_iter"],
            "n_fw_iter_": info["n_fw_iter"],
            "fw_steps_": np.asarray(info["step"], dtype=np.float64),
            "fractional_rows_": float(np.mean(T.max(axis=1) / p < 0.99)),
            "labels_": labels,
            "block_matrix_": C_hard,
            "block_proportions_": T_hard.sum(axis=0),
            "n_blocks_": C_hard.shape[0],
            "loss_": _loss(A, T_hard, C_hard, p, _matmul(A, T_hard)),
            "best_init_": "array" if start is None else start,
        }

    def fit_predict(self, A: Any, y: None = None, node_weights: Any = None) -> np.ndarray:
        """Fit to ``A`` and return the block of each node (``labels_``), as scikit-learn's clusterers."""
        return self.fit(A, node_weights=node_weights).labels_

    def probability_matrix(self, relaxed: bool = False) -> np.ndarray:
        r"""Estimated edge-probability matrix :math:`\hat\Theta` (n, n).

        Rounded (default): :math:`C_{z_i z_k}`; relaxed: :math:`(T C T^\top)_{ik} / (p_i p_k)`.
        """
        check_is_fitted(self, "block_matrix_")
        if relaxed:
            p = self.node_weights_
            return (self.coupling_ @ self.relaxed_block_matrix_ @ self.coupling_.T) / np.outer(p, p)
        z = self.labels_
        return self.block_matrix_[np.ix_(z, z)]

    def graphon(self, u: Any, v: Any) -> np.ndarray:
        r"""Evaluate the step-function graphon estimate :math:`\hat W(u, v)` (broadcasting ``u`` and ``v``).

        Block ``j`` occupies an interval of length ``block_proportions_[j]``; blocks are ordered by expected
        degree :math:`(C q)_j`. The estimate is defined up to a measure-preserving relabelling of [0, 1].
        """
        check_is_fitted(self, "block_matrix_")
        u = np.asarray(u, dtype=np.float64)
        v = np.asarray(v, dtype=np.float64)
        for name, x in (("u", u), ("v", v)):
            if not np.all(np.isfinite(x)) or (x.size and (x.min() < 0 or x.max() > 1)):
                raise ValueError(f"{name} must lie in [0, 1]")
        C, q = self.block_matrix_, self.block_proportions_
        order = np.argsort(C @ q, kind="stable")
        edges = np.cumsum(q[order])[:-1]
        bu = order[np.searchsorted(edges, u, side="right")]
        bv = order[np.searchsorted(edges, v, side="right")]
        return C[bu, bv]
