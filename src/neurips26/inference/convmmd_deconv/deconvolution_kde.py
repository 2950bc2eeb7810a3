"""Deconvoluting-kernel density estimator (the digest's classic Fourier baseline), 1-D.

Stefanski and Carroll (1990), Fan (1991): with ``X = Z + eps`` and a known noise characteristic function
``phi_eps``, the density of ``Z`` is estimated by Fourier inversion of the empirical characteristic function of
``X`` divided by ``phi_eps``, smoothed by a kernel of bandwidth ``h``:

    f_hat(z) = (1 / 2 pi) int exp(-i t z) phi_K(t h) phi_hat_X(t) / phi_eps(t) dt,
    phi_hat_X(t) = (1/n) sum_j exp(i t X_j).

For heteroscedastic noise (a known ``sd_j`` per row) ``phi_eps`` is replaced by the mean ``(1/n) sum_j
phi_eps_j(t)`` (Delaigle and Meister 2008); with one ``sd`` both coincide. Everything is real and even, so the
integral is ``(1/pi) int_0^T phi_K(t h) / psi(t) [C(t) cos(t z) + S(t) sin(t z)] dt`` with ``C, S`` the means of
``cos(t X_j), sin(t X_j)``; it is evaluated by the trapezoidal rule.

Kernels: ``"triweight"`` has ``phi_K(t) = (1 - t^2)^3`` on ``[-1, 1]`` (compact support, so the integral exists
for any noise; the usual choice in deconvolution), ``"gaussian"`` has ``phi_K(t) = exp(-t^2 / 2)`` (defined for
Laplace noise at any ``h``, for Gaussian noise only when ``h > sd``; then ``f_hat`` is the closed-form mixture
``(1/n) sum_j N(z; X_j, h^2 - sd^2)``, which the tests use as the oracle).

Bandwidth ``"cv"``: the cross-validation criterion of Stefanski and Carroll (1990) (an unbiased estimate of
``ISE(h) - int f^2``), minimised over a log grid of ``h`` whose cut-off frequency ``1 / h`` keeps
``psi(1 / h) >= n^-1/2`` (beyond it the empirical characteristic function's error exceeds the signal); the
largest local minimiser is taken (Hall and Marron 1991), the global one when none is interior:

    CV(h) = (1 / pi) int_0^T psi(t)^-2 [phi_K(t h)^2 |phi_hat|^2 - 2 phi_K(t h) (n |phi_hat|^2 - 1) / (n - 1)] dt.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_array, check_is_fitted

from .noise import NOISES

KERNELS = ("triweight", "gaussian")
_GAUSS_TAIL = 38.0  # exp(-38) ~ 3e-17: the Gaussian kernel's transform is negligible beyond it


def _phi_kernel(u: np.ndarray, kernel: str) -> np.ndarray:
    if kernel == "gaussian":
        return np.exp(-0.5 * u**2)
    return np.where(np.abs(u) < 1.0, (1.0 - np.minimum(u**2, 1.0)) ** 3, 0.0)


def _noise_cf_mean(t: np.ndarray, sd: np.ndarray, noise: str) -> np.ndarray:
    """``psi(t) = mean_j phi_eps_j(t)`` for sd-parameterised noise (Laplace scale ``b = sd / sqrt 2``)."""
    sd2 = sd[None, :] ** 2
    if noise == "gaussian":
        return np.exp(-0.5 * t[:, None] ** 2 * sd2).mean(1)
    return (1.0 / (1.0 + 0.5 * t[:, None] ** 2 * sd2)).mean(1)


def _ecf(t: np.ndarray, X: np.ndarray, chunk: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Means of ``cos(t X_j)`` and ``sin(t X_j)`` at every ``t`` (chunked over t: memory ``chunk x n``)."""
    C, S = np.empty_like(t), np.empty_like(t)
    for s in range(0, len(t), chunk):
        tx = t[s : s + chunk, None] * X[None, :]
        C[s : s + chunk], S[s : s + chunk] = np.cos(tx).mean(1), np.sin(tx).mean(1)
    return C, S


class DeconvolutionKDE(BaseEstimator):
    """Deconvoluting-kernel density estimator of a 1-D latent ``Z`` from ``X = Z + eps`` with known noise.

    Parameters
    ----------
    noise : ``"gaussian"`` or ``"laplace"``, the known noise law (parameterised by its standard deviation).
    kernel : ``"triweight"`` (default; ``phi_K(t) = (1 - t^2)^3`` on [-1, 1]) or ``"gaussian"``.
    bandwidth : ``"cv"`` (Stefanski-Carroll cross-validation over a log grid) or a positive float.
    n_freq : int >= 64, trapezoid nodes of the Fourier integral.

    Attributes
    ----------
    bandwidth_ : the bandwidth used; ``cv_curve_`` : ``(bandwidths, CV values)`` when ``bandwidth="cv"``.
    """

    def __init__(
        self, noise: str = "gaussian", kernel: str = "triweight", bandwidth: Any = "cv", n_freq: int = 1024
    ) -> None:
        self.noise = noise
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.n_freq = n_freq

    def _t_max(self, h: float) -> float:
        if self.kernel == "triweight":
            return 1.0 / h
        if self.noise == "gaussian":  # integrand ~ exp(-t^2 (h^2 - sd_max^2) / 2)
            return float(np.sqrt(2.0 * _GAUSS_TAIL / (h**2 - self.sd_.max() ** 2)))
        return float(np.sqrt(2.0 * _GAUSS_TAIL) / h)

    def _check_params(self) -> None:
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES}, got {self.noise!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")
        if isinstance(self.n_freq, bool) or not isinstance(self.n_freq, numbers.Integral) or self.n_freq < 64:
            raise ValueError(f"n_freq must be an integer >= 64, got {self.n_freq!r}")
        h = self.bandwidth
        if isinstance(h, str):
            if h != "cv":
                raise ValueError(f"bandwidth must be 'cv' or a positive float, got {h!r}")
        elif isinstance(h, bool) or not isinstance(h, numbers.Real) or not (np.isfinite(h) and h > 0):
            raise ValueError(f"bandwidth must be 'cv' or a positive float, got {h!r}")

    def fit(self, X: Any, y: Any = None, *, noise_sd: Any) -> DeconvolutionKDE:
        """Store the data and choose the bandwidth. ``X``: (n,) or (n, 1); ``noise_sd``: scalar or (n,)."""
        self._check_params()
        X = check_array(X, ensure_2d=False, dtype=np.float64, input_name="X")
        if X.ndim == 2:
            if X.shape[1] != 1:
                raise ValueError(f"X must be 1-D data, shape (n,) or (n, 1); got {X.shape}")
            X = X[:, 0]
        if len(X) < 2:
            raise ValueError(f"X needs at least 2 observations, got {len(X)}")
        sd = np.asarray(noise_sd, dtype=np.float64)
        if sd.ndim == 0:
            sd = np.full(len(X), float(sd))
        sd = sd.reshape(-1) if sd.shape in ((len(X),), (len(X), 1)) else None
        if sd is None:
            raise ValueError(f"noise_sd must be a scalar or have shape ({len(X)},)")
        if not (np.isfinite(sd).all() and (sd >= 0).all()):
            raise ValueError("noise_sd must be finite and >= 0")
        self.X_, self.sd_ = X, sd
        if self.bandwidth == "cv":
            self.bandwidth_, self.cv_curve_ = self._cross_validate()
        else:
            self.bandwidth_ = float(self.bandwidth)
        if self.kernel == "gaussian" and self.noise == "gaussian" and self.bandwidth_ <= sd.max():
            raise ValueError(
                f"bandwidth must exceed the largest noise sd ({sd.max():.3g}) for kernel='gaussian' under "
                "Gaussian noise (the Fourier integral diverges otherwise); use kernel='triweight'"
            )
        return self

    def _cross_validate(self) -> tuple[float, tuple[np.ndarray, np.ndarray]]:
        X, n = self.X_, len(self.X_)
        spread = float(np.std(X))
        # Frequencies where psi(t) < n^-1/2 carry no information: there the ECF's own error n^-1/2 exceeds
        # |phi_X(t)| <= psi(t), and the CV criterion is the ECF noise times psi^-2 (spurious minima). So the
        # cut-off 1 / h stays below the largest t with psi(t) >= n^-1/2.
        t_grid = np.geomspace(1e-3, 1e4, 4000) / max(float(self.sd_.max()), 1e-12)
        informative = _noise_cf_mean(t_grid, self.sd_, self.noise) >= 1.0 / np.sqrt(n)
        t_star = float(t_grid[informative].max()) if informative.any() else float(t_grid[0])
        lo = max(1.0 / t_star, 0.01 * spread, 1e-6)
        hs = np.geomspace(lo, max(spread, 2 * lo), 48)
        if self.kernel == "gaussian" and self.noise == "gaussian":
            hs = hs[hs > 1.05 * self.sd_.max()]
            if len(hs) == 0:
                raise ValueError("kernel='gaussian' under Gaussian noise needs bandwidths above the noise sd")
        t = np.linspace(0.0, max(self._t_max(h) for h in hs), 2 * self.n_freq)
        C, S = _ecf(t, X)
        mod2 = C**2 + S**2
        inv_psi2 = _noise_cf_mean(t, self.sd_, self.noise) ** -2.0
        cv = np.array(
            [
                np.trapezoid(
                    inv_psi2
                    * (
                        _phi_kernel(t * h, self.kernel) ** 2 * mod2
                        - 2.0 * _phi_kernel(t * h, self.kernel) * (n * mod2 - 1.0) / (n - 1)
                    ),
                    t,
                )
                / np.pi
                for h in hs
            ]
        )
        # the largest local minimiser (Hall and Marron 1991): the criterion is noisy at small h, where a spurious
        # deeper minimum undersmooths; the global minimiser when there is no interior local minimum
        interior = np.flatnonzero((cv[1:-1] <= cv[:-2]) & (cv[1:-1] <= cv[2:])) + 1
        best = int(interior.max()) if len(interior) else int(np.argmin(cv))
        return float(hs[best]), (hs, cv)

    def density(self, z: Any) -> np.ndarray:
        """``f_hat`` at the points ``z`` (any shape of finite values; (m, 1) columns accepted)."""
        check_is_fitted(self, "bandwidth_")
        z = np.asarray(z, dtype=np.float64)
        if z.ndim == 2 and z.shape[1] == 1:
            z = z[:, 0]
        if not np.isfinite(z).all():
            raise ValueError("z must be finite")
        h = self.bandwidth_
        t = np.linspace(0.0, self._t_max(h), self.n_freq)
        C, S = _ecf(t, self.X_)
        g = _phi_kernel(t * h, self.kernel) / _noise_cf_mean(t, self.sd_, self.noise)
        w = np.full_like(t, t[1] - t[0])  # trapezoid weights
        w[[0, -1]] *= 0.5
        a, b = g * C * w, g * S * w
        flat = z.reshape(-1)
        out = np.empty_like(flat)
        for s in range(0, len(flat), 2048):
            tz = np.outer(flat[s : s + 2048], t)
            out[s : s + 2048] = (np.cos(tz) @ a + np.sin(tz) @ b) / np.pi
        return out.reshape(z.shape)

    def score_samples(self, z: Any) -> np.ndarray:
        """``log max(f_hat, tiny)``: a deconvoluting estimate can dip below 0 in the tails."""
        return np.log(np.maximum(self.density(z), np.finfo(float).tiny))
