"""Exact reference for 1-D nonlinear trees: sum-product on a fixed grid (digest: "grid-based sum-product").

Model: ``x_root ~ N(m0, v0)``, ``x_c | x_p ~ N(f(x_p), q)``, ``y = x + N(0, r)`` at observed nodes. Internal
states live on a uniform grid of ``G`` points (cost ``O(n_nodes G^2)``); a leaf's state is integrated out in
closed form, ``\\int N(x_l; f(x_p), q) N(y_l; x_l, r) dx_l = N(y_l; f(x_p), q + r)``, so the only approximation
is the Riemann sum over internal states (spectrally accurate for these smooth integrands). Everything is in the
log domain. A downward pass gives every internal node's posterior marginal; a leaf's posterior mean and
variance follow from its parent's marginal and the Gaussian conditional ``x_l | x_p, y_l``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from .backward_filter import check_observations
from .tree import Tree, as_tree


class GridPosterior(NamedTuple):
    means: np.ndarray  # (n,) posterior means
    variances: np.ndarray  # (n,) posterior variances
    log_evidence: float  # log p(y)
    grid: np.ndarray  # (G,)


def _log_normal(x: np.ndarray, mean: np.ndarray, var: float) -> np.ndarray:
    return -0.5 * ((x - mean) ** 2 / var + np.log(2.0 * np.pi * var))


def grid_posterior_1d(
    parent: np.ndarray | Tree,
    y: np.ndarray,
    f: Callable[[np.ndarray], np.ndarray],
    transition_var: float,
    root_mean: float,
    root_var: float,
    obs_var: float,
    grid: int | np.ndarray = 512,
) -> GridPosterior:
    """Posterior means/variances of every node and ``log p(y)`` for a 1-D tree with nonlinear mean ``f``.

    Parameters
    ----------
    parent : parent-index array or :class:`Tree`.
    y : observations, (n_nodes,) / (n_nodes, 1) with NaN at unobserved nodes, or one per leaf.
    f : vectorised numpy function, the transition mean.
    transition_var, root_var, obs_var : variances (> 0).
    grid : number of grid points (>= 16; the range covers the prior and the data with margin) or the grid.
    """
    tree = as_tree(parent)
    y = check_observations(np.asarray(y, dtype=float).reshape(-1, 1), tree, 1)[:, 0]
    for name, v in (("transition_var", transition_var), ("root_var", root_var), ("obs_var", obs_var)):
        if not (np.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    if isinstance(grid, (int, np.integer)):
        if grid < 16:
            raise ValueError(f"grid must have at least 16 points, got {grid}")
        yo = y[~np.isnan(y)]
        pad = 6.0 * np.sqrt(transition_var) + 1.0
        lo = min(yo.min(), root_mean - 6.0 * np.sqrt(root_var)) - pad
        hi = max(yo.max(), root_mean + 6.0 * np.sqrt(root_var)) + pad
        grid = np.linspace(lo, hi, int(grid))
    grid = np.asarray(grid, dtype=float)
    if grid.ndim != 1 or grid.size < 16 or np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be an increasing 1-D array of at least 16 points")
    dx = float(np.mean(np.diff(grid)))
    fx = np.asarray(f(grid), dtype=float)
    if fx.shape != grid.shape or not np.all(np.isfinite(fx)):
        raise ValueError("f must map a 1-D array to a finite array of the same shape")
    n = tree.n_nodes
    log_K = _log_normal(grid[None, :], fx[:, None], transition_var) + np.log(dx)  # [parent i, child j]
    obs = ~np.isnan(y)
    internal = ~tree.is_leaf
    # log h_c on the grid for internal nodes; leaves are integrated out exactly
    log_h = np.zeros((n, grid.size))
    log_h[obs & internal] += _log_normal(grid[None, :], y[obs & internal, None], obs_var)
    log_msg = np.zeros((n, grid.size))  # message from node c to its parent, as a function of x_parent
    for lev in reversed(tree.levels[1:]):
        leaf = tree.is_leaf[lev]
        lv, iv = lev[leaf], lev[~leaf]
        log_msg[lv] = _log_normal(y[lv, None], fx[None, :], transition_var + obs_var)
        if iv.size:
            log_msg[iv] = logsumexp(log_K[None, :, :] + log_h[iv, None, :], axis=2)
        np.add.at(log_h, tree.parent[lev], log_msg[lev])
    r = tree.root
    log_root = _log_normal(grid, root_mean, root_var) + np.log(dx) + log_h[r]
    log_z = float(logsumexp(log_root))
    log_post = np.full((n, grid.size), -np.inf)
    log_post[r] = log_root - log_z
    means = np.zeros(n)
    variances = np.zeros(n)
    for lev in tree.levels[1:]:
        par = tree.parent[lev]
        leaf = tree.is_leaf[lev]
        iv, pv = lev[~leaf], par[~leaf]
        if iv.size:
            a = log_post[pv] - log_msg[iv]  # (m, G) over x_parent
            log_post[iv] = log_h[iv] + logsumexp(a[:, :, None] + log_K[None, :, :], axis=1)
        lv, pl = lev[leaf], par[leaf]
        if lv.size:
            # x_l | x_p, y_l ~ N(mu, s2) with precision 1/q + 1/r; weights: parent's posterior marginal
            s2 = 1.0 / (1.0 / transition_var + 1.0 / obs_var)
            mu = s2 * (fx[None, :] / transition_var + y[lv, None] / obs_var)
            w = np.exp(log_post[pl] - logsumexp(log_post[pl], axis=1, keepdims=True))
            means[lv] = np.sum(w * mu, axis=1)
            variances[lv] = np.sum(w * (mu**2 + s2), axis=1) - means[lv] ** 2
    inner = np.flatnonzero(internal)
    w = np.exp(log_post[inner] - logsumexp(log_post[inner], axis=1, keepdims=True))
    means[inner] = w @ grid
    variances[inner] = w @ grid**2 - means[inner] ** 2
    return GridPosterior(means, variances, log_z, grid)
