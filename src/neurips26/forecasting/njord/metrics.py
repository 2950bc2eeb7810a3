"""Probabilistic forecast scores: fair ensemble CRPS, Gaussian CRPS (closed form), spread-skill ratio."""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

__all__ = ["crps_ensemble", "crps_gaussian", "spread_skill_ratio", "rmse"]


def _arrays(ensemble, obs) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(ensemble, dtype=float)
    y = np.asarray(obs, dtype=float)
    if x.ndim < 1 or x.shape[1:] != y.shape:
        raise ValueError(f"ensemble must have shape (M, *obs.shape); got {x.shape} for obs {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("ensemble and obs must be finite (no NaN or inf)")
    return x, y


def crps_ensemble(ensemble, obs, fair: bool = True) -> np.ndarray:
    """CRPS of an ensemble ``(M, ...)`` against ``obs`` (...), elementwise.

    ``CRPS = mean_m |x_m - y| - 1/(2 M(M-1)) sum_{m,m'} |x_m - x_m'|`` (fair: unbiased for the distribution the
    members are drawn from); ``fair=False`` uses ``1/(2 M^2)``, the CRPS of the empirical distribution. A single
    member gives the absolute error (the fair form needs M >= 2). Sorted members give the pair sum in O(M log M).
    """
    x, y = _arrays(ensemble, obs)
    m = x.shape[0]
    if fair and m < 2:
        raise ValueError("the fair CRPS needs an ensemble of at least 2 members")
    skill = np.mean(np.abs(x - y), axis=0)
    xs = np.sort(x, axis=0)
    w = (2 * np.arange(1, m + 1) - m - 1).reshape((m,) + (1,) * (x.ndim - 1))
    pair_sum = 2 * np.sum(w * xs, axis=0)  # sum over ordered pairs |x_m - x_m'|
    return skill - pair_sum / (2 * m * (m - 1) if fair else 2 * m * m)


def crps_gaussian(mu, sigma, obs) -> np.ndarray:
    """Closed-form CRPS of N(mu, sigma^2) at ``obs``: sigma [z (2 Phi(z) - 1) + 2 phi(z) - 1/sqrt(pi)]."""
    mu, sigma, obs = (np.asarray(a, dtype=float) for a in (mu, sigma, obs))
    if np.any(sigma <= 0):
        raise ValueError("sigma must be positive")
    z = (obs - mu) / sigma
    return sigma * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))


def rmse(forecast, obs) -> float:
    f, y = np.asarray(forecast, float), np.asarray(obs, float)
    if f.shape != y.shape:
        raise ValueError(f"forecast and obs shapes differ: {f.shape} vs {y.shape}")
    return float(np.sqrt(np.mean((f - y) ** 2)))


def spread_skill_ratio(ensemble, obs) -> float:
    """``sqrt((M+1)/M) * sqrt(mean ensemble variance) / RMSE(ensemble mean)``; 1 for a calibrated ensemble."""
    x, y = _arrays(ensemble, obs)
    m = x.shape[0]
    if m < 2:
        raise ValueError("the spread-skill ratio needs at least 2 members")
    spread = np.sqrt(np.mean(np.var(x, axis=0, ddof=1)))
    return float(np.sqrt((m + 1) / m) * spread / rmse(x.mean(axis=0), y))
