"""Extreme deconvolution (Bovy, Hogg and Roweis 2011, arXiv 0905.2979): a Gaussian mixture fitted to noisy
data with known Gaussian noise covariances by EM, the digest's "extreme deconvolution" baseline.

Model ``x_i = z_i + eps_i``, ``z ~ sum_k alpha_k N(mu_k, V_k)``, ``eps_i ~ N(0, S_i)`` known. With
``T_ik = V_k + S_i`` the EM step (Bovy et al., eq. 16-18) is

    q_ik ∝ alpha_k N(x_i; mu_k, T_ik),   b_ik = mu_k + V_k T_ik^{-1} (x_i - mu_k),
    B_ik = V_k - V_k T_ik^{-1} V_k,      alpha_k = mean_i q_ik,   mu_k = sum_i q_ik b_ik / sum_i q_ik,
    V_k = sum_i q_ik [(mu_k - b_ik)(mu_k - b_ik)^T + B_ik] / sum_i q_ik.

This follows astroML's ``XDGMM`` (same initialisation, a 10-iteration scikit-learn ``GaussianMixture`` on
``X``, and the same stopping rule) but batches the ``n K`` inverses of ``T_ik`` instead of looping over them,
and computes the responsibilities in the log domain. The tests check it against ``XDGMM``.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator
from sklearn.mixture import GaussianMixture
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted


def _log_gauss(diff: np.ndarray, T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log N(diff; 0, T)`` and ``T^{-1}`` for batched ``diff (..., d)``, ``T (..., d, d)``."""
    L = np.linalg.cholesky(T)
    d = T.shape[-1]
    eye = np.broadcast_to(np.eye(d), T.shape)
    L_inv = np.linalg.solve(L, eye)
    T_inv = np.swapaxes(L_inv, -1, -2) @ L_inv
    sol = (L_inv @ diff[..., None])[..., 0]
    logdet = 2.0 * np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(-1)
    return -0.5 * ((sol**2).sum(-1) + logdet + d * np.log(2 * np.pi)), T_inv


def _noise_cov(noise_sd: Any, shape: tuple[int, int]) -> np.ndarray:
    n, d = shape
    sd = np.asarray(noise_sd, dtype=np.float64)
    if sd.ndim == 3:
        if sd.shape != (n, d, d) or not np.isfinite(sd).all():
            raise ValueError(f"noise covariances must have shape ({n}, {d}, {d}) and be finite")
        return sd
    if sd.ndim == 1 and sd.shape[0] == n:
        sd = sd[:, None]
    try:
        sd = np.broadcast_to(sd, (n, d))
    except ValueError:
        raise ValueError(
            f"noise_sd must be a scalar, ({n},), ({d},), ({n}, {d}) or covariances ({n}, {d}, {d}); "
            f"got shape {np.shape(noise_sd)}"
        ) from None
    if not np.isfinite(sd).all() or (sd < 0).any():
        raise ValueError("noise_sd must be finite and >= 0")
    return np.eye(d)[None] * (sd**2)[:, :, None]


class ExtremeDeconvolution(BaseEstimator):
    """Gaussian-mixture deconvolution under known Gaussian noise by EM (Bovy et al. 2011).

    Parameters
    ----------
    n_components : K (>= 1).
    max_iter : EM iterations (>= 1); tol : stop when the log-likelihood gains less than ``tol``.
    reg_covar : added to the diagonal of every ``V_k`` after each M-step (0 = astroML's XDGMM).
    random_state : seed of the initial ``GaussianMixture``.

    Attributes: ``weights_`` (K,), ``means_`` (K, d), ``covariances_`` (K, d, d), ``log_likelihood_``,
    ``n_iter_``, ``n_features_in_``.
    """

    def __init__(
        self,
        n_components: int = 10,
        *,
        max_iter: int = 100,
        tol: float = 1e-5,
        reg_covar: float = 0.0,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.reg_covar = reg_covar
        self.random_state = random_state

    def _loglik(self, X: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        T = S[:, None] + self.covariances_[None]  # (n, K, d, d)
        diff = X[:, None, :] - self.means_[None]
        logN, T_inv = _log_gauss(diff, T)
        return logN + np.log(self.weights_)[None], T_inv, diff

    def fit(self, X: Any, y: None = None, *, noise_sd: Any) -> ExtremeDeconvolution:
        """Fit to ``X`` (n, d) with known noise: standard deviations (as in ConvMMDDeconvolver) or full
        covariances (n, d, d)."""
        for name, lo in (("n_components", 1), ("max_iter", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        if not (isinstance(self.reg_covar, numbers.Real) and self.reg_covar >= 0):
            raise ValueError(f"reg_covar must be a number >= 0, got {self.reg_covar!r}")
        X = np.asarray(X, dtype=np.float64)
        X = X[:, None] if X.ndim == 1 else X
        if X.ndim != 2 or X.shape[0] < self.n_components or not np.isfinite(X).all():
            raise ValueError(f"X must be a finite (n, d) array with n >= n_components, got shape {X.shape}")
        S = _noise_cov(noise_sd, X.shape)
        n, d = X.shape
        gmm = GaussianMixture(
            self.n_components, max_iter=10, covariance_type="full", random_state=self.random_state
        ).fit(X)
        self.means_, self.weights_, self.covariances_ = gmm.means_, gmm.weights_, gmm.covariances_
        logp, T_inv, diff = self._loglik(X, S)
        logL = float(logsumexp(logp, axis=1).sum())
        self.n_iter_ = 0
        for _ in range(self.max_iter):
            q = np.exp(logp - logsumexp(logp, axis=1, keepdims=True))  # (n, K)
            V = self.covariances_[None]
            b = self.means_[None] + (V @ (T_inv @ diff[..., None]))[..., 0]
            B = V - V @ T_inv @ V
            qj = q.sum(0)
            self.weights_ = qj / n
            self.means_ = (q[:, :, None] * b).sum(0) / qj[:, None]
            m_b = self.means_[None] - b
            outer = m_b[..., :, None] * m_b[..., None, :] + B
            self.covariances_ = (q[:, :, None, None] * outer).sum(0) / qj[:, None, None]
            if self.reg_covar:
                self.covariances_ = self.covariances_ + self.reg_covar * np.eye(d)
            self.n_iter_ += 1
            logp, T_inv, diff = self._loglik(X, S)
            logL_next = float(logsumexp(logp, axis=1).sum())
            if logL_next < logL + self.tol:
                logL = logL_next
                break
            logL = logL_next
        self.log_likelihood_ = logL
        self.n_features_in_ = d
        return self

    def sample(self, n_samples: int = 1, random_state: Any = None) -> np.ndarray:
        """Latent draws ``z ~ sum_k alpha_k N(mu_k, V_k)``."""
        check_is_fitted(self, "means_")
        if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
        rng = check_random_state(random_state)
        comp = rng.choice(self.n_components, size=n_samples, p=self.weights_ / self.weights_.sum())
        L = np.linalg.cholesky(self.covariances_)
        eps = rng.standard_normal((n_samples, self.n_features_in_))
        return self.means_[comp] + np.einsum("nij,nj->ni", L[comp], eps)

    def log_density(self, Z: Any) -> np.ndarray:
        """Log density of the deconvolved mixture at the rows of ``Z``."""
        check_is_fitted(self, "means_")
        Z = np.asarray(Z, dtype=np.float64)
        Z = Z[:, None] if Z.ndim == 1 else Z
        logN, _ = _log_gauss(
            Z[:, None, :] - self.means_[None],
            np.broadcast_to(self.covariances_, (len(Z),) + self.covariances_.shape),
        )
        return logsumexp(logN + np.log(self.weights_)[None], axis=1)

    def denoise(self, X: Any, noise_sd: Any) -> np.ndarray:
        """Empirical-Bayes posterior means ``E[z | x]`` under the fitted mixture (closed form)."""
        from .deconvolver import gmm_gaussian_posterior_mean

        check_is_fitted(self, "means_")
        X = np.asarray(X, dtype=np.float64)
        X = X[:, None] if X.ndim == 1 else X
        sd = np.broadcast_to(
            np.asarray(noise_sd, dtype=np.float64).reshape(-1, 1)
            if np.ndim(noise_sd) == 1 and np.shape(noise_sd)[0] == len(X)
            else noise_sd,
            X.shape,
        )
        if not np.isfinite(sd).all() or (sd <= 0).any():
            raise ValueError("noise_sd must be finite and > 0")
        return gmm_gaussian_posterior_mean(self.weights_, self.means_, self.covariances_, X, np.array(sd))
