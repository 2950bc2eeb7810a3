"""Spectral distillation of a tree ensemble into a tiny neural map.

Paper: *Minimax Rates and Spectral Distillation for Tree Ensembles* (Vu & Watson, arXiv 2605.11841).

1. The ensemble is a linear smoother ``S`` on the training inputs (forest kernel ``K`` or boosting smoother;
   see :mod:`.smoother`). Take its top ``r`` spectral pairs: ``K v_j = lambda_j v_j`` (forest, ``eigsh``) or
   ``S = U Sigma W^T`` (boosting, thin SVD).
2. Nystrom eigenfunctions at any ``x``: ``psi_j(x) = s(x) w_j / sigma_j`` (forest: ``k(x, X) v_j / lambda_j``).
3. Rank-r surrogate: ``f_r(x) = sum_j c_j psi_j(x)`` with ``c_j = sigma_j w_j^T y`` (forest: ``lambda_j v_j^T y``).
   The ``r`` components are the ``r`` of the leading ``n_candidates`` with the largest ``c_j^2``
   (``component_selection="contribution"``, the default: on the training points ``||f_r||^2 = sum_j c_j^2``, so
   this keeps the most of the smoother's fit for a given ``r``) or the ``r`` leading ones (``"top"``, the
   digest's literal choice) [R].
4. Distil: a small MLP ``g_theta: R^p -> R^r`` regresses the (standardized) ``psi(x)`` on the training inputs
   plus jittered copies of them (inside the per-feature data range), labelled for free by the ensemble's
   Nystrom map; the student is ``f~(x) = b + sum_j c_j g_j(x)``. With ``refit_coef=True`` the coefficients are
   refit by least squares so that ``f~`` matches the full ensemble smoother on the same inputs.

``target="direct"`` is the knowledge-distillation ablation the digest names: the same MLP with one output
trained directly on the ensemble's predictions over the same inputs.

Reconstructed [R] (the paper's full text was not available): the augmentation scheme (Gaussian jitter of
``jitter`` x feature std, clipped to the data range), the student's loss (MSE on standardized eigenfunction
targets weighted by each component's share of the surrogate's variance: scikit-learn's ``MLPRegressor``
trained with Adam on the targets scaled by ``sqrt(w_j)``, which is the same weighted loss), the contribution
selection of components, and the coefficient refit against the full smoother's predictions.
For forests the teacher is the kernel smoother ``K y`` (the forest with leaf values recomputed on all training
points, :func:`.smoother.refit_leaf_values`), which differs slightly from a bootstrapped forest's ``predict``.
"""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .smoother import _FORESTS, TreeSmoother, _ensemble_kind, leaf_membership, smoother_spectrum

__all__ = ["SpectralForestDistiller", "mlp_parameter_count", "student_layers_for_budget"]


def mlp_parameter_count(n_inputs: int, hidden_layer_sizes: tuple[int, ...], n_outputs: int) -> int:
    """Weights plus biases of a fully connected MLP."""
    sizes = [int(n_inputs), *map(int, hidden_layer_sizes), int(n_outputs)]
    return int(sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:])))


def student_layers_for_budget(
    n_inputs: int,
    n_components: int,
    max_parameters: int,
    n_hidden: int = 2,
    max_width: int = 32,
) -> tuple[int, ...]:
    """The widest equal-width hidden layers (at most ``max_width``) whose student fits ``max_parameters``.

    The count is the one :class:`SpectralForestDistiller` stores in ``n_parameters_``: MLP weights and biases,
    ``n_components`` output coefficients, the intercept and the input standardization (``2 n_inputs``).
    Raises ValueError when not even width 1 fits.
    """
    for name, v, lo in (
        ("n_inputs", n_inputs, 1),
        ("n_components", n_components, 1),
        ("max_parameters", max_parameters, 1),
        ("n_hidden", n_hidden, 1),
        ("max_width", max_width, 1),
    ):
        if isinstance(v, bool) or not isinstance(v, Integral) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    extra = n_components + 1 + 2 * n_inputs
    for w in range(int(max_width), 0, -1):
        layers = (w,) * int(n_hidden)
        if mlp_parameter_count(n_inputs, layers, n_components) + extra <= max_parameters:
            return layers
    raise ValueError(
        f"max_parameters={max_parameters} is below the smallest student ({n_hidden} hidden layers of width 1, "
        f"{n_components} components, {n_inputs} inputs)"
    )


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
    component_selection : ``"contribution"`` (default: the ``r`` of the leading ``n_candidates`` pairs with the
        largest ``c_j^2``) or ``"top"`` (the ``r`` leading spectral pairs, the digest's literal choice) [R]. On
        Friedman1 the contribution choice keeps more of the forest at the same ``r`` (see the experiment).
    n_candidates : pairs computed for ``"contribution"`` (``r <= n_candidates <= n - 2``); ``None`` means
        ``min(n - 2, 5 r)``. Ignored for ``"top"``.
    hidden_layer_sizes : widths of the student's hidden layers, or ``"budget"`` (default): two hidden layers of
        the widest width <= 32 whose stored parameters (``n_parameters_``) fit ``max_size_ratio`` of the
        teacher's node count (:func:`student_layers_for_budget`); a teacher too small for any such student
        (a 300-round depth-3 boosting has about 4500 nodes) gets the 2x32 student with a warning.
    max_size_ratio : the size budget of ``"budget"``, as a fraction of the teacher's nodes (the digest's 1/100).
    activation : ``"relu"`` or ``"tanh"``.
    target : ``"spectral"`` (the paper's method) or ``"direct"`` (MLP on the ensemble's predictions).
    n_augment : number of jittered copies of the training inputs added to the distillation set (``>= 0``).
    jitter : jitter scale as a fraction of each feature's standard deviation (``>= 0``).
    refit_coef : refit the output coefficients by least squares against the full smoother's predictions.
    component_weights : ``"contribution"`` weights component ``j`` of the student's loss by its share
        ``c_j^2 Var(psi_j)`` of the surrogate's variance; ``"uniform"`` weights the standardized
        eigenfunctions equally [R].
    max_epochs, batch_size, learning_rate : Adam training of the student (scikit-learn ``MLPRegressor``: at
        most ``max_epochs`` passes, stopping early once the loss stalls for 10 epochs).
    alpha : L2 penalty of the student's weights (``MLPRegressor(alpha=...)``, ``>= 0``).
    n_init : students trained from different initialisations (``>= 1``); the one whose predictions are closest
        to the ensemble's on the distillation inputs is kept (an unlucky initialisation can cost several points
        of R^2).
    random_state : seed for the eigensolver start vector, augmentation and the student's initialisation.

    As with ``SelectFromModel(prefit=True)``, ``sklearn.base.clone`` also clones (and so un-fits) a prefit
    teacher; rebuild with ``SpectralForestDistiller(**d.get_params(deep=False))`` to keep it.

    Attributes
    ----------
    estimator_ : the fitted teacher. smoother_ : its :class:`TreeSmoother` on the training inputs.
    spectrum_ : the ``r`` kept eigenvalues (forest) or singular values (boosting), in the order used (largest
        first for ``"top"``, largest ``c_j^2`` first for ``"contribution"``).
    components_ : indices (0-based, by decreasing spectral value) of the kept pairs, in the order used.
    teacher_coef_ : ``c_j = sigma_j w_j^T y``. coef_, intercept_ : the student's output layer over ``g``.
    student_ : the fitted ``MLPRegressor`` (on standardized inputs). distillation_mse_ : mean squared difference
        between the student and the ensemble on the distillation inputs (the ``n_init`` selection criterion).
    hidden_layer_sizes_ : the student's hidden layers (sized to the budget for ``"budget"``).
    n_parameters_ : stored numbers of the student (MLP weights and biases, coefficients, intercept, input
        scaler). teacher_nodes_ : total node count of the teacher.
    """

    def __init__(
        self,
        estimator: Any = None,
        *,
        prefit: bool = False,
        n_components: int = 20,
        component_selection: str = "contribution",
        n_candidates: int | None = None,
        hidden_layer_sizes: tuple[int, ...] | str = "budget",
        max_size_ratio: float = 0.01,
        activation: str = "relu",
        target: str = "spectral",
        n_augment: int = 3,
        jitter: float = 0.1,
        refit_coef: bool = True,
        component_weights: str = "contribution",
        max_epochs: int = 100,
        batch_size: int = 1024,
        learning_rate: float = 3e-3,
        alpha: float = 1e-5,
        n_init: int = 1,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.prefit = prefit
        self.n_components = n_components
        self.component_selection = component_selection
        self.n_candidates = n_candidates
        self.hidden_layer_sizes = hidden_layer_sizes
        self.max_size_ratio = max_size_ratio
        self.activation = activation
        self.target = target
        self.n_augment = n_augment
        self.jitter = jitter
        self.refit_coef = refit_coef
        self.component_weights = component_weights
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.n_init = n_init
        self.random_state = random_state

    # --- validation --------------------------------------------------------------------------------------
    def _check_params(self, n: int) -> None:
        def _int(name: str, lo: int, hi: float = math.inf) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, Integral) or not lo <= v <= hi:
                raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")

        _int("n_components", 1, n - 2)
        if self.component_selection not in ("top", "contribution"):
            raise ValueError(
                f"component_selection must be 'top' or 'contribution', got {self.component_selection!r}"
            )
        if self.n_candidates is not None:
            _int("n_candidates", int(self.n_components), n - 2)
        _int("n_augment", 0)
        _int("max_epochs", 1)
        _int("batch_size", 1)
        _int("n_init", 1)
        hls = self.hidden_layer_sizes
        if not (isinstance(hls, str) and hls == "budget") and (
            not isinstance(hls, (tuple, list))
            or not all(isinstance(h, Integral) and not isinstance(h, bool) and h >= 1 for h in hls)
        ):
            raise ValueError(
                f"hidden_layer_sizes must be 'budget' or a tuple of positive integers, got {hls!r}"
            )
        if self.activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got {self.activation!r}")
        if self.component_weights not in ("uniform", "contribution"):
            raise ValueError(
                f"component_weights must be 'uniform' or 'contribution', got {self.component_weights!r}"
            )
        if self.target not in ("spectral", "direct"):
            raise ValueError(f"target must be 'spectral' or 'direct', got {self.target!r}")
        for name, strict in (
            ("jitter", False),
            ("learning_rate", True),
            ("alpha", False),
            ("max_size_ratio", True),
        ):
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
            if not isinstance(teacher, (*_FORESTS, GradientBoostingRegressor)):  # before paying for a fit
                _ensemble_kind(teacher)  # raises its TypeError
            self.estimator_ = clone(teacher).fit(X, y)
            _ensemble_kind(self.estimator_)
        self.kind_ = _ensemble_kind(self.estimator_)
        self.teacher_nodes_ = int(
            sum(t.tree_.node_count for t in np.asarray(self.estimator_.estimators_).ravel())
        )

        self.hidden_layer_sizes_ = self._student_layers(X.shape[1])

        # 1-3: spectrum, Nystrom leaf table for psi, coefficients c_j, leaf table of the full smoother S y
        self.smoother_ = TreeSmoother(self.estimator_, X)
        r = int(self.n_components)
        if self.component_selection == "top":
            k = r
        else:
            k = min(n - 2, 5 * r) if self.n_candidates is None else int(self.n_candidates)
        sig, U, W = smoother_spectrum(self.smoother_, k, random_state=rng)
        coef = sig * (W.T @ y)
        # "contribution": the r pairs with the largest c_j^2 (stable sort: ties keep the spectral order)
        keep = (
            np.arange(r) if self.component_selection == "top" else np.argsort(-(coef**2), kind="stable")[:r]
        )
        sig, W, coef = sig[keep], W[:, keep], coef[keep]
        if np.any(sig <= 1e-12):
            raise ValueError(
                f"n_components={r} reaches numerically zero spectral values; use fewer components"
            )
        self.components_ = keep
        self.spectrum_ = sig
        self.teacher_coef_ = coef
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
            w = np.maximum(w / w.sum() * w.size, 1e-6)  # floor: a component with c_j = 0 keeps a tiny weight
        else:
            w = np.ones(targets.shape[1])
        # output layer over g: fold target standardization, optionally refit by least squares; with n_init > 1
        # keep the student whose predictions are closest to the ensemble on the distillation inputs
        f_full = teacher_full[:, 0]
        seeds = [seed] + [int(rng.randint(0, 2**31 - 1)) for _ in range(int(self.n_init) - 1)]
        best = None
        for s in seeds:
            self._train_student(X_all, targets, s, w)
            G = self._student_outputs(X_all)  # standardized-space outputs of the MLP
            if self.target == "spectral" and not self.refit_coef:
                coef = self.teacher_coef_ * self._t_scale
                intercept = float(self.teacher_coef_ @ self._t_mean)
            else:
                A = np.column_stack([G, np.ones(G.shape[0])])
                sol = np.linalg.lstsq(A, f_full, rcond=None)[0]
                coef, intercept = sol[:-1], float(sol[-1])
            mse = float(np.mean((G @ coef + intercept - f_full) ** 2))
            if best is None or mse < best[0]:
                best = (mse, self.student_, self._t_scale, coef, intercept)
        self.distillation_mse_, self.student_, self._t_scale, self.coef_, self.intercept_ = best
        self.n_parameters_ = int(
            mlp_parameter_count(X.shape[1], self.hidden_layer_sizes_, self.coef_.size)
            + self.coef_.size  # output coefficients
            + 1  # intercept
            + 2 * X.shape[1]  # input standardization
        )
        return self

    def _student_layers(self, n_inputs: int) -> tuple[int, ...]:
        """The hidden layers: as given, or sized to ``max_size_ratio`` of the teacher's nodes (``"budget"``)."""
        if not isinstance(self.hidden_layer_sizes, str):
            return tuple(int(h) for h in self.hidden_layer_sizes)
        n_outputs = int(self.n_components) if self.target == "spectral" else 1
        budget = int(self.max_size_ratio * self.teacher_nodes_)
        try:
            return student_layers_for_budget(n_inputs, n_outputs, max(budget, 1), max_width=32)
        except ValueError:
            warnings.warn(
                f"the teacher's {self.teacher_nodes_} nodes leave a budget of {budget} parameters "
                f"(max_size_ratio={self.max_size_ratio}), below the smallest student with {n_outputs} outputs; "
                "using hidden_layer_sizes=(32, 32): pass hidden_layer_sizes or max_size_ratio to choose",
                UserWarning,
                stacklevel=3,
            )
            return (32, 32)

    def _augment(self, X: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
        if self.n_augment == 0 or self.jitter == 0:
            return X
        lo, hi = X.min(axis=0), X.max(axis=0)
        scale = self.jitter * X.std(axis=0)
        copies = np.repeat(X, self.n_augment, axis=0)
        copies = copies + rng.standard_normal(copies.shape) * scale
        return np.vstack([X, np.clip(copies, lo, hi)])

    def _train_student(self, X_all: np.ndarray, T: np.ndarray, seed: int, weights: np.ndarray) -> None:
        """Adam (scikit-learn ``MLPRegressor``) on ``mean_j w_j (g_j - t_j)^2`` over standardized targets.

        Training on the targets scaled by ``sqrt(w_j)`` is exactly that weighted loss; the scale is folded
        back into ``_t_scale``: ``psi(x) ~ _student_outputs(x) * _t_scale + _t_mean``.
        """
        self._x_mean = X_all.mean(axis=0)
        self._x_scale = np.where(X_all.std(axis=0) > 0, X_all.std(axis=0), 1.0)
        self._t_mean = T.mean(axis=0)
        t_std = np.where(T.std(axis=0) > 0, T.std(axis=0), 1.0)
        root_w = np.sqrt(weights)
        Xs = (X_all - self._x_mean) / self._x_scale
        Ts = (T - self._t_mean) / t_std * root_w
        self.student_ = MLPRegressor(
            hidden_layer_sizes=self.hidden_layer_sizes_,
            activation=self.activation,
            solver="adam",
            alpha=float(self.alpha),
            batch_size=min(int(self.batch_size), Xs.shape[0]),
            learning_rate_init=float(self.learning_rate),
            max_iter=int(self.max_epochs),
            n_iter_no_change=10,
            tol=1e-5,
            random_state=seed,
        )
        with warnings.catch_warnings():  # max_epochs is a budget, not a convergence promise
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.student_.fit(Xs, Ts[:, 0] if Ts.shape[1] == 1 else Ts)
        self._t_scale = t_std / root_w

    # --- prediction ----------------------------------------------------------------------------------------
    def _student_outputs(self, X: np.ndarray) -> np.ndarray:
        out = self.student_.predict((X - self._x_mean) / self._x_scale)
        return out.reshape(X.shape[0], -1)

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
        """Teacher smoother ``s(x) y`` (``rank=None``) or its rank-r spectral surrogate ``f_r(x)`` over the
        first ``rank`` kept components (in the order of ``components_``)."""
        X = self._check_input(X)
        if rank is None:
            return self.smoother_.apply_table(X, *self._full_table)[:, 0]
        if isinstance(rank, bool) or not isinstance(rank, Integral) or not 1 <= rank <= self.spectrum_.size:
            raise ValueError(f"rank must be None or an integer in [1, {self.spectrum_.size}], got {rank!r}")
        psi = self.smoother_.apply_table(X, *self._psi_table)
        return psi[:, :rank] @ self.teacher_coef_[:rank]
