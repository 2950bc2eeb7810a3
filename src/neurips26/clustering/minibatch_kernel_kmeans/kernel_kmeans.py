"""Mini-batch kernel k-means and the full-batch kernel k-means baseline.

Paper: Ben Jourdan and Gregory Schwartzman, "Mini-batch Kernel k-means", arXiv 2410.05902.

Kernel k-means runs k-means in the feature space phi of a kernel K(x, y) = <phi(x), phi(y)>. The full-batch
(Lloyd) version touches the n x n Gram matrix every iteration. The mini-batch version keeps each centre as an
implicit weighted sum of feature vectors,

    C_j = sum_{s in S_j} w_js phi(x_s),      N_j = ||C_j||^2 = w_j^T K[S_j, S_j] w_j,

so that the distance of a point to a centre costs |S_j| kernel evaluations:

    ||phi(x) - C_j||^2 = K(x, x) - 2 sum_s w_js K(x, x_s) + N_j.                                   (1)

Iteration i: draw a batch B of b points, assign each to its nearest centre by (1), and move every centre
that received b_j > 0 points towards the batch mean of its points, C_j <- (1 - a_j) C_j + a_j cm(B_j), with
a_j = sqrt(b_j / b) (the paper's rate) or a_j = b_j / (points ever assigned to j) (scikit-learn's rate). The
norm update needs only the b_j x b_j block of new kernel values:

    N_j <- (1-a)^2 N_j + 2 a (1-a) <C_j, cm(B_j)> + a^2 mean(K[B_j, B_j]),                          (2)

where <C_j, cm(B_j)> is the mean of the cross terms already computed for (1). Truncation keeps only the
contributions of the last tau batches, so |S_j| <= tau b and an iteration costs O(tau b^2) kernel evaluations,
independent of n. Early stopping (the paper's rule): stop when f_B(C_i) - f_B(C_{i+1}) < tol on the current
batch, where C_{i+1} is the updated centre *before* truncation (moving each centre towards the batch mean of
its points cannot raise f_B, so the statistic is >= 0 and falls as the centres settle; measured after
truncation it would jump whenever old mass is dropped, and stop the fit for the wrong reason). A second,
scale-free rule (scikit-learn's ``max_no_improvement``) stops when a running average of f_B(C_i) on fresh
batches, an unbiased estimate of the objective, has not reached a new minimum for that many batches.

Reconstructed (the full text was not available to us; see the digest): the truncation rule (drop the entries
added more than tau batches ago, keeping N_j exact by an incremental correction and a periodic exact
recomputation), merging repeated batch points by index (the weight is summed, the age is the latest), the
k-means++ seeding on a uniform sample of the data, re-seeding centres that stay empty, and the defaults.
"""

from __future__ import annotations

import numbers
import time
import warnings
from collections.abc import Callable

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from .kernels import KERNELS, kernel_diagonal, make_kernel

LEARNING_RATES = ("sqrt", "sklearn")
TRUNCATIONS = ("renormalize", "drop")


def _check_params(est) -> None:
    """Validate the hyper-parameters shared by both estimators (names in the message)."""
    if (
        isinstance(est.n_clusters, bool)
        or not isinstance(est.n_clusters, numbers.Integral)
        or est.n_clusters < 1
    ):
        raise ValueError(f"n_clusters must be a positive integer, got {est.n_clusters!r}")
    if not (callable(est.kernel) or est.kernel in KERNELS):
        raise ValueError(
            f"kernel must be one of {KERNELS} or a callable k(A, B) -> array, got {est.kernel!r}"
        )
    if est.gamma is not None and not (
        isinstance(est.gamma, numbers.Real) and est.gamma > 0 and np.isfinite(est.gamma)
    ):
        raise ValueError(f"gamma must be a positive finite float or None, got {est.gamma!r}")
    if est.kernel_params is not None and not isinstance(est.kernel_params, dict):
        raise ValueError(f"kernel_params must be a dict or None, got {est.kernel_params!r}")
    if isinstance(est.max_iter, bool) or not isinstance(est.max_iter, numbers.Integral) or est.max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {est.max_iter!r}")
    init = est.init
    if isinstance(init, str) and init not in ("k-means++", "random"):
        raise ValueError(
            f"init must be 'k-means++', 'random' or an array of shape (n_clusters, n_features), got {init!r}"
        )


def _check_n_init(n_init, init) -> int:
    """Number of starts: ``"auto"`` is 1 for an explicit array ``init`` and ``auto_string`` otherwise."""
    if isinstance(n_init, str):
        if n_init != "auto":
            raise ValueError(f"n_init must be a positive integer or 'auto', got {n_init!r}")
        return 0  # resolved by the estimator
    if isinstance(n_init, bool) or not isinstance(n_init, numbers.Integral) or n_init < 1:
        raise ValueError(f"n_init must be a positive integer or 'auto', got {n_init!r}")
    if not isinstance(init, str) and n_init > 1:
        warnings.warn(
            f"init is an explicit array of centres: running one start instead of n_init = {n_init}",
            RuntimeWarning,
            stacklevel=3,
        )
        return 1
    return int(n_init)


def _check_sample_weight(sample_weight, n: int) -> np.ndarray:
    """Non-negative finite weights of shape (n,) with a positive sum (ones when None)."""
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError(
            f"sample_weight must be a finite non-negative array of shape ({n},) with a positive sum (not all "
            f"weights zero), got shape {w.shape}"
        )
    return w


def _resolve_kernel(est, X: np.ndarray, rng: np.random.RandomState):
    return make_kernel(
        est.kernel,
        est.gamma,
        X,
        random_state=rng.randint(2**31 - 1),
        n_clusters=est.n_clusters,
        kernel_params=est.kernel_params,
    )


def _initial_centres(
    est,
    X: np.ndarray,
    kernel_fn,
    diag: np.ndarray | None,
    rng: np.random.RandomState,
    sample_weight: np.ndarray | None = None,
) -> np.ndarray:
    """Initial centres as points (k x d): given, random rows, or kernel k-means++ on a uniform sample."""
    k = est.n_clusters
    init = est.init
    if not isinstance(init, str):
        C0 = np.asarray(init, dtype=float)
        if C0.shape != (k, X.shape[1]):
            raise ValueError(
                f"init array must have shape (n_clusters, n_features) = {(k, X.shape[1])}, got {C0.shape}"
            )
        if not np.all(np.isfinite(C0)):
            raise ValueError("init array must be finite")
        return C0.copy()
    if init == "random":
        return X[rng.choice(X.shape[0], k, replace=False)].copy()
    if diag is None:
        diag = kernel_diagonal(kernel_fn, X, est.kernel)
    return X[kernel_kmeans_plusplus(X, k, kernel_fn, diag, rng, sample_weight=sample_weight)].copy()


def kernel_kmeans_plusplus(
    X: np.ndarray,
    n_clusters: int,
    kernel_fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
    diag: np.ndarray | None = None,
    rng=None,
    n_local_trials: int | None = None,
    sample_weight=None,
) -> np.ndarray:
    """Greedy k-means++ (D^2 sampling) with feature-space distances; returns the chosen row indices.

    d(x, c)^2 = K(x, x) - 2 K(x, c) + K(c, c). Like scikit-learn, each step draws ``2 + log k`` candidates
    and keeps the one that lowers the potential most. ``diag`` is ``K(x, x)`` per row (computed when None);
    ``rng`` a seed or ``RandomState``; ``sample_weight`` (n,) non-negative: as in scikit-learn, the first
    centre is drawn with probability proportional to the weight and the potential is ``sum_x w_x d(x)^2``.
    Needs at least ``n_clusters`` distinct rows of positive weight.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] < 1:
        raise ValueError(f"X must be a non-empty 2D array (n_samples, n_features), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X must be finite (no NaN or infinity)")
    n = X.shape[0]
    if (
        isinstance(n_clusters, bool)
        or not isinstance(n_clusters, numbers.Integral)
        or not 1 <= n_clusters <= n
    ):
        raise ValueError(f"n_clusters must be an integer in [1, n_samples={n}], got {n_clusters!r}")
    if not callable(kernel_fn):
        raise TypeError(f"kernel_fn must be a callable k(A, B) -> array, got {type(kernel_fn).__name__}")
    if n_local_trials is not None and (
        isinstance(n_local_trials, bool)
        or not isinstance(n_local_trials, numbers.Integral)
        or n_local_trials < 1
    ):
        raise ValueError(f"n_local_trials must be a positive integer or None, got {n_local_trials!r}")
    diag = kernel_diagonal(kernel_fn, X, kernel_fn) if diag is None else np.asarray(diag, dtype=float)
    if diag.shape != (n,) or not np.all(np.isfinite(diag)):
        raise ValueError(
            f"diag must be a finite array of shape ({n},) with K(x, x) per row, got {diag.shape}"
        )
    rng = check_random_state(rng)
    weighted = sample_weight is not None
    w = _check_sample_weight(sample_weight, n)
    n_local_trials = n_local_trials or 2 + int(np.log(n_clusters))
    centres = np.empty(n_clusters, dtype=int)
    # unweighted: the same draws as before weights existed (a uniform integer)
    centres[0] = rng.choice(n, p=w / w.sum()) if weighted else rng.randint(n)
    closest = np.maximum(diag - 2 * kernel_fn(X, X[centres[:1]])[:, 0] + diag[centres[0]], 0.0)
    for c in range(1, n_clusters):
        pot = (w * closest).sum()
        if pot <= 0:
            raise ValueError(
                f"X has fewer than n_clusters={n_clusters} distinct points of positive weight in the kernel's "
                "feature space"
            )
        cand = np.searchsorted(np.cumsum(w * closest), rng.uniform(size=n_local_trials) * pot)
        cand = np.clip(cand, 0, n - 1)
        d_cand = np.maximum(diag[:, None] - 2 * kernel_fn(X, X[cand]) + diag[cand][None, :], 0.0)
        new_closest = np.minimum(closest[:, None], d_cand)
        best = int(np.argmin((w[:, None] * new_closest).sum(axis=0)))
        centres[c] = cand[best]
        closest = new_closest[:, best]
    return centres


class _ImplicitCentresMixin:
    """predict/transform from centres stored as weighted sums of support vectors, equation (1)."""

    def _centre_distances(self, X: np.ndarray) -> np.ndarray:
        """Squared feature-space distances (n x k) from each row of X to each centre, in chunks of <= 2**23
        kernel values (64 MB), however many support vectors there are."""
        k = self.n_clusters
        L = self.support_vectors_.shape[0]
        W = np.zeros((L, k))
        W[np.arange(L), self.support_owner_] = self.support_weights_
        chunk = max(1, min(4096, 2**23 // max(L, 1)))
        out = np.empty((X.shape[0], k))
        for start in range(0, X.shape[0], chunk):
            Xc = X[start : start + chunk]
            cross = self._kernel_fn(Xc, self.support_vectors_) @ W
            diag = kernel_diagonal(self._kernel_fn, Xc, self.kernel)
            out[start : start + chunk] = diag[:, None] - 2 * cross + self.center_norms_[None, :]
        return np.maximum(out, 0.0)

    def predict(self, X) -> np.ndarray:
        """Index of the nearest centre (in the kernel's feature space) for each row of X."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return np.argmin(self._centre_distances(X), axis=1)

    def transform(self, X) -> np.ndarray:
        """Feature-space distances ||phi(x) - C_j|| (n x k)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return np.sqrt(self._centre_distances(X))

    def score(self, X, y=None) -> float:
        """Opposite of the kernel k-means objective (sum of squared feature-space distances) on X."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return -float(self._centre_distances(X).min(axis=1).sum())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


class KernelKMeans(_ImplicitCentresMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    """Full-batch kernel k-means (Lloyd iterations on the precomputed n x n Gram matrix).

    The baseline of the mini-batch paper: every iteration costs O(n^2 k) and the Gram matrix O(n^2) memory
    (8 n^2 bytes: 3.2 GB at n = 20000). Iterates until no label changes or ``max_iter`` centre updates; an
    empty cluster takes the point farthest from its centre. It is the better choice for small data (up to a
    few thousand points) and for kernels whose Gram matrix is cheap; see :class:`MiniBatchKernelKMeans`.

    Parameters
    ----------
    n_clusters : number of clusters k.
    kernel : ``"rbf"``, ``"laplacian"``, ``"heat"`` (kNN-graph heat kernel) or a callable
        ``k(A, B) -> (len(A), len(B))``.
    gamma : kernel bandwidth; ``None`` uses the median heuristic (``1 / median`` squared distance for rbf) and,
        for the heat kernel, locally scaled edge weights (``gamma_`` is then None; see :class:`HeatKernel`).
    kernel_params : options of the heat kernel (``n_neighbors``, ``n_components``, ``t``).
    max_iter : maximum number of centre updates.
    init : ``"k-means++"`` (kernel k-means++ on all points), ``"random"`` or an array (k, d) of centre points.
    n_init : number of starts, as scikit-learn's ``KMeans``: the run with the lowest inertia is kept. ``"auto"``
        is 1 for ``"k-means++"`` or an array and 10 for ``"random"`` (scikit-learn's rule); an explicit array is
        one start (``n_init > 1`` then warns).
    random_state : seed or ``RandomState``.

    ``fit(X, sample_weight=...)`` weights the points as scikit-learn's ``KMeans`` does: each centre is the
    weighted mean of its points, the inertia is ``sum_i w_i ||phi(x_i) - C(x_i)||^2`` and k-means++ draws by
    weight; an integer weight counts a point that many times.

    Attributes
    ----------
    labels_, inertia_ (weighted sum of squared feature-space distances), n_iter_, gamma_ (bandwidth used),
    support_vectors_ (a copy of X), support_weights_, support_owner_, center_norms_ (the implicit centres).
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        kernel="rbf",
        gamma: float | None = None,
        kernel_params: dict | None = None,
        max_iter: int = 100,
        init="k-means++",
        n_init="auto",
        random_state=None,
    ):
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.kernel_params = kernel_params
        self.max_iter = max_iter
        self.init = init
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, X, y=None, sample_weight=None):
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        _check_params(self)
        n, k = X.shape[0], self.n_clusters
        if k > n:
            raise ValueError(f"n_clusters={k} must be <= n_samples={n}")
        weighted = sample_weight is not None
        sw = _check_sample_weight(sample_weight, n)
        n_init = _check_n_init(self.n_init, self.init) or (
            10 if isinstance(self.init, str) and self.init == "random" else 1
        )
        rng = check_random_state(self.random_state)
        self._kernel_fn, self.gamma_ = _resolve_kernel(self, X, rng)
        G = self._kernel_fn(X, X)  # the n x n Gram matrix: what the mini-batch method avoids
        diag = np.diag(G).copy()
        best = None
        for _ in range(n_init):
            C0 = _initial_centres(self, X, self._kernel_fn, diag, rng, sw if weighted else None)
            run = self._lloyd(G, diag, X, C0, sw)
            if best is None or run["inertia_"] < best["inertia_"]:
                best = run
        for name, value in best.items():
            setattr(self, name, value)
        self.support_vectors_ = X.copy()
        return self

    def _lloyd(self, G, diag, X, C0, sw) -> dict:
        """Weighted Lloyd iterations on the Gram matrix from the centre points C0; returns the fitted state."""
        n, k = G.shape[0], self.n_clusters
        D = (
            diag[:, None]
            - 2 * self._kernel_fn(X, C0)
            + kernel_diagonal(self._kernel_fn, C0, self.kernel)[None, :]
        )
        labels = np.argmin(D, axis=1)
        for it in range(1, self.max_iter + 1):
            labels = self._fill_empty(labels, D, k, sw)
            centre_labels = labels
            H = np.zeros((n, k))
            mass = np.bincount(labels, weights=sw, minlength=k)
            H[np.arange(n), labels] = sw / mass[labels]  # C_j = sum_i H_ij phi(x_i), the weighted mean
            GH = G @ H
            norms = np.einsum("ij,ij->j", H, GH)
            D = diag[:, None] - 2 * GH + norms[None, :]
            new_labels = np.argmin(D, axis=1)
            n_iter = it
            if np.array_equal(new_labels, labels):
                break
            labels = new_labels
        final = np.argmin(D, axis=1)
        # centres are the cluster means of the last update; stored implicitly over the training points
        return {
            "n_iter_": n_iter,
            "support_owner_": centre_labels.copy(),
            "support_weights_": H[np.arange(n), centre_labels],
            "center_norms_": norms,
            "labels_": final,
            "inertia_": float((sw * D[np.arange(n), final].clip(min=0)).sum()),
        }

    @staticmethod
    def _fill_empty(labels: np.ndarray, D: np.ndarray, k: int, sw: np.ndarray) -> np.ndarray:
        """Give every cluster of zero weight the positive-weight point farthest from its current centre
        (scikit-learn's rule), never emptying another cluster."""
        counts = np.bincount(labels[sw > 0], minlength=k)
        if counts.min() > 0:
            return labels
        labels = labels.copy()
        far = np.argsort(-np.where(sw > 0, D[np.arange(len(labels)), labels], -np.inf), kind="stable")
        taken = 0
        for j in np.flatnonzero(counts == 0):
            while counts[labels[far[taken]]] <= 1:
                taken += 1
            counts[labels[far[taken]]] -= 1
            labels[far[taken]] = j
            counts[j] = 1
            taken += 1
        return labels


class MiniBatchKernelKMeans(_ImplicitCentresMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    """Mini-batch kernel k-means (Jourdan and Schwartzman, arXiv 2410.05902).

    When to use it: an iteration costs O(tau b^2) kernel values and the final labelling O(n tau b), against
    O(n^2) per iteration and O(n^2) memory for :class:`KernelKMeans`. With the defaults (b = 256, tau = 8, so
    centres span at most 2048 points) it is faster than full batch from a few thousand points on (about 4x at
    n = 6000 in our runs) and the gap grows like n (tens of times at n = 20000, where the full Gram matrix
    needs 3.2 GB). Below about ``2 tau b`` points (a few thousand) the centres span the whole data set,
    nothing is saved, and full batch, which is exact Lloyd, is the better choice (it is also faster on
    sklearn's digits, n = 1797). For the RBF kernel, an explicit low-rank feature map (scikit-learn's
    ``Nystroem`` followed by ``MiniBatchKMeans``) is a strong and often faster alternative; this estimator
    keeps the exact kernel and works with any kernel, including ones without a cheap feature map.

    Parameters
    ----------
    n_clusters : number of clusters k.
    kernel : ``"rbf"``, ``"laplacian"``, ``"heat"`` (kNN-graph heat kernel) or a callable
        ``k(A, B) -> (len(A), len(B))``.
    gamma : kernel bandwidth; ``None`` uses the median heuristic on at most 1000 points and, for the heat
        kernel, locally scaled edge weights (``gamma_`` is then None; see :class:`HeatKernel`).
    kernel_params : options of the heat kernel (``n_neighbors``, ``n_components``, ``t``).
    batch_size : points per batch b; ``batch_size >= n`` uses the whole data set each iteration (no sampling).
    tau : truncation: a centre keeps the contributions of its last ``tau`` batches (``None``: keep all). The
        batches are counted globally; a centre that received no points for tau batches keeps its latest ones.
    truncation : ``"renormalize"`` (default: the kept weights are rescaled to the centre's total weight before
        the drop, so a centre stays a weighted mean of its recent batches) or ``"drop"`` (the dropped weight is
        lost; N_j kept exact). Dropping shrinks centres towards 0, badly so with the decaying scikit-learn
        rate, where the last tau batches hold only a fraction of a centre's weight.
    learning_rate : ``"sqrt"`` (a_j = sqrt(b_j / b), the paper's), ``"sklearn"`` (a_j = b_j / points ever
        assigned to j), or a constant float in (0, 1].
    tol : the paper's early stopping: stop when f_B(C_i) - f_B(C_{i+1}) < tol, measured before truncation
        (absolute; for normalised kernels f_B <= 2, and 1e-3 stops once an update barely moves the batch
        objective). ``tol=0`` disables it; with a non-normalised callable kernel, scale it to the kernel.
    max_no_improvement : the backstop rule: stop when the running average of the batch objective has not
        improved for this many batches (scale-free; ``None`` disables it).
    max_iter : maximum number of iterations (batches).
    init : ``"k-means++"``, ``"random"`` or an array (k, d) of centre points.
    n_init : number of starts (``"auto"``: 3 for a string ``init``, 1 for an array; an explicit array is one
        start and ``n_init > 1`` then warns). Each start seeds and runs the whole mini-batch fit; the one with
        the lowest objective on one validation sample of ``init_size`` points (drawn once, shared by the starts,
        weighted by ``sample_weight``) is kept and labels all n points, so the selection, like the fit, costs
        nothing that grows with n (scikit-learn's ``MiniBatchKMeans`` picks the best *seeding* on such a sample
        and runs once; a whole run per start costs ``n_init`` times the iterations and recovers more).
    init_size : k-means++ runs on a uniform sample of this many points (default ``3 * batch_size``), so that
        seeding costs do not grow with n.
    reassign_after : a centre that receives no point for this many consecutive batches is re-seeded at the
        batch point farthest from its nearest centre (``None``: never).
    recompute_every : recompute the centre norms N_j exactly every this many iterations (float drift guard).
    random_state : seed or ``RandomState``.

    ``fit(X, sample_weight=...)`` and ``partial_fit(X, sample_weight=...)`` weight the points as
    scikit-learn's ``MiniBatchKMeans``: batches are drawn uniformly, and in each batch a centre moves towards
    the *weighted* mean of its points, with b_j and b in the rates replaced by weight sums (so the
    ``"sklearn"`` rate is W_j / total weight ever assigned to j); k-means++ draws by weight, and the batch
    objectives and ``inertia_`` are weighted (``sum_i w_i ||phi(x_i) - C(x_i)||^2``).

    Attributes
    ----------
    labels_ (one chunked pass over all n points after fitting), inertia_, n_iter_, gamma_,
    support_vectors_, support_weights_, support_owner_, center_norms_, batch_objective_ (f_B(C_i) before each
    step), batch_improvement_ (f_B(C_i) - f_B(C_{i+1}) before truncation, the early-stopping statistic),
    stop_reason_ (``"tol"``, ``"max_no_improvement"`` or ``"max_iter"``), n_reassigned_ (centres re-seeded),
    iteration_seconds_ (wall time of each iteration, excluding seeding and the final labelling), n_init_ and
    init_objectives_ (the validation objective of every start; empty when one start ran).
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        kernel="rbf",
        gamma: float | None = None,
        kernel_params: dict | None = None,
        batch_size: int = 256,
        tau: int | None = 8,
        truncation: str = "renormalize",
        learning_rate="sqrt",
        tol: float = 1e-3,
        max_no_improvement: int | None = 10,
        max_iter: int = 100,
        init="k-means++",
        n_init="auto",
        init_size: int | None = None,
        reassign_after: int | None = 10,
        recompute_every: int = 10,
        random_state=None,
    ):
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.kernel_params = kernel_params
        self.batch_size = batch_size
        self.tau = tau
        self.truncation = truncation
        self.learning_rate = learning_rate
        self.tol = tol
        self.max_no_improvement = max_no_improvement
        self.max_iter = max_iter
        self.init = init
        self.n_init = n_init
        self.init_size = init_size
        self.reassign_after = reassign_after
        self.recompute_every = recompute_every
        self.random_state = random_state

    def _check_minibatch_params(self) -> None:
        _check_params(self)

        def positive_int(name: str, value, allow_none: bool = False) -> None:
            if value is None and allow_none:
                return
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                extra = " or None" if allow_none else ""
                raise ValueError(f"{name} must be a positive integer{extra}, got {value!r}")

        positive_int("batch_size", self.batch_size)
        positive_int("tau", self.tau, allow_none=True)
        positive_int("max_no_improvement", self.max_no_improvement, allow_none=True)
        positive_int("init_size", self.init_size, allow_none=True)
        positive_int("reassign_after", self.reassign_after, allow_none=True)
        positive_int("recompute_every", self.recompute_every)
        if self.truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {self.truncation!r}")
        lr = self.learning_rate
        if isinstance(lr, str):
            if lr not in LEARNING_RATES:
                raise ValueError(
                    f"learning_rate must be one of {LEARNING_RATES} or a float in (0, 1], got {lr!r}"
                )
        elif isinstance(lr, bool) or not (isinstance(lr, numbers.Real) and 0 < lr <= 1):
            raise ValueError(
                f"learning_rate must be one of {LEARNING_RATES} or a float in (0, 1], got {lr!r}"
            )
        if isinstance(self.tol, bool) or not (isinstance(self.tol, numbers.Real) and self.tol >= 0):
            raise ValueError(f"tol must be a non-negative float, got {self.tol!r}")
        _check_n_init(self.n_init, "k-means++")  # the array case is resolved (with its warning) in fit

    def _rates(self, counts: np.ndarray, seen: np.ndarray, b: float) -> np.ndarray:
        """Learning rate a_j per centre for this batch (0 where the centre got no weight); ``counts`` and ``b``
        are the weight assigned to each centre and the batch's total weight."""
        lr = self.learning_rate
        if lr == "sqrt":
            a = np.sqrt(counts / b)
        elif lr == "sklearn":
            a = counts / np.maximum(seen + counts, 1)
        else:
            a = np.full(counts.shape, float(lr))
        return np.where(counts > 0, a, 0.0)

    def fit(self, X, y=None, sample_weight=None):
        """Run mini-batch iterations on batches sampled from X, then label all of X in one chunked pass."""
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        self._check_minibatch_params()
        n, k = X.shape[0], self.n_clusters
        if k > n:
            raise ValueError(f"n_clusters={k} must be <= n_samples={n}")
        weighted = sample_weight is not None
        sw = _check_sample_weight(sample_weight, n)
        n_init = _check_n_init(self.n_init, self.init) or (3 if isinstance(self.init, str) else 1)
        rng = check_random_state(self.random_state)
        b = min(self.batch_size, n)
        sample_size = self.init_size or 3 * b
        self._kernel_fn, self.gamma_ = _resolve_kernel(self, X, rng)  # once: the starts share the kernel
        alpha = min(1.0, 2.0 * b / (n + 1))  # scikit-learn's smoothing of the batch objective
        valid = rng.choice(n, min(sample_size, n), replace=False) if n_init > 1 else None
        best, objectives = None, []
        for _ in range(n_init):
            self._start(X, rng, sample_size, sw if weighted else None)
            batch_objective, improvement, iter_seconds = [], [], []
            self.stop_reason_ = "max_iter"
            # the steps multiply small matrices, where BLAS threads cost more than they give (as in
            # scikit-learn's KMeans); the final labelling pass below uses them
            with threadpool_limits(limits=1, user_api="blas"):
                self._iterate(X, rng, b, n, alpha, batch_objective, improvement, iter_seconds, sw)
            self._finish()
            self.batch_objective_ = np.asarray(batch_objective)
            self.batch_improvement_ = np.asarray(improvement)
            self.iteration_seconds_ = np.asarray(iter_seconds)
            if n_init == 1:
                break
            d_valid = self._centre_distances(X[valid]).min(axis=1)
            objective = float(np.average(d_valid, weights=sw[valid])) if sw[valid].sum() > 0 else 0.0
            objectives.append(objective)
            if best is None or objective < best[0]:
                best = (objective, self._snapshot())
        if best is not None:
            for name, value in best[1].items():
                setattr(self, name, value)
        self.n_init_, self.init_objectives_ = n_init, np.asarray(objectives)
        self._next_id = n  # a later partial_fit continues from here with fresh point identities
        D_all = self._centre_distances(X)  # the final labelling pass over all n points
        self.labels_ = np.argmin(D_all, axis=1)
        self.inertia_ = float((sw * D_all[np.arange(n), self.labels_]).sum())
        return self

    _RUN_STATE = (
        "_state",
        "support_vectors_",
        "support_owner_",
        "support_weights_",
        "center_norms_",
        "n_iter_",
        "stop_reason_",
        "n_reassigned_",
        "batch_objective_",
        "batch_improvement_",
        "iteration_seconds_",
    )

    def _snapshot(self) -> dict:
        """The state of one start (a later start replaces every entry)."""
        return {name: getattr(self, name) for name in self._RUN_STATE}

    def _iterate(self, X, rng, b, n, alpha, batch_objective, improvement, iter_seconds, sw) -> None:
        """The fit loop: batches until a stopping rule fires (sets ``n_iter_`` and ``stop_reason_``)."""
        ewa, best, stale = None, np.inf, 0
        for it in range(1, self.max_iter + 1):
            t0 = time.perf_counter()
            B = np.arange(n) if self.batch_size >= n else rng.randint(n, size=b)
            if not sw[B].sum() > 0:  # a batch of zero-weight points moves nothing
                self.n_iter_ = it
                continue
            f_old, f_new, _ = self._step(X[B], B, sw[B])  # point identities = row indices: repeats merge
            batch_objective.append(f_old)
            improvement.append(f_old - f_new)
            iter_seconds.append(time.perf_counter() - t0)
            self.n_iter_ = it
            if self.tol > 0 and f_old - f_new < self.tol:
                self.stop_reason_ = "tol"
                return
            if self.max_no_improvement is not None:
                ewa = f_old if ewa is None else (1 - alpha) * ewa + alpha * f_old
                if ewa < best:
                    best, stale = ewa, 0
                else:
                    stale += 1
                    if stale >= self.max_no_improvement:
                        self.stop_reason_ = "max_no_improvement"
                        return

    def partial_fit(self, X, y=None, sample_weight=None):
        """One mini-batch iteration on the batch X (for streams, or data that never sits in one process).

        The first call fixes the kernel (median-heuristic bandwidth on that batch when ``gamma=None``; the heat
        kernel's graph is built on it) and seeds the centres by kernel k-means++ on it, so it needs at least
        ``n_clusters`` rows. ``labels_`` and ``inertia_`` then refer to the last batch, against the centres
        before its update. ``tol``, ``max_no_improvement``, ``max_iter`` and ``n_init`` do not apply.
        """
        first = not hasattr(self, "_state")
        X = validate_data(self, X, dtype=np.float64, reset=first, ensure_min_samples=1)
        weighted = sample_weight is not None
        sw = _check_sample_weight(sample_weight, X.shape[0])
        if first:
            self._check_minibatch_params()
            if self.n_clusters > X.shape[0]:
                raise ValueError(
                    f"n_clusters={self.n_clusters} must be <= the first batch's {X.shape[0]} rows"
                )
            self._partial_rng = check_random_state(self.random_state)
            self._kernel_fn, self.gamma_ = _resolve_kernel(self, X, self._partial_rng)
            self._start(X, self._partial_rng, X.shape[0], sw if weighted else None)
            self.n_iter_ = 0
            self._next_id = 0
            self.n_reassigned_ = 0
        # fresh identities: points of different calls are never merged (they may differ even if equal)
        ids = self._next_id + np.arange(X.shape[0])
        f_old, _, D = self._step(X, ids, sw)
        self._next_id += X.shape[0]
        self.n_iter_ += 1
        self._finish(exact_norms=False)
        self.labels_ = np.argmin(D, axis=1)
        self.inertia_ = float((sw * np.maximum(D[np.arange(len(X)), self.labels_], 0)).sum())
        return self

    # --- the algorithm state: centres as weighted support points ----------------------------------------
    def _start(
        self, X: np.ndarray, rng: np.random.RandomState, sample_size: int, sw: np.ndarray | None = None
    ) -> None:
        """Seed the centres on a uniform sample (cost independent of n); the kernel is already resolved.
        ``sw``: weights of the rows of X (None: unweighted)."""
        k = self.n_clusters
        kfn = self._kernel_fn
        if isinstance(self.init, str):
            sample = rng.choice(len(X), min(sample_size, len(X)), replace=False)
            Xs = X[sample]
            if self.init == "k-means++":
                diag = kernel_diagonal(kfn, Xs, self.kernel)
                ws = None if sw is None else sw[sample]
                C0 = Xs[kernel_kmeans_plusplus(Xs, k, kfn, diag, rng, sample_weight=ws)]
            else:
                C0 = Xs[rng.choice(len(Xs), k, replace=False)]
        else:
            C0 = _initial_centres(self, X, kfn, None, rng)  # explicit array: validated there
        # support entry: identity (seeds get ids -1..-k), coordinates, owning centre, weight, batch of addition
        self._state = {
            "ids": -1 - np.arange(k, dtype=np.int64),
            "points": C0.copy(),
            "owner": np.arange(k),
            "w": np.ones(k),
            "age": np.zeros(k, dtype=int),
            "N": kernel_diagonal(kfn, C0, self.kernel),
            "seen": np.zeros(k),
            "idle": np.zeros(k, dtype=int),
            "it": 0,
            "next_seed_id": -1 - k,
        }
        self.n_reassigned_ = 0

    def _step(self, XB: np.ndarray, ids_B: np.ndarray, wB: np.ndarray) -> tuple[float, float, np.ndarray]:
        """One iteration on batch XB with weights wB: assignment (1), centre and norm update (2), truncation,
        merge.

        Returns f_B(C_i), f_B(C_{i+1}) before truncation and the batch's squared distances to the old centres.
        Works on local copies and commits the new state at the end, so a failure leaves the model unchanged.
        """
        st, kfn, k = self._state, self._kernel_fn, self.n_clusters
        it, b = st["it"] + 1, XB.shape[0]
        ids, P, owner, w, age, N = st["ids"], st["points"], st["owner"], st["w"], st["age"], st["N"]
        # (1): distances of the batch to every centre
        Kb = kfn(XB, P)  # b x L
        W = np.zeros((len(w), k))
        W[np.arange(len(w)), owner] = w
        cross = Kb @ W
        diagB = kernel_diagonal(kfn, XB, self.kernel)
        D = diagB[:, None] - 2 * cross + N[None, :]
        labels = np.argmin(D, axis=1)
        d_own = np.maximum(D[np.arange(b), labels], 0)
        w_total = float(wB.sum())
        if not w_total > 0:
            raise ValueError("sample_weight of the batch must have a positive sum")
        f_old = float((wB * d_own).sum() / w_total)
        counts = np.bincount(labels, weights=wB, minlength=k)  # weight assigned to each centre
        a = self._rates(counts, st["seen"], w_total)
        seen = st["seen"] + counts
        # (2) before truncation, for the stopping statistic: C' = (1 - a) C + a cm(B_j) with the weighted batch
        # mean cm(B_j); A[x, j] = a_j w_x / W_j for the batch points x assigned to j
        A = np.zeros((b, k))
        A[np.arange(b), labels] = a[labels] * wB / np.where(counts > 0, counts, 1.0)[labels]
        KBB_A = kfn(XB, XB) @ A
        AKA = np.einsum("ij,ij->j", A, KBB_A)
        N_pre = (1 - a) ** 2 * N + 2 * (1 - a) * np.einsum("ij,ij->j", A, cross) + AKA
        D_pre = diagB[:, None] - 2 * ((1 - a)[None, :] * cross + KBB_A) + N_pre[None, :]
        f_new = float((wB * np.maximum(D_pre.min(axis=1), 0)).sum() / w_total)
        # truncation of the old centre C_j = kept + dropped (it commutes with the (1 - a) scaling): drop what was
        # added more than tau batches ago, keeping the cross terms and N_j exact
        if self.tau is not None:
            drop = age <= it - self.tau  # after appending batch it, batches it-tau+1..it remain
            for j in np.unique(owner[drop]):
                mine = owner == j
                if drop[mine].all():  # a centre idle for tau batches keeps its latest entries
                    drop[mine & (age == age[mine].max())] = False
            if drop.any():
                keep = ~drop
                W_drop = np.zeros((int(drop.sum()), k))
                W_drop[np.arange(W_drop.shape[0]), owner[drop]] = w[drop]
                cross = cross - Kb[:, drop] @ W_drop
                N = N.copy()
                for j in np.unique(owner[drop]):  # per centre: |D_j| (|K_j| + |D_j|) kernel values
                    dj, kj = drop & (owner == j), keep & (owner == j)
                    wd, wk = w[dj], w[kj]
                    # ||C - D||^2 = ||C||^2 - 2<K, D> - ||D||^2 for C = K + D (kept + dropped)
                    N[j] = N[j] - 2 * (wd @ kfn(P[dj], P[kj]) @ wk) - wd @ kfn(P[dj], P[dj]) @ wd
                if self.truncation == "renormalize":
                    total = np.bincount(owner, weights=w, minlength=k)
                    kept = np.bincount(owner[keep], weights=w[keep], minlength=k)
                    scale = np.where(kept > 0, total / np.where(kept > 0, kept, 1), 1.0)
                    # scaling the kept centre by s_j scales its cross terms by s_j and N_j by s_j^2
                    cross, N, w = cross * scale[None, :], N * scale**2, w * scale[owner]
                ids, P, owner, w, age = ids[keep], P[keep], owner[keep], w[keep], age[keep]
        N = (1 - a) ** 2 * N + 2 * (1 - a) * np.einsum("ij,ij->j", A, cross) + AKA
        w = w * (1 - a)[owner]
        # append the batch points (weight a_j / b_j), merging repeated (centre, point) pairs by identity
        new = a[labels] > 0
        ids, P, owner, w, age = _merge_support(
            np.concatenate([ids, ids_B[new]]),
            np.vstack([P, XB[new]]),
            np.concatenate([owner, labels[new]]),
            np.concatenate([w, A[np.arange(b), labels][new]]),
            np.concatenate([age, np.full(int(new.sum()), it)]),
        )
        # a centre that stays empty is re-seeded at the batch point farthest from its nearest centre
        idle = np.where(counts > 0, 0, st["idle"] + 1)
        next_seed_id = st["next_seed_id"]
        n_reassigned = 0
        if self.reassign_after is not None and (idle >= self.reassign_after).any():
            order = np.argsort(-d_own)
            for rank, j in enumerate(np.flatnonzero(idle >= self.reassign_after)):
                x = order[min(rank, b - 1)]
                keep = owner != j
                ids, P, owner, w, age = (
                    np.append(ids[keep], next_seed_id),
                    np.vstack([P[keep], XB[x : x + 1]]),
                    np.append(owner[keep], j),
                    np.append(w[keep], 1.0),
                    np.append(age[keep], it),
                )
                next_seed_id -= 1
                seen[j], idle[j] = 0.0, 0
                n_reassigned += 1
            N = _exact_norms(kfn, P, owner, w, k)
        elif it % self.recompute_every == 0:
            N = _exact_norms(kfn, P, owner, w, k)
        st.update(
            ids=ids,
            points=P,
            owner=owner,
            w=w,
            age=age,
            N=N,
            seen=seen,
            idle=idle,
            it=it,
            next_seed_id=next_seed_id,
        )
        self.n_reassigned_ += n_reassigned
        return f_old, f_new, D

    def _finish(self, exact_norms: bool = True) -> None:
        """Publish the centres as fitted attributes. ``exact_norms=False`` keeps the running N_j (exact up to
        rounding, recomputed every ``recompute_every`` steps), so a stream of ``partial_fit`` calls does not pay
        |S_j|^2 kernel evaluations per batch."""
        st = self._state
        self.support_vectors_ = st["points"]
        self.support_owner_ = st["owner"]
        self.support_weights_ = st["w"]
        if exact_norms:
            st["N"] = _exact_norms(self._kernel_fn, st["points"], st["owner"], st["w"], self.n_clusters)
        self.center_norms_ = st["N"]


def _merge_support(ids, points, owner, w, age):
    """Merge repeated (centre, point identity) entries (weights add, the age is the latest); drop zero weights."""
    ids64 = ids.astype(np.int64)
    lo = int(ids64.min())
    span = int(ids64.max()) - lo + 1
    key = owner.astype(np.int64) * span + (ids64 - lo)  # one int64 per (centre, point) pair
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = inv.ravel()
    w_m = np.bincount(inv, weights=w, minlength=len(first))
    age_m = np.zeros(len(first), dtype=int)
    np.maximum.at(age_m, inv, age)
    live = w_m > 0  # entries scaled to zero by a_j = 1 carry nothing: drop them
    f = first[live]
    return ids[f], points[f], owner[f], w_m[live], age_m[live]


def _exact_norms(kfn, points, owner, w, k) -> np.ndarray:
    """N_j = w_j^T K[S_j, S_j] w_j computed exactly, centre by centre (|S_j|^2 kernel evaluations each)."""
    N = np.zeros(k)
    for j in range(k):
        m = owner == j
        if m.any():
            N[j] = float(w[m] @ kfn(points[m], points[m]) @ w[m])
    return N
