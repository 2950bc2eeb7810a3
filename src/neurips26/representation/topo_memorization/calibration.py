"""Noise-severity calibration (digest, method step 7): a per-pipeline map from the H1 signal to the noise rate.

Paper (descriptive title; no arXiv id found): "Topology of noisy-label memorization: H1 persistent homology of
penultimate representations" (NeurIPS 2026). The paper reports per-pipeline R^2 >= 0.94.

``log-linear``:  eta_hat = a + b log(P_1)   (least squares over the calibration runs);
``linear``:      eta_hat = a + b P_1   (reported as a diagnostic; the digest's gate uses log-linear);
``isotonic``:    eta_hat = g(P_1) with g non-decreasing (scikit-learn's IsotonicRegression, clipped). Under
                 leave-one-rate-out it cannot extrapolate, so a held-out extreme rate is predicted as its
                 neighbour: with rates {0, 0.1, ..., 0.5} its R^2 is at most 1 - 0.02 / 0.175 = 0.886.

The leave-one-rate-out score holds out every run of one noise rate, fits on the rest (a clean reference run
plus the other known rates), predicts the held-out runs, and reports ``R^2 = 1 - SS_res / SS_tot`` over all
held-out predictions. Calibration is per pipeline; nothing here claims transfer across pipelines.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.isotonic import IsotonicRegression
from sklearn.utils.validation import check_is_fitted, validate_data

CALIBRATION_METHODS = ("log-linear", "linear", "isotonic")


class NoiseSeverityCalibrator(RegressorMixin, BaseEstimator):
    """Predict the label-noise rate from a (positive) H1 signal; ``X`` is the signal, shape (n,) or (n, 1)."""

    def __init__(self, method: str = "log-linear") -> None:
        self.method = method

    def _signal(self, X, reset: bool) -> np.ndarray:
        X = np.asarray(X, dtype=float) if not hasattr(X, "shape") else X
        if getattr(X, "ndim", 2) == 1:
            X = np.asarray(X).reshape(-1, 1)
        X = validate_data(self, X, dtype=np.float64, reset=reset)
        if X.shape[1] != 1:
            raise ValueError(f"X must hold one signal column, got {X.shape[1]} columns")
        if self.method == "log-linear" and (X <= 0).any():
            raise ValueError("X must be positive for method='log-linear' (it is log-transformed)")
        return X[:, 0]

    def fit(self, X, y):
        if self.method not in CALIBRATION_METHODS:
            raise ValueError(f"method must be one of {CALIBRATION_METHODS}, got {self.method!r}")
        s = self._signal(X, reset=True)
        y = np.asarray(y, dtype=float)
        if y.shape != s.shape:
            raise ValueError(f"y must have shape ({s.size},), got {y.shape}")
        if not np.isfinite(y).all():
            raise ValueError("y must be finite")
        if s.size < 2:
            raise ValueError("fit needs at least 2 calibration runs")
        if self.method in ("log-linear", "linear"):
            A = np.column_stack([np.ones_like(s), np.log(s) if self.method == "log-linear" else s])
            self.coef_ = np.linalg.lstsq(A, y, rcond=None)[0]
        else:
            self.isotonic_ = IsotonicRegression(increasing=True, out_of_bounds="clip").fit(s, y)
        return self

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self)
        s = self._signal(X, reset=False)
        if self.method in ("log-linear", "linear"):
            return self.coef_[0] + self.coef_[1] * (np.log(s) if self.method == "log-linear" else s)
        return self.isotonic_.predict(s)


def leave_one_rate_out_r2(signal, noise_rate, method: str = "log-linear") -> tuple[float, np.ndarray]:
    """Leave-one-rate-out R^2 of :class:`NoiseSeverityCalibrator`; returns ``(r2, held_out_predictions)``."""
    s = np.asarray(signal, dtype=float).ravel()
    eta = np.asarray(noise_rate, dtype=float).ravel()
    if s.shape != eta.shape:
        raise ValueError(f"signal and noise_rate must have equal length, got {s.size} and {eta.size}")
    rates = np.unique(eta)
    if rates.size < 3:
        raise ValueError(f"noise_rate needs at least 3 distinct rates, got {rates.size}")
    pred = np.empty_like(eta)
    for r in rates:
        held = eta == r
        pred[held] = NoiseSeverityCalibrator(method).fit(s[~held], eta[~held]).predict(s[held])
    ss_res = float(((eta - pred) ** 2).sum())
    ss_tot = float(((eta - eta.mean()) ** 2).sum())
    return 1.0 - ss_res / ss_tot, pred
