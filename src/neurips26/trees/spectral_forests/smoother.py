"""Tree ensembles as linear smoothers: the random-forest kernel and the gradient-boosting smoother matrix.

Paper: *Minimax Rates and Spectral Distillation for Tree Ensembles* (Vu & Watson, arXiv 2605.11841).

Random forest (B trees, training inputs ``X``). The forest kernel is the leaf co-membership average

    k(x, x') = (1/B) sum_b 1{x' in leaf_b(x)} / |leaf_b(x)|,          |leaf| = training points in that leaf,

so on training data ``K = M diag(1 / (B |leaf|)) M^T`` with ``M`` the sparse ``n x #nodes`` membership matrix
(one 1 per tree and row). ``K`` is symmetric PSD and row-stochastic, and ``K y`` is exactly the prediction of
the forest whose leaf values are the means of ``y`` over *all* training points in the leaf
(:func:`refit_leaf_values`; with ``bootstrap=True`` the fitted forest differs slightly from ``K y``).

Gradient boosting (squared loss, fixed tree structures, shrinkage ``nu``). With ``H_m`` the leaf-averaging
matrix of round ``m`` and ``J = 1 1^T / n``,

    S_0 = J,   S_m = S_{m-1} + nu H_m (I - S_{m-1})   <=>   I - S = (I - nu H_M) ... (I - nu H_1) (I - J),

so ``S y`` is the boosted prediction on the training points; :class:`TreeSmoother` applies ``S`` and
``S^T`` in ``O(n M)`` per column from the product form and never forms the ``n x n`` matrix.

For any target matrix ``Z`` the out-of-sample smoother row ``s(x) Z`` is a *leaf table*: a bias plus a sum
over trees of one row per leaf (``s(x) Z = b + M_x Theta``); this is how Nystrom eigenfunctions are
evaluated at new points with one pass of ``apply`` through the ensemble.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import LinearOperator, eigsh, svds
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, check_is_fitted

__all__ = [
    "TreeSmoother",
    "leaf_membership",
    "forest_kernel",
    "refit_leaf_values",
    "smoother_spectrum",
    "eigen_decay_exponent",
    "minimax_rate_exponent",
]

_FORESTS = (RandomForestRegressor, ExtraTreesRegressor)


def _ensemble_kind(estimator: Any) -> str:
    """``"forest"`` or ``"boosting"``; raises TypeError for anything else, ValueError if unfitted/unsupported."""
    if isinstance(estimator, _FORESTS):
        kind = "forest"
    elif isinstance(estimator, GradientBoostingRegressor):
        kind = "boosting"
    else:
        raise TypeError(
            "estimator must be a fitted RandomForestRegressor, ExtraTreesRegressor or "
            f"GradientBoostingRegressor, got {type(estimator).__name__}"
        )
    try:
        check_is_fitted(estimator, "estimators_")
    except Exception as exc:  # sklearn raises NotFittedError (a ValueError subclass)
        raise ValueError(f"estimator must be fitted before use: {exc}") from exc
    if kind == "boosting":
        if estimator.loss != "squared_error":
            raise ValueError(
                f"estimator: only loss='squared_error' boosting is a linear smoother, got {estimator.loss!r}"
            )
        if estimator.init is not None:
            raise ValueError(
                f"estimator: init must be None (mean initialisation, S_0 = 11^T/n), got {estimator.init!r}"
            )
        if estimator.subsample != 1.0:
            raise ValueError(
                f"estimator: subsample must be 1.0 for the smoother form, got {estimator.subsample}"
            )
    return kind


def _trees(estimator: Any) -> list[Any]:
    return list(np.asarray(estimator.estimators_).ravel())


def _check_X(X: Any, estimator: Any, name: str = "X") -> np.ndarray:
    X = check_array(X, dtype=np.float64, ensure_all_finite=True, input_name=name)
    n_features = estimator.n_features_in_
    if X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features, the estimator expects {n_features}")
    return X


def leaf_membership(estimator: Any, X: Any) -> sparse.csr_matrix:
    """Sparse ``n x (total nodes)`` matrix with a 1 at (i, node) for each tree's leaf containing ``x_i``.

    Node ids from ``apply`` are per tree; they are offset by the cumulative node counts so that the
    columns of all trees are disjoint.
    """
    _ensemble_kind(estimator)
    X = _check_X(X, estimator)
    trees = _trees(estimator)
    n, n_trees = X.shape[0], len(trees)
    leaves = np.asarray(estimator.apply(X)).reshape(n, n_trees)
    offsets = np.concatenate([[0], np.cumsum([t.tree_.node_count for t in trees])])
    cols = (leaves + offsets[:-1]).ravel()
    indptr = np.arange(0, n * n_trees + 1, n_trees)
    return sparse.csr_matrix((np.ones(n * n_trees), cols, indptr), shape=(n, int(offsets[-1])))


class TreeSmoother:
    """The ensemble as a linear smoother ``y_hat = S y`` on the training inputs ``X``.

    Parameters
    ----------
    estimator : a fitted ``RandomForestRegressor`` / ``ExtraTreesRegressor`` (forest kernel ``K``) or a
        fitted squared-loss ``GradientBoostingRegressor`` with ``subsample=1`` (boosting smoother ``S``).
    X : training inputs, shape ``(n, p)``. Leaf sizes (forest) and leaf averages (boosting) are taken over
        these points. For boosting, ``S y`` reproduces ``estimator.predict(X)`` exactly when ``X, y`` are the
        data the booster was fitted on.
    """

    def __init__(self, estimator: Any, X: Any) -> None:
        self.kind = _ensemble_kind(estimator)
        self.estimator = estimator
        X = _check_X(X, estimator)
        if X.shape[0] < 2:
            raise ValueError(f"X needs at least 2 rows, got {X.shape[0]}")
        self.n = X.shape[0]
        self.membership = leaf_membership(estimator, X)  # n x total_nodes
        counts = np.asarray(self.membership.sum(axis=0)).ravel()
        self.n_trees = len(_trees(estimator))
        if self.kind == "forest":
            # diag(1 / (B |leaf|)), zero for internal nodes and leaves with no training point
            self._leaf_weight = np.divide(
                1.0, self.n_trees * counts, out=np.zeros_like(counts), where=counts > 0
            )
        else:
            self.learning_rate = float(estimator.learning_rate)
            offsets = np.concatenate([[0], np.cumsum([t.tree_.node_count for t in _trees(estimator)])])
            self._offsets = offsets
            leaves = self.membership.indices.reshape(self.n, self.n_trees)  # global leaf column per round
            self._round_leaves = [leaves[:, m] - offsets[m] for m in range(self.n_trees)]
            # P_m = diag(1/|leaf|) M_m^T: per-leaf averaging of the rows of a block (empty leaves stay 0)
            self._averagers = []
            for m, lv in enumerate(self._round_leaves):
                n_nodes = int(offsets[m + 1] - offsets[m])
                cnt = np.bincount(lv, minlength=n_nodes).astype(np.float64)
                P = sparse.csr_matrix((1.0 / cnt[lv], (lv, np.arange(self.n))), shape=(n_nodes, self.n))
                self._averagers.append(P)

    # --- boosting helpers: (I - nu H_m) applied to a block of columns ------------------------------------
    def _leaf_means(self, m: int, R: np.ndarray) -> np.ndarray:
        """Per-leaf mean of the rows of ``R`` in round ``m`` (rows of the leaf table ``P_m R``)."""
        return np.asarray(self._averagers[m] @ R)

    def _residual_product(self, Z: np.ndarray, transpose: bool) -> np.ndarray:
        """``(I - S) Z`` (or ``(I - S)^T Z``) for boosting by the product form."""
        nu = self.learning_rate
        rounds = range(self.n_trees)
        R = Z.copy()
        if not transpose:
            R -= R.mean(axis=0)
            for m in rounds:
                R -= nu * self._leaf_means(m, R)[self._round_leaves[m]]
        else:
            for m in reversed(rounds):  # H_m is symmetric
                R -= nu * self._leaf_means(m, R)[self._round_leaves[m]]
            R -= R.mean(axis=0)
        return R

    # --- the smoother on training points -----------------------------------------------------------------
    def matmat(self, Z: np.ndarray) -> np.ndarray:
        """``S Z`` for a ``(n, k)`` (or ``(n,)``) array."""
        Z = np.asarray(Z, dtype=np.float64)
        vec = Z.ndim == 1
        Z2 = Z[:, None] if vec else Z
        if Z2.shape[0] != self.n:
            raise ValueError(f"Z must have {self.n} rows, got {Z2.shape[0]}")
        if self.kind == "forest":
            out = self.membership @ (self._leaf_weight[:, None] * (self.membership.T @ Z2))
        else:
            out = Z2 - self._residual_product(Z2, transpose=False)
        return out[:, 0] if vec else out

    def rmatmat(self, Z: np.ndarray) -> np.ndarray:
        """``S^T Z`` (equal to ``S Z`` for the symmetric forest kernel)."""
        Z = np.asarray(Z, dtype=np.float64)
        if self.kind == "forest":
            return self.matmat(Z)
        vec = Z.ndim == 1
        Z2 = Z[:, None] if vec else Z
        if Z2.shape[0] != self.n:
            raise ValueError(f"Z must have {self.n} rows, got {Z2.shape[0]}")
        out = Z2 - self._residual_product(Z2, transpose=True)
        return out[:, 0] if vec else out

    def as_linear_operator(self) -> LinearOperator:
        return LinearOperator(
            (self.n, self.n),
            matvec=self.matmat,
            rmatvec=self.rmatmat,
            matmat=self.matmat,
            rmatmat=self.rmatmat,
            dtype=np.float64,
        )

    def dense(self) -> np.ndarray:
        """The ``n x n`` smoother matrix (for small ``n``: tests, diagnostics)."""
        return self.matmat(np.eye(self.n))

    # --- out-of-sample rows through a leaf table --------------------------------------------------------
    def leaf_table(self, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(bias, Theta)`` with ``s(x) Z = bias + M_x Theta`` for any input ``x``.

        Forest: ``bias = 0``, ``Theta = diag(1/(B |leaf|)) M^T Z``. Boosting: ``bias = mean(Z)`` and
        ``Theta`` stacks ``nu`` times the per-round leaf means of the running residual of ``Z``.
        """
        Z = np.asarray(Z, dtype=np.float64)
        Z2 = Z[:, None] if Z.ndim == 1 else Z
        if Z2.shape[0] != self.n:
            raise ValueError(f"Z must have {self.n} rows, got {Z2.shape[0]}")
        if self.kind == "forest":
            return np.zeros(Z2.shape[1]), self._leaf_weight[:, None] * (self.membership.T @ Z2)
        nu = self.learning_rate
        bias = Z2.mean(axis=0)
        R = Z2 - bias
        theta = np.zeros((int(self._offsets[-1]), Z2.shape[1]))
        for m in range(self.n_trees):
            means = self._leaf_means(m, R)
            theta[self._offsets[m] : self._offsets[m + 1]] = nu * means
            R -= nu * means[self._round_leaves[m]]
        return bias, theta

    def apply_table(self, X: Any, bias: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """Evaluate ``bias + M_x Theta`` at the rows of ``X``."""
        return bias + leaf_membership(self.estimator, X) @ theta


def forest_kernel(forest: Any, X_train: Any, X: Any = None) -> sparse.csr_matrix:
    """Random-forest kernel ``K(X, X_train)`` as a sparse matrix (``X = X_train`` when omitted).

    ``k(x, x_i) = (1/B) sum_b 1{x_i in leaf_b(x)} / |leaf_b(x)|``; each row sums to 1 when every leaf reached
    by ``x`` holds at least one training point.
    """
    if _ensemble_kind(forest) != "forest":
        raise TypeError("forest must be a RandomForestRegressor or ExtraTreesRegressor")
    sm = TreeSmoother(forest, X_train)
    Mx = sm.membership if X is None else leaf_membership(forest, X)
    return sparse.csr_matrix(Mx @ sparse.diags(sm._leaf_weight) @ sm.membership.T)


def refit_leaf_values(forest: Any, X: Any, y: Any) -> Any:
    """A copy of ``forest`` whose leaf values are the means of ``y`` over the points of ``X`` in each leaf.

    The returned forest *is* the kernel smoother: ``refit.predict(x) == forest_kernel(forest, X, x) @ y``.
    Leaves without a point of ``X`` keep their fitted value.
    """
    if _ensemble_kind(forest) != "forest":
        raise TypeError("forest must be a RandomForestRegressor or ExtraTreesRegressor")
    X = _check_X(X, forest)
    y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must be 1-d with {X.shape[0]} entries, got shape {y.shape}")
    out = copy.deepcopy(forest)
    leaves = out.apply(X)
    for b, tree in enumerate(out.estimators_):
        nc = tree.tree_.node_count
        cnt = np.bincount(leaves[:, b], minlength=nc)
        sums = np.bincount(leaves[:, b], weights=y, minlength=nc)
        has = cnt > 0
        tree.tree_.value[has, 0, 0] = sums[has] / cnt[has]
    return out


def smoother_spectrum(
    smoother: TreeSmoother, n_components: int, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top ``n_components`` spectral pairs of the smoother, largest first.

    Forest: eigenpairs of the symmetric PSD ``K`` (``eigsh``); returns ``(lam, V, V)``. Boosting: thin SVD
    ``S = U Sigma W^T`` (``svds``); returns ``(sigma, U, W)``. In both cases the Nystrom eigenfunctions are
    ``psi_j(x) = s(x) w_j / sigma_j`` and the rank-r surrogate is ``f_r = sum_j sigma_j psi_j(x) (w_j^T y)``.
    """
    if not isinstance(n_components, (int, np.integer)) or not 1 <= n_components < smoother.n - 1:
        raise ValueError(f"n_components must be an integer in [1, {smoother.n - 2}], got {n_components!r}")
    rng = check_random_state(random_state)
    v0 = rng.uniform(0.5, 1.5, smoother.n)  # deterministic start vector for ARPACK
    op = smoother.as_linear_operator()
    if smoother.kind == "forest":
        lam, V = eigsh(op, k=int(n_components), which="LA", v0=v0)
        order = np.argsort(lam)[::-1]
        lam, V = lam[order], V[:, order]
        V = V * _sign_convention(V)
        return lam, V, V
    U, s, Wt = svds(op, k=int(n_components), v0=v0, random_state=rng)
    order = np.argsort(s)[::-1]
    s, U, W = s[order], U[:, order], Wt[order].T
    sign = _sign_convention(U)
    return s, U * sign, W * sign


def _sign_convention(U: np.ndarray) -> np.ndarray:
    """Signs making each column's largest-magnitude entry positive (eigenvectors are defined up to sign)."""
    idx = np.argmax(np.abs(U), axis=0)
    return np.where(U[idx, np.arange(U.shape[1])] < 0, -1.0, 1.0)


def eigen_decay_exponent(values: Any, start: int = 2) -> float:
    """Power-law exponent ``a`` of ``lambda_j ~ j^{-a}``, fitted by least squares on ``log lambda_j`` for
    ``j >= start`` (1-based; the first eigenvalue of a row-stochastic kernel is the constant mode)."""
    lam = np.asarray(values, dtype=np.float64).ravel()
    if not isinstance(start, (int, np.integer)) or start < 1:
        raise ValueError(f"start must be an integer >= 1, got {start!r}")
    j = np.arange(1, lam.size + 1)
    keep = (j >= start) & (lam > 0)
    if keep.sum() < 3:
        raise ValueError("values needs at least 3 positive entries from position start on")
    slope = np.polyfit(np.log(j[keep]), np.log(lam[keep]), 1)[0]
    return float(-slope)


def minimax_rate_exponent(decay_exponent: float) -> float:
    """Risk exponent ``2s/(2s+1)`` of the minimax rate ``n^{-2s/(2s+1)}`` when eigenvalues decay as ``j^{-2s}``."""
    a = float(decay_exponent)
    if not np.isfinite(a) or a <= 0:
        raise ValueError(f"decay_exponent must be a positive finite number, got {decay_exponent!r}")
    return a / (a + 1.0)
