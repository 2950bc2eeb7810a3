"""1-D grid empirical Bayes: posterior means under a prior on a grid, and the NPMLE (Kiefer-Wolfowitz) prior.

- ``grid_posterior_mean``: ``E[Z | X = x_i] = sum_g z_g p_g l_i(z_g) / sum_g p_g l_i(z_g)``, with the known,
  possibly heteroscedastic noise likelihood ``l_i``. With the true prior on a fine grid this is the oracle Bayes
  rule; with a fitted density it is the quadrature posterior mean the digest allows for a 1-D GMM sieve.
- ``npmle_grid``: the g-modeling baseline (Koenker and Mizera 2014; Jiang and Zhang 2009): the mixing
  distribution maximising ``sum_i log sum_g p_g l_i(z_g)`` over the simplex, by the EM fixed point
  ``p_g <- p_g mean_i l_i(z_g) / f_i``.
"""

from __future__ import annotations

import numpy as np

from .noise import NOISES, noise_logpdf


def _validate(x: np.ndarray, sd: np.ndarray, noise: str, grid: np.ndarray) -> tuple[np.ndarray, ...]:
    x = np.asarray(x, dtype=np.float64).ravel()
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError("x must be a non-empty finite 1-D array")
    sd = np.broadcast_to(np.asarray(sd, dtype=np.float64), x.shape)
    if not np.isfinite(sd).all() or (sd <= 0).any():
        raise ValueError("noise_sd must be positive and finite (scalar or one per observation)")
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    grid = np.asarray(grid, dtype=np.float64).ravel()
    if grid.size < 2 or not np.isfinite(grid).all():
        raise ValueError("grid must hold at least 2 finite points")
    return x, sd, grid


def _loglik(x: np.ndarray, sd: np.ndarray, noise: str, grid: np.ndarray) -> np.ndarray:
    return noise_logpdf((x[:, None] - grid[None, :])[..., None], sd[:, None, None], noise)


def grid_posterior_mean(
    x: np.ndarray,
    noise_sd: np.ndarray | float,
    noise: str,
    grid: np.ndarray,
    prior: np.ndarray,
    chunk: int = 2048,
) -> np.ndarray:
    """Posterior means of ``Z`` given each ``x_i`` under the prior masses ``prior`` on ``grid``."""
    x, sd, grid = _validate(x, noise_sd, noise, grid)
    prior = np.asarray(prior, dtype=np.float64).ravel()
    if prior.shape != grid.shape or not np.isfinite(prior).all() or (prior < 0).any() or prior.sum() <= 0:
        raise ValueError("prior must be non-negative masses, one per grid point, with positive sum")
    logp = np.log(np.maximum(prior, 1e-300))
    out = np.empty_like(x)
    for s in range(0, x.size, chunk):
        L = _loglik(x[s : s + chunk], sd[s : s + chunk], noise, grid) + logp[None, :]
        L -= L.max(1, keepdims=True)
        P = np.exp(L)
        out[s : s + chunk] = (P @ grid) / P.sum(1)
    return out


def npmle_grid(
    x: np.ndarray,
    noise_sd: np.ndarray | float,
    noise: str,
    grid: np.ndarray,
    n_iter: int = 500,
    tol: float = 1e-8,
) -> np.ndarray:
    """NPMLE prior masses on ``grid`` by EM (Laird 1978); returns masses summing to 1."""
    x, sd, grid = _validate(x, noise_sd, noise, grid)
    if not isinstance(n_iter, (int, np.integer)) or n_iter < 1:
        raise ValueError(f"n_iter must be a positive integer, got {n_iter!r}")
    L = _loglik(x, sd, noise, grid)
    shift = L.max(1, keepdims=True)
    Lik = np.exp(L - shift)  # row scaling does not change the EM fixed point
    p = np.full(grid.size, 1.0 / grid.size)
    prev = -np.inf
    for _ in range(n_iter):
        f = Lik @ p
        p = p * (Lik.T @ (1.0 / f)) / x.size
        ll = np.log(f).sum()
        if ll - prev < tol * x.size:
            break
        prev = ll
    return p / p.sum()
