"""Spectral distillation of a tree ensemble into a tiny neural map.

Paper: *Minimax Rates and Spectral Distillation for Tree Ensembles* (Vu & Watson, arXiv 2605.11841).

1. The ensemble is a linear smoother ``S`` on the training inputs (forest kernel ``K`` or boosting smoother;
   see :mod:`.smoother`). Take its top ``r`` spectral pairs: ``K v_j = lambda_j v_j`` (forest, ``eigsh``) or
   ``S = U Sigma W^T`` (boosting, thin SVD).
2. Nystrom eigenfunctions at any ``x``: ``psi_j(x) = s(x) w_j / sigma_j`` (forest: ``k(x, X) v_j / lambda_j``).
3. Rank-r surrogate: ``f_r(x) = sum_j c_j psi_j(x)`` with ``c_j = sigma_j w_j^T y`` (forest: ``lambda_j v_j^T y``).
4. Distil: a small MLP ``g_theta: R^p -> R^r`` regresses the (standardized) ``psi(x)`` on the training inputs
   plus jittered copies of them (inside the per-feature data range), labelled for free by the ensemble's
   Nystrom map; the student is ``f~(x) = b + sum_j c_j g_j(x)``. With ``refit_coef=True`` the coefficients are
   refit by least squares so that ``f~`` matches the full ensemble smoother on the same inputs.

``target="direct"`` is the knowledge-distillation ablation the digest names: the same MLP with one output
trained directly on the ensemble's predictions over the same inputs.

Reconstructed [R] (the paper's full text was not available): the augmentation scheme (Gaussian jitter of
``jitter`` x feature std, clipped to the data range), the MLP training loop (Adam, cosine schedule, MSE on
standardized eigenfunction targets weighted by each component's share of the surrogate's variance), and the
coefficient refit against the full smoother's predictions. The student is evaluated in numpy; training is plain
numpy backpropagation with Adam.
For forests the teacher is the kernel smoother ``K y`` (the forest with leaf values recomputed on all training
points, :func:`.smoother.refit_leaf_values`), which differs slightly from a bootstrapped forest's ``predict``.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.ensemble import RandomForestRegressor
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .smoother import TreeSmoother, _ensemble_kind, leaf_membership, smoother_spectrum

__all__ = ["SpectralForestDistiller", "mlp_parameter_count"]


def mlp_parameter_count(n_inputs: int, hidden_layer_sizes: tuple[int, ...], n_outputs: int) -> int:
    """Weights plus biases of a fully connected MLP."""
    sizes = [int(n_inputs), *map(int, hidden_layer_sizes), int(n_outputs)]
    return int(sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:])))


def _mlp_forward(
    X: np.ndarray, weights: list[np.ndarray], biases: list[np.ndarray], activation: str
) -> np.ndarray:
    h = X
    for i, (W, b) in enumerate(zip(weights, biases)):
        h = h @ W + b
        if i < len(weights) - 1:
            h = np.maximum(h, 0.0) if activation == "relu" else np.tanh(h)
    return h


def _train_mlp(
    X: np.ndarray,
    T: np.ndarray,
    weights: np.ndarray,
    hidden: tuple[int, ...],
    activation: str,
    epochs: int,
    batch_size: int,
    lr: float,
    rng: np.random.Generator,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Mini-batch Adam (beta = 0.9, 0.999) on ``mean_j w_j (g_j(x) - t_j)^2`` with a cosine step-size decay.

    Weights start uniform in ``+-1/sqrt(fan_in)`` (the usual default). Returns the layer weights and biases.
    """
    sizes = [X.shape[1], *hidden, T.shape[1]]
    Ws = [rng.uniform(-1, 1, (a, b)) / np.sqrt(a) for a, b in zip(sizes[:-1], sizes[1:])]
    bs = [rng.uniform(-1, 1, b) / np.sqrt(a) for a, b in zip(sizes[:-1], sizes[1:])]
    params = Ws + bs
    m1 = [np.zeros_like(q) for q in params]
    m2 = [np.zeros_like(q) for q in params]
    n = X.shape[0]
    bsz = min(batch_size, n)
    steps = -(-n // bsz)
    total, t = epochs * steps, 0
    L = len(Ws)
    for _ in range(epochs):
        perm = rng.permutation(n)
        for k in range(steps):
            idx = perm[k * bsz : (k + 1) * bsz]
            hs, zs = [X[idx]], []
            for i in range(L):  # forward
                z = hs[-1] @ Ws[i] + bs[i]
                zs.append(z)
                hs.append(z if i == L - 1 else (np.maximum(z, 0.0) if activation == "relu" else np.tanh(z)))
            g = 2.0 * weights * (hs[-1] - T[idx]) / (len(idx) * T.shape[1])
            grads_W, grads_b = [None] * L, [None] * L
            for i in reversed(range(L)):  # backward
                grads_W[i] = hs[i].T @ g
                grads_b[i] = g.sum(axis=0)
                if i > 0:
                    g = g @ Ws[i].T
                    g = g * (zs[i - 1] > 0) if activation == "relu" else g * (1.0 - hs[i] ** 2)
            t += 1
            step = 0.5 * lr * (1.0 + np.cos(np.pi * (t - 1) / total))
            c1, c2 = 1.0 - 0.9**t, 1.0 - 0.999**t
            for q, gq, a, b in zip(params, grads_W + grads_b, m1, m2):
                a *= 0.9
                a += 0.1 * gq
                b *= 0.999
                b += 0.001 * gq * gq
                q -= step * (a / c1) / (np.sqrt(b / c2) + 1e-8)
    return Ws, bs


class SpectralForestDistiller(RegressorMixin, BaseEstimator):
    """Distil a random forest or gradient-boosting regressor into a small MLP through its spectrum.

    Parameters
    ----------
    estimator : teacher ensemble: ``RandomForestRegressor`` / ``ExtraTreesRegressor`` or squared-loss
        ``GradientBoostingRegressor`` (``subsample=1``). ``None`` means
        ``RandomForestRegressor(n_estimators=100, min_samples_leaf=5)``.
    prefit : if True, ``estimator`` is already fitted and used as is (``fit(X, y)`` gets its training data);
        otherwise a clone is fitted on ``X, y``.
    n_components : rank ``r`` of the spectral truncation (``1 <= r <= n - 2``).
    hidden_layer_sizes : widths of the student's hidden layers.
    activation : ``"relu"`` or ``"tanh"``.
    target : ``"spectral"`` (the paper's method) or ``"direct"`` (MLP on the ensemble's predictions).
    n_augment : number of jittered copies of the training inputs added to the distillation set (``>= 0``).
    jitter : jitter scale as a fraction of each feature's standard deviation (``>= 0``).
    refit_coef : refit the output coefficients by least squares against the full smoother's predictions.
    component_weights : ``"contribution"`` weights component ``j`` of the student's loss by its share
        ``c_j^2 Var(psi_j)`` of the surrogate's variance; ``"uniform"`` weights the standardized
        eigenfunctions equally [R].
    max_epochs, batch_size, learning_rate : Adam training of the student.
    random_state : seed for the eigensolver start vector, augmentation and the student's initialisation.

    As with ``SelectFromModel(prefit=True)``, ``sklearn.base.clone`` also clones (and so un-fits) a prefit
    teacher; rebuild with ``SpectralForestDistiller(**d.get_params(deep=False))`` to keep it.

    Attributes
    ----------
    estimator_ : the fitted teacher. smoother_ : its :class:`TreeSmoother` on the training inputs.
    spectrum_ : the top ``r`` eigenvalues (forest) or singular values (boosting), largest first.
    teacher_coef_ : ``c_j = sigma_j w_j^T y``. coef_, intercept_ : the student's output layer over ``g``.
    n_parameters_ : stored numbers of the student (MLP weights and biases, coefficients, intercept, input
        scaler). teacher_nodes_ : total node count of the teacher.
    """

    def __init__(
        self,
        estimator: Any = None,
        *,
        prefit: bool = False,
        n_components: int = 20,
        hidden_layer_sizes: tuple[int, ...] = (32, 32),
        activation: str = "relu",
        target: str = "spectral",
        n_augment: int = 3,
        jitter: float = 0.1,
        refit_coef: bool = True,
        component_weights: str = "contribution",
        max_epochs: int = 100,
        batch_size: int = 1024,
        learning_rate: float = 3e-3,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.prefit = prefit
        self.n_components = n_components
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.target = target
        self.n_augment = n_augment
        self.jitter = jitter
        self.refit_coef = refit_coef
        self.component_weights = component_weights
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.random_state = random_state

    # --- validation --------------------------------------------------------------------------------------
    def _check_params(self, n: int) -> None:
        def _int(name: str, lo: int, hi: float = math.inf) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, Integral) or not lo <= v <= hi:
                raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")

        _int("n_components", 1, n - 2)
        _int("n_augment", 0)
        _int("max_epochs", 1)
        _int("batch_size", 1)
        hls = self.hidden_layer_sizes
        if not isinstance(hls, (tuple, list)) or not all(
            isinstance(h, Integral) and not isinstance(h, bool) and h >= 1 for h in hls
        ):
            raise ValueError(f"hidden_layer_sizes must be a tuple of positive integers, got {hls!r}")
        if self.activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got {self.activation!r}")
        if self.component_weights not in ("uniform", "contribution"):
            raise ValueError(
                f"component_weights must be 'uniform' or 'contribution', got {self.component_weights!r}"
            )
        if self.target not in ("spectral", "direct"):
            raise ValueError(f"target must be 'spectral' or 'direct', got {self.target!r}")
        for name, strict in (("jitter", False), ("learning_rate", True)):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, Real)
                or not np.isfinite(v)
                or v < 0
                or (strict and v == 0)
            ):
                rng = "(0, inf)" if strict else "[0, inf)"
                raise ValueError(f"{name} must be a finite number in {rng}, got {v!r}")
        if not isinstance(self.prefit, bool):
            raise ValueError(f"prefit must be a bool, got {self.prefit!r}")

    # --- fit -----------------------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any) -> SpectralForestDistiller:
        """Fit (or take) the teacher, decompose its smoother on ``X`` and train the student."""
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        n = X.shape[0]
        if n < 4:
            raise ValueError(f"X needs at least 4 rows, got {n}")
        self._check_params(n)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(0, 2**31 - 1))

        teacher = self.estimator
        if teacher is None:
            teacher = RandomForestRegressor(n_estimators=100, min_samples_leaf=5, random_state=seed)
        if self.prefit:
            _ensemble_kind(teacher)  # type / fitted / loss checks
            if teacher.n_features_in_ != X.shape[1]:
                raise ValueError(
                    f"X has {X.shape[1]} features, the prefit estimator expects {teacher.n_features_in_}"
                )
            self.estimator_ = teacher
        else:
            self.estimator_ = clone(teacher).fit(X, y)
            _ensemble_kind(self.estimator_)
        self.kind_ = _ensemble_kind(self.estimator_)
        self.teacher_nodes_ = int(
            sum(t.tree_.node_count for t in np.asarray(self.estimator_.estimators_).ravel())
        )

        # 1-3: spectrum, Nystrom leaf table for psi, coefficients c_j, leaf table of the full smoother S y
        self.smoother_ = TreeSmoother(self.estimator_, X)
        r = int(self.n_components)
        sig, U, W = smoother_spectrum(self.smoother_, r, random_state=rng)
        if np.any(sig <= 1e-12):
            raise ValueError(
                f"n_components={r} reaches numerically zero spectral values; use fewer components"
            )
        self.spectrum_ = sig
        self.teacher_coef_ = sig * (W.T @ y)
        self._psi_table = self.smoother_.leaf_table(W / sig)
        self._full_table = self.smoother_.leaf_table(y)

        # 4: distillation inputs: training points plus jittered copies inside the data range
        X_all = self._augment(X, rng)
        M_all = leaf_membership(self.estimator_, X_all)  # one pass through the trees for all targets
        teacher_full = self._full_table[0] + M_all @ self._full_table[1]  # (n_all, 1): s(x) y
        if self.target == "spectral":
            targets = self._psi_table[0] + M_all @ self._psi_table[1]  # psi(x), (n_all, r)
        else:
            targets = teacher_full
        if self.target == "spectral" and self.component_weights == "contribution":
            # weight component j by its share of the surrogate's variance, c_j^2 Var(psi_j)
            w = self.teacher_coef_**2 * targets.var(axis=0)
            w = w / w.sum() * w.size
        else:
            w = np.ones(targets.shape[1])
        self._train_student(X_all, targets, seed, w)

        # output layer over g: fold target standardization, optionally refit by least squares
        G = self._student_outputs(X_all)  # standardized-space outputs of the MLP
        f_full = teacher_full[:, 0]
        if self.target == "spectral" and not self.refit_coef:
            coef = self.teacher_coef_ * self._t_scale
            intercept = float(self.teacher_coef_ @ self._t_mean)
        else:
            A = np.column_stack([G, np.ones(G.shape[0])])
            sol = np.linalg.lstsq(A, f_full, rcond=None)[0]
            coef, intercept = sol[:-1], float(sol[-1])
        self.coef_ = coef
        self.intercept_ = intercept
        self.n_parameters_ = int(
            mlp_parameter_count(X.shape[1], tuple(self.hidden_layer_sizes), G.shape[1])
            + G.shape[1]  # output coefficients
            + 1  # intercept
            + 2 * X.shape[1]  # input standardization
        )
        return self

    def _augment(self, X: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
        if self.n_augment == 0 or self.jitter == 0:
            return X
        lo, hi = X.min(axis=0), X.max(axis=0)
        scale = self.jitter * X.std(axis=0)
        copies = np.repeat(X, self.n_augment, axis=0)
        copies = copies + rng.standard_normal(copies.shape) * scale
        return np.vstack([X, np.clip(copies, lo, hi)])

    def _train_student(self, X_all: np.ndarray, T: np.ndarray, seed: int, weights: np.ndarray) -> None:
        """Adam on the weighted MSE of standardized targets, cosine-decayed step size (numpy backprop)."""
        self._x_mean = X_all.mean(axis=0)
        self._x_scale = np.where(X_all.std(axis=0) > 0, X_all.std(axis=0), 1.0)
        self._t_mean = T.mean(axis=0)
        self._t_scale = np.where(T.std(axis=0) > 0, T.std(axis=0), 1.0)
        Xs = (X_all - self._x_mean) / self._x_scale
        Ts = (T - self._t_mean) / self._t_scale
        self.weights_, self.biases_ = _train_mlp(
            Xs,
            Ts,
            weights,
            tuple(int(h) for h in self.hidden_layer_sizes),
            self.activation,
            int(self.max_epochs),
            int(self.batch_size),
            float(self.learning_rate),
            np.random.default_rng(seed),
        )

    # --- prediction ----------------------------------------------------------------------------------------
    def _student_outputs(self, X: np.ndarray) -> np.ndarray:
        Xs = (X - self._x_mean) / self._x_scale
        return _mlp_forward(Xs, self.weights_, self.biases_, self.activation)

    def _check_input(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "coef_")
        return validate_data(self, X, dtype=np.float64, reset=False)

    def transform(self, X: Any) -> np.ndarray:
        """The student's learned eigenfunctions ``g(x)`` (in the original ``psi`` scale for ``"spectral"``)."""
        X = self._check_input(X)
        return self._student_outputs(X) * self._t_scale + self._t_mean

    def predict(self, X: Any) -> np.ndarray:
        """Predictions of the distilled student ``b + sum_j coef_j g_j(x)`` (no tree is touched)."""
        X = self._check_input(X)
        return self._student_outputs(X) @ self.coef_ + self.intercept_

    def teacher_transform(self, X: Any) -> np.ndarray:
        """Nystrom eigenfunctions ``psi_j(x) = s(x) w_j / sigma_j`` of the teacher (one pass through the trees)."""
        X = self._check_input(X)
        return self.smoother_.apply_table(X, *self._psi_table)

    def teacher_predict(self, X: Any, rank: int | None = None) -> np.ndarray:
        """Teacher smoother ``s(x) y`` (``rank=None``) or its rank-r spectral surrogate ``f_r(x)``."""
        X = self._check_input(X)
        if rank is None:
            return self.smoother_.apply_table(X, *self._full_table)[:, 0]
        if isinstance(rank, bool) or not isinstance(rank, Integral) or not 1 <= rank <= self.spectrum_.size:
            raise ValueError(f"rank must be None or an integer in [1, {self.spectrum_.size}], got {rank!r}")
        psi = self.smoother_.apply_table(X, *self._psi_table)
        return psi[:, :rank] @ self.teacher_coef_[:rank]
