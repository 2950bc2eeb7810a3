"""Graph random features (GRFs): unbiased, non-negative random features for power-series graph kernels.

Stage 2 of *Manifold Random Features* (Parashar, Long, Saha, Choromanski, arXiv 2602.03797), which builds on
*General Graph Random Features* (Reid et al., ICLR 2024) and *Taming graph kernels with random features*
(Choromanski, ICML 2023).

Let ``W`` be a symmetric non-negative weight matrix, ``D`` its weighted degrees and
``A = D^{-1/2} W D^{-1/2}`` the symmetric normalised adjacency (spectrum in ``[-1, 1]``). The target kernel is a
power series ``K = sum_k alpha_k A^k`` with ``alpha_k >= 0``. Two such kernels are built in:

- diffusion (heat) kernel ``exp(-sigma2 L)`` with ``L = I - A``: ``alpha_k = e^{-sigma2} sigma2^k / k!``;
- regularised Laplacian ``(I + sigma2 L)^{-1}``: ``alpha_k = beta^k / (1 + sigma2)``, ``beta = sigma2/(1+sigma2)``.

(The digest writes ``U = sigma2 A`` and ``exp(U)``; that is the same kernel up to the constant ``e^{sigma2}``.)

For every node ``i`` we run ``m`` random walks ``i = v_0, v_1, ...``: each step halts with probability
``p_halt``, else moves to a uniformly chosen neighbour. After ``l`` steps the walk deposits at ``v_l`` the load

    prod_{s<l} A[v_s, v_{s+1}] / prod_{s<l} ((1 - p_halt) / deg(v_s))  *  f(l)

(``deg`` is the neighbour count) and ``phi(i)`` is the average deposit vector. ``f`` is the deconvolution square
root of ``alpha``: ``sum_{a+b=k} f(a) f(b) = alpha_k``; for diffusion ``f(l) = e^{-sigma2/2} (sigma2/2)^l / l!``,
for the regularised Laplacian ``f(l) = (1+sigma2)^{-1/2} beta^l binom(2l, l) / 4^l``. The importance weight makes
``E[phi(i)] = sum_l f(l) A^l e_i`` exactly, so for independent walks ``E[phi(i)^T phi(j)] = K_ij`` (i != j).
On the diagonal the same walks enter both factors, which adds the walk variance (an ``O(1/m)`` bias).

Since ``A >= 0`` and ``f >= 0`` every feature is non-negative, and every walk's total deposit is at most
``sum_l f(l) c^l`` with ``c = max_{(u,v) in E} A[u,v] deg(u) / (1 - p_halt)``: features are positive and bounded.
With ``neighbor_sampling="weighted"`` [R: our variance-reduced variant, not in the GRF papers] the next node is
drawn with probability ``A[u, v] / sum_w A[u, w]`` and the importance weight becomes ``sum_w A[u, w] / (1 - p)``;
``E[phi(i)]`` is unchanged (still unbiased) and the load no longer depends on which edge was taken, which cuts
the variance on graphs with unequal weights (Gaussian kNN graphs) severalfold.
Walks are truncated at ``max_walk_length`` (default: where the tail of ``f`` falls below ``1e-12`` of its sum).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln, logsumexp
from sklearn.base import BaseEstimator

KERNELS = ("diffusion", "regularized_laplacian")
SAMPLINGS = ("uniform", "weighted")


def _as_generator(
    random_state: int | np.random.Generator | np.random.RandomState | None,
) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    if random_state is None or isinstance(random_state, Integral):
        if random_state is not None and random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
        return np.random.default_rng(random_state)
    raise TypeError(
        f"random_state must be None, an int or a numpy Generator/RandomState, got {random_state!r}"
    )


def modulation_function(
    kernel: str, sigma2: float, max_length: int | None = None, tol: float = 1e-12
) -> np.ndarray:
    """The deconvolution square root ``f(0..L)`` of the power-series coefficients of ``kernel``.

    ``sum_{a+b=k} f(a) f(b) = alpha_k`` for ``k <= L``. With ``max_length=None`` the series is cut where the
    remaining tail of ``f`` is below ``tol`` times its total.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if not isinstance(sigma2, Real) or not math.isfinite(sigma2) or sigma2 <= 0:
        raise ValueError(f"sigma2 must be a finite positive number, got {sigma2!r}")
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, Integral) or max_length < 0
    ):
        raise ValueError(f"max_length must be None or an integer >= 0, got {max_length!r}")
    n_max = 4000 if max_length is None else int(max_length)
    ell = np.arange(n_max + 1, dtype=float)
    if kernel == "diffusion":
        log_f = -sigma2 / 2 + ell * math.log(sigma2 / 2) - gammaln(ell + 1)
    else:
        beta = sigma2 / (1.0 + sigma2)
        # binom(2l, l) / 4^l, the coefficients of (1 - x)^{-1/2}
        log_c = gammaln(2 * ell + 1) - 2 * gammaln(ell + 1) - ell * math.log(4.0)
        log_f = -0.5 * math.log1p(sigma2) + ell * math.log(beta) + log_c
    f = np.exp(log_f)
    if max_length is None:
        tail = np.cumsum(f[::-1])[::-1]  # tail[l] = sum_{j >= l} f(j)
        cut = int(np.argmax(tail < tol * tail[0])) if np.any(tail < tol * tail[0]) else n_max + 1
        f = f[: max(cut, 1)]
    return f


def power_series_coefficients(modulation: np.ndarray) -> np.ndarray:
    """``alpha = f * f`` (discrete self-convolution), the kernel a modulation function ``f`` estimates."""
    return np.convolve(modulation, modulation)


def normalized_adjacency(adjacency) -> tuple[sp.csr_matrix, np.ndarray]:
    """``A = D^{-1/2} W D^{-1/2}`` (CSR, sorted indices) and the weighted degrees ``D``; validates ``W``."""
    if sp.issparse(adjacency):
        W = sp.csr_matrix(adjacency, dtype=float)
    else:
        arr = np.asarray(adjacency, dtype=float)
        if arr.ndim != 2:
            raise ValueError(f"adjacency must be a square 2-D matrix, got shape {arr.shape}")
        W = sp.csr_matrix(arr)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"adjacency must be a square 2-D matrix, got shape {W.shape}")
    if W.shape[0] == 0:
        raise ValueError("adjacency must have at least one node")
    W.eliminate_zeros()
    if not np.all(np.isfinite(W.data)):
        raise ValueError("adjacency must contain only finite weights (no NaN or inf)")
    if np.any(W.data < 0):
        raise ValueError("adjacency must be non-negative (GRFs need A >= 0)")
    if abs(W - W.T).max() > 1e-10 * max(1.0, abs(W).max()) if W.nnz else False:
        raise ValueError("adjacency must be symmetric")
    deg = np.asarray(W.sum(axis=1)).ravel()
    inv_sqrt = np.zeros_like(deg)
    inv_sqrt[deg > 0] = 1.0 / np.sqrt(deg[deg > 0])
    A = sp.diags(inv_sqrt) @ W @ sp.diags(inv_sqrt)
    A = sp.csr_matrix(A)
    A.sort_indices()
    return A, deg


class _DepositAccumulator:
    """Running sum of walk deposits ``(row, col, value)`` into a sparse matrix, merged as the walks go.

    Each step's deposits are buffered and folded into the CSR sum once the buffer holds as many entries as the
    sum itself or ``min_chunk`` (the number of walks), so memory stays ``O(nnz(Phi) + walks)`` rather than one
    triplet per walk and step, and the merging work stays linear in the number of deposits (amortised).
    """

    def __init__(self, shape: tuple[int, int], min_chunk: int) -> None:
        self.shape = shape
        self.min_chunk = int(min_chunk)
        self.total = sp.csr_matrix(shape, dtype=float)
        self._rows: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []
        self._vals: list[np.ndarray] = []
        self._buffered = 0

    def add(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
        self._rows.append(rows)
        self._cols.append(cols)
        self._vals.append(vals)
        self._buffered += rows.size
        if self._buffered >= max(self.total.nnz, self.min_chunk):
            self._merge()

    def _merge(self) -> None:
        if not self._buffered:
            return
        step = sp.csr_matrix(
            (np.concatenate(self._vals), (np.concatenate(self._rows), np.concatenate(self._cols))),
            shape=self.shape,
        )  # the COO -> CSR conversion sums duplicate (row, col) pairs
        self.total = self.total + step
        self._rows, self._cols, self._vals, self._buffered = [], [], [], 0

    def result(self) -> sp.csr_matrix:
        self._merge()
        out = sp.csr_matrix(self.total)
        out.sum_duplicates()
        out.sort_indices()
        return out


class GraphRandomFeatures(BaseEstimator):
    """Graph random features for the diffusion or regularised-Laplacian kernel of a weighted graph.

    Parameters
    ----------
    n_walks : walks per node ``m`` (>= 1).
    p_halt : halting probability per step, in (0, 1).
    sigma2 : kernel time/strength ``sigma^2`` (> 0).
    kernel : ``"diffusion"`` (``exp(-sigma2 L)``) or ``"regularized_laplacian"`` (``(I + sigma2 L)^{-1}``).
    max_walk_length : hard cap on walk length; ``None`` picks it from the decay of the modulation function.
    neighbor_sampling : ``"uniform"`` (each neighbour with probability ``1/deg``, as in the GRF papers) or
        ``"weighted"`` (probability ``A[u, v] / sum_w A[u, w]``, importance weight ``sum_w A[u, w] / (1-p)``):
        also unbiased, with far lower variance on graphs with unequal edge weights [R: our variant].
    random_state : seed or generator.

    Attributes
    ----------
    features_ : CSR matrix ``(len(nodes_), N)``; row ``i`` is ``phi(nodes_[i])`` (non-negative).
    nodes_ : the walk start nodes (all nodes unless ``fit(..., nodes=...)``).
    adjacency_normalized_ : ``A = D^{-1/2} W D^{-1/2}``.
    degree_ : weighted degrees ``D``.
    modulation_ : ``f(0..L)``.
    feature_bound_ : deterministic upper bound on every entry of ``features_``.
    """

    def __init__(
        self,
        n_walks: int = 64,
        p_halt: float = 0.1,
        sigma2: float = 1.0,
        kernel: str = "diffusion",
        max_walk_length: int | None = None,
        neighbor_sampling: str = "uniform",
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.n_walks = n_walks
        self.p_halt = p_halt
        self.sigma2 = sigma2
        self.kernel = kernel
        self.max_walk_length = max_walk_length
        self.neighbor_sampling = neighbor_sampling
        self.random_state = random_state

    def _validate_params(self) -> None:
        if not isinstance(self.n_walks, Integral) or isinstance(self.n_walks, bool) or self.n_walks < 1:
            raise ValueError(f"n_walks must be an integer >= 1, got {self.n_walks!r}")
        if not isinstance(self.p_halt, Real) or not (0.0 < self.p_halt < 1.0):
            raise ValueError(f"p_halt must be in the open interval (0, 1), got {self.p_halt!r}")
        if not isinstance(self.sigma2, Real) or not math.isfinite(self.sigma2) or self.sigma2 <= 0:
            raise ValueError(f"sigma2 must be a finite positive number, got {self.sigma2!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")
        if self.max_walk_length is not None and (
            not isinstance(self.max_walk_length, Integral) or self.max_walk_length < 0
        ):
            raise ValueError(f"max_walk_length must be None or an integer >= 0, got {self.max_walk_length!r}")
        if self.neighbor_sampling not in SAMPLINGS:
            raise ValueError(f"neighbor_sampling must be one of {SAMPLINGS}, got {self.neighbor_sampling!r}")

    def fit(self, adjacency, y=None, nodes=None) -> GraphRandomFeatures:
        """Sample the walks on the graph with weight matrix ``adjacency`` (``(N, N)``, symmetric, >= 0).

        ``nodes`` (optional, distinct indices) restricts the walks to start only at these nodes; then
        ``features_`` has one row per entry of ``nodes`` (default: every node, in order).
        """
        self._validate_params()
        A, deg = normalized_adjacency(adjacency)
        if nodes is None:
            nodes = np.arange(A.shape[0])
        else:
            nodes = np.asarray(nodes)
            if (
                nodes.ndim != 1
                or nodes.size == 0
                or not np.issubdtype(nodes.dtype, np.integer)
                or nodes.min() < 0
                or nodes.max() >= A.shape[0]
                or np.unique(nodes).size != nodes.size
            ):
                raise ValueError(
                    f"nodes must be a non-empty 1-D array of distinct node indices in [0, {A.shape[0]})"
                )
        self.nodes_ = nodes
        rng = _as_generator(self.random_state)
        f = modulation_function(self.kernel, float(self.sigma2), self.max_walk_length)
        self.adjacency_normalized_ = A
        self.degree_ = deg
        self.modulation_ = f
        self.n_nodes_ = A.shape[0]
        self.features_ = self._sample(A, f, rng, nodes)
        n_nbrs = np.diff(A.indptr)
        if not A.nnz:
            c = 0.0
        elif self.neighbor_sampling == "weighted":
            c = float(np.asarray(A.sum(axis=1)).ravel().max()) / (1.0 - self.p_halt)
        else:
            c = float((A.data * np.repeat(n_nbrs, n_nbrs)).max()) / (1.0 - self.p_halt)
        with np.errstate(divide="ignore", over="ignore"):  # log-domain sum; an infinite bound stays inf
            log_terms = np.log(f) + (np.log(c) if c > 0 else -np.inf) * np.arange(len(f))
            log_terms[0] = np.log(f[0])
            self.feature_bound_ = float(np.exp(logsumexp(log_terms)))
        return self

    def _sample(
        self, A: sp.csr_matrix, f: np.ndarray, rng: np.random.Generator, nodes: np.ndarray
    ) -> sp.csr_matrix:
        n, m, p = A.shape[0], int(self.n_walks), float(self.p_halt)
        indptr, indices, data = A.indptr, A.indices, A.data
        n_nbrs = np.diff(indptr)
        row_sum = np.asarray(A.sum(axis=1)).ravel()  # 0 for isolated nodes
        cum = np.cumsum(data)
        before = np.concatenate([[0.0], cum])[indptr[:-1]]  # cumulative weight before each row
        weighted = self.neighbor_sampling == "weighted"
        start = np.repeat(np.arange(nodes.size), m)  # row of the feature matrix
        cur = np.repeat(nodes, m)
        load = np.full(start.shape, 1.0 / m)  # the 1/m average folded into the load
        deposits = _DepositAccumulator((nodes.size, n), min_chunk=start.size)
        for length in range(len(f)):
            deposits.add(start, cur, load * f[length])
            if length == len(f) - 1:
                break
            # halt with probability p_halt; isolated nodes cannot move
            keep = (rng.random(cur.shape[0]) >= p) & (n_nbrs[cur] > 0)
            start, cur, load = start[keep], cur[keep], load[keep]
            if cur.size == 0:
                break
            d = n_nbrs[cur]
            u = rng.random(cur.shape[0])
            if weighted:
                # P(u -> v) = A[u, v] / sum_w A[u, w]; importance weight sum_w A[u, w] / (1 - p)
                k = np.searchsorted(cum, before[cur] + u * row_sum[cur], side="right")
                k = np.clip(k, indptr[cur], indptr[cur + 1] - 1)
                load = load * row_sum[cur] / (1.0 - p)
            else:
                # P(u -> v) = 1 / deg(u); importance weight A[u, v] / ((1 - p) / deg(u))
                k = indptr[cur] + np.minimum((u * d).astype(np.int64), d - 1)
                load = load * data[k] * d / (1.0 - p)
            cur = indices[k]
        return deposits.result()

    def kernel_matrix(self) -> np.ndarray:
        """The GRF estimate ``Phi Phi^T`` (dense, between the walk start ``nodes_``)."""
        phi = self._fitted_features()
        return np.asarray((phi @ phi.T).toarray())

    def exact_kernel(self) -> np.ndarray:
        """The target kernel ``sum_k alpha_k A^k`` in closed form via a dense eigendecomposition of ``A``.

        ``alpha = f * f`` is the series of the (possibly truncated) modulation function, so this is exactly the
        kernel that ``kernel_matrix`` estimates (rows/columns ``nodes_``). ``O(N^3)``: for graphs of a few thousand
        nodes.
        """
        self._fitted_features()
        lam, V = np.linalg.eigh(self.adjacency_normalized_.toarray())
        alpha = power_series_coefficients(self.modulation_)
        g = np.polynomial.polynomial.polyval(lam, alpha)
        if self.max_walk_length is None:  # the untruncated closed forms (identical to float precision)
            g = (
                np.exp(-self.sigma2 * (1.0 - lam))
                if self.kernel == "diffusion"
                else 1.0 / (1.0 + self.sigma2 * (1.0 - lam))
            )
        Vn = V[self.nodes_]
        return (Vn * g) @ Vn.T

    def _fitted_features(self) -> sp.csr_matrix:
        if not hasattr(self, "features_"):
            raise RuntimeError("GraphRandomFeatures is not fitted yet; call fit(adjacency) first")
        return self.features_
