"""Synthetic test graphs for the srGW reproduction (arXiv 2606.02223): the SBMs and graphons of the authors'
benchmark, exchangeable sampling, and the MSE to the probability matrix.

Sampling follows the authors' protocol: latent ``u_i ~ U(0, 1)`` (SBM: block ``z_i ~ Categorical(pi)``),
``Theta_ik = W(u_i, u_k)`` with a zero diagonal (no self-loops), ``A_ik ~ Bernoulli(Theta_ik)`` for ``i < k``,
symmetrised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["GRAPHONS", "SBMS", "sample_sbm", "sample_graphon", "theta_mse"]

# 13 test graphons of the GW-barycenter graphon literature (as listed in the authors' experiment grid).
GRAPHONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "u*v": lambda u, v: u * v,
    "exp(-(u^0.7+v^0.7))": lambda u, v: np.exp(-(u**0.7 + v**0.7)),
    "0.25(u^2+v^2+u^0.5+v^0.5)": lambda u, v: 0.25 * (u**2 + v**2 + u**0.5 + v**0.5),
    "0.5(u+v)": lambda u, v: 0.5 * (u + v),
    "1/(1+exp(-2(u^2+v^2)))": lambda u, v: 1 / (1 + np.exp(-2 * (u**2 + v**2))),
    "1/(1+exp(-(max^2+min^4)))": lambda u, v: (
        1 / (1 + np.exp(-(np.maximum(u, v) ** 2 + np.minimum(u, v) ** 4)))
    ),
    "exp(-max(u,v)^0.75)": lambda u, v: np.exp(-(np.maximum(u, v) ** 0.75)),
    "exp(-0.5(min+u^0.5+v^0.5))": lambda u, v: np.exp(-0.5 * (np.minimum(u, v) + u**0.5 + v**0.5)),
    "log(1+0.5max(u,v))": lambda u, v: np.log(1 + 0.5 * np.maximum(u, v)),
    "|u-v|": lambda u, v: np.abs(u - v),
    "1-|u-v|": lambda u, v: 1 - np.abs(u - v),
    "0.5+0.5sin(2pi u)sin(2pi v)": lambda u, v: 0.5 + 0.5 * np.sin(2 * np.pi * u) * np.sin(2 * np.pi * v),
    "0.5+cos(2pi(u-v))(sin(4pi u)+sin(4pi v))/4": lambda u, v: (
        0.5 + np.cos(2 * np.pi * (u - v)) * 0.25 * (np.sin(4 * np.pi * u) + np.sin(4 * np.pi * v))
    ),
}

# SBMs of the authors' benchmark: (block matrix B, block proportions pi).
SBMS: dict[str, tuple[np.ndarray, np.ndarray]] = {
    "2-block assortative": (np.array([[0.8, 0.2], [0.2, 0.8]]), np.array([0.5, 0.5])),
    "2-block assortative unequal": (np.array([[0.8, 0.2], [0.2, 0.8]]), np.array([0.3, 0.7])),
    "2-block disassortative": (np.array([[0.2, 0.8], [0.8, 0.2]]), np.array([0.5, 0.5])),
    "3-block": (
        np.array([[0.8, 0.1, 0.2], [0.1, 0.7, 0.15], [0.2, 0.15, 0.6]]),
        np.array([0.3, 0.3, 0.4]),
    ),
    "ER(0.3)": (np.array([[0.3]]), np.array([1.0])),
    "ER(0.5)": (np.array([[0.5]]), np.array([1.0])),
    "ER(0.8)": (np.array([[0.8]]), np.array([1.0])),
}


def _sample_from_theta(theta: np.ndarray, rng: np.random.RandomState) -> tuple[np.ndarray, np.ndarray]:
    n = theta.shape[0]
    np.fill_diagonal(theta, 0.0)
    upper = np.triu(rng.uniform(size=(n, n)) < theta, k=1)
    A = (upper | upper.T).astype(np.float64)
    return A, theta


def sample_sbm(
    B: Any, pi: Any, n: int, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample an SBM graph. Returns ``(A, Theta, z)``; ``Theta`` has a zero diagonal."""
    B = np.asarray(B, dtype=np.float64)
    pi = np.asarray(pi, dtype=np.float64)
    if B.ndim != 2 or B.shape[0] != B.shape[1] or np.any(B < 0) or np.any(B > 1) or np.any(B != B.T):
        raise ValueError("B must be a symmetric (K, K) matrix with entries in [0, 1]")
    if pi.shape != (B.shape[0],) or np.any(pi < 0) or not np.isclose(pi.sum(), 1.0):
        raise ValueError("pi must be a probability vector of length K")
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    rng = check_random_state(random_state)
    z = rng.choice(B.shape[0], size=n, p=pi)
    A, theta = _sample_from_theta(B[np.ix_(z, z)].copy(), rng)
    return A, theta, z


def sample_graphon(
    W: Callable[[np.ndarray, np.ndarray], np.ndarray] | str, n: int, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample a W-random graph. Returns ``(A, Theta, u)``; ``Theta`` has a zero diagonal."""
    if isinstance(W, str):
        if W not in GRAPHONS:
            raise ValueError(f"W must be a callable or one of {sorted(GRAPHONS)}, got {W!r}")
        W = GRAPHONS[W]
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    rng = check_random_state(random_state)
    u = rng.uniform(size=n)
    theta = np.clip(np.asarray(W(u[:, None], u[None, :]), dtype=np.float64), 0.0, 1.0)
    A, theta = _sample_from_theta(theta, rng)
    return A, theta, u


def theta_mse(theta: Any, theta_hat: Any) -> float:
    r"""Normalised MSE :math:`\frac{1}{n^2}\sum_{i,k} (\Theta_{ik} - \hat\Theta_{ik})^2` over all pairs,
    diagonal included (the authors' "loss_to_theta" with a hard map)."""
    theta = np.asarray(theta, dtype=np.float64)
    theta_hat = np.asarray(theta_hat, dtype=np.float64)
    if theta.shape != theta_hat.shape or theta.ndim != 2:
        raise ValueError(
            f"theta and theta_hat must be matrices of the same shape, got {theta.shape} and {theta_hat.shape}"
        )
    return float(np.mean((theta - theta_hat) ** 2))
