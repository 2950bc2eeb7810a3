r"""Follow-the-Regularized-Leader on the simplex with constant step size.

The learner (column player, minimising) plays

.. math:: y_t = \arg\min_{y \in \Delta_m} \langle \eta L_t, y\rangle + h(y),
          \qquad L_t = \sum_{s<t} A^\top x_s,

for a regulariser ``h`` (Su & Vlatakis-Gkaragkounis, arXiv 2604.05129, FTRL learner with constant ``eta``).
Each line: name, h(y), argmin, steep?, (max h - min h, strong convexity sigma, norm):

- ``entropy`` (Hedge): ``sum_j y_j ln y_j``; ``softmax(-eta L)``; steep; ``(ln m, 1, L1)``.
- ``euclidean`` (lazy projected GD): ``1/2 ||y - 1/m||^2``; ``Proj_simplex(1/m - eta L)``; not steep;
  ``((1 - 1/m)/2, 1, L2)``.
- ``tsallis`` (q = 1/2): ``-2 sum_j sqrt(y_j)``; ``y_j = (eta L_j + lam)^-2``; steep;
  ``(2(sqrt m - 1), 1/2, L1)``.
- ``log_barrier``: ``-sum_j ln y_j``; ``y_j = (eta L_j + lam)^-1``; steep; ``(inf, 1, L1)``.

Every argmin starts from the uniform strategy (``L = 0``). The Euclidean learner is the *lazy* (dual
averaging) projection of ``1/m - eta L``, not online gradient descent. For Tsallis and log-barrier the
normaliser ``lam`` solves ``sum_j (eta L_j + lam)^{-p} = 1`` by Newton's method started left of the root
(monotone convergence: the function is convex and decreasing). All functions are vectorised over leading
batch dimensions.

:func:`ftrl_regret_bound` is the standard FTRL bound (Orabona, *A Modern Introduction to Online Learning*,
Cor. 7.9): ``Regret_T <= (max h - min h)/eta + eta/(2 sigma) sum_t ||l_t||_*^2``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_softmax

__all__ = [
    "REGULARIZERS",
    "STEEP",
    "ftrl_strategy",
    "ftrl_log_strategy",
    "project_simplex",
    "ftrl_regret_bound",
]

REGULARIZERS = ("entropy", "euclidean", "tsallis", "log_barrier")
#: steep regularisers have an unbounded gradient at the simplex boundary, so FTRL stays in the interior
STEEP = {"entropy": True, "euclidean": False, "tsallis": True, "log_barrier": True}
_POWER = {"tsallis": 2.0, "log_barrier": 1.0}


def _check_regularizer(regularizer: str) -> str:
    if regularizer not in REGULARIZERS:
        raise ValueError(f"regularizer must be one of {REGULARIZERS}, got {regularizer!r}")
    return regularizer


def _check_eta(eta: float) -> float:
    if isinstance(eta, bool) or not isinstance(eta, (int, float, np.integer, np.floating)):
        raise TypeError(f"eta must be a positive number, got {type(eta).__name__}")
    if not (np.isfinite(eta) and eta > 0):
        raise ValueError(f"eta must be a finite number > 0, got {eta!r}")
    return float(eta)


def _check_loss(cum_loss: np.ndarray) -> np.ndarray:
    L = np.asarray(cum_loss, dtype=float)
    if L.ndim < 1 or L.shape[-1] < 1:
        raise ValueError(f"cum_loss must have at least one action on its last axis, got shape {L.shape}")
    if not np.all(np.isfinite(L)):
        raise ValueError("cum_loss must contain only finite values (no NaN or inf)")
    return L


def project_simplex(z: np.ndarray) -> np.ndarray:
    r"""Euclidean projection of each row (last axis) of ``z`` onto the probability simplex.

    Sort-based algorithm: ``y = max(z - tau, 0)`` with ``tau`` the threshold making ``y`` sum to one
    (Held, Wolfe & Crowder 1974; Duchi et al. 2008). Coordinates below ``tau`` are exactly zero.
    """
    z = np.asarray(z, dtype=float)
    if z.ndim < 1 or z.shape[-1] < 1:
        raise ValueError(f"z must have at least one coordinate on its last axis, got shape {z.shape}")
    if not np.all(np.isfinite(z)):
        raise ValueError("z must contain only finite values (no NaN or inf)")
    m = z.shape[-1]
    u = -np.sort(-z, axis=-1)  # descending
    css = np.cumsum(u, axis=-1) - 1.0
    ind = np.arange(1, m + 1)
    cond = u - css / ind > 0
    rho = m - 1 - np.argmax(cond[..., ::-1], axis=-1)  # last index where cond holds
    tau = np.take_along_axis(css, rho[..., None], axis=-1) / (rho[..., None] + 1.0)
    return np.maximum(z - tau, 0.0)


def _power_normaliser(z: np.ndarray, p: float, tol: float = 1e-14, max_iter: int = 200) -> np.ndarray:
    """Solve ``sum_j (z_j + lam)^{-p} = 1`` for ``lam > -min z`` (Newton, monotone from the left)."""
    lam = 1.0 - z.min(axis=-1, keepdims=True)  # f(lam) >= 0 here: the smallest term equals 1
    for _ in range(max_iter):
        s = z + lam
        terms = s ** (-p)
        f = terms.sum(axis=-1, keepdims=True) - 1.0
        if np.all(np.abs(f) <= tol):
            break
        fp = -p * (terms / s).sum(axis=-1, keepdims=True)
        lam = lam - f / fp
    return lam


def ftrl_log_strategy(cum_loss: np.ndarray, eta: float, regularizer: str = "entropy") -> np.ndarray:
    """Log of the FTRL strategy; ``-inf`` marks an action with exactly zero probability (Euclidean only).

    Computed in log space for steep regularisers, so a tiny but positive probability (e.g. Hedge's
    ``exp(-1000)``) is not rounded to zero.
    """
    regularizer = _check_regularizer(regularizer)
    eta = _check_eta(eta)
    L = _check_loss(cum_loss)
    if regularizer == "entropy":
        return log_softmax(-eta * L, axis=-1)
    if regularizer == "euclidean":
        with np.errstate(divide="ignore"):
            return np.log(ftrl_strategy(L, eta, "euclidean"))
    z = eta * L
    p = _POWER[regularizer]
    lam = _power_normaliser(z, p)
    logy = -p * np.log(z + lam)
    return logy - np.logaddexp.reduce(logy, axis=-1, keepdims=True)


def ftrl_strategy(cum_loss: np.ndarray, eta: float, regularizer: str = "entropy") -> np.ndarray:
    r"""The FTRL strategy :math:`\arg\min_{y\in\Delta_m} \langle \eta L, y\rangle + h(y)`.

    Parameters
    ----------
    cum_loss : array (..., m), the learner's cumulative loss vector(s) ``L``.
    eta : step size > 0.
    regularizer : one of ``REGULARIZERS``.

    Returns
    -------
    y : array (..., m) on the simplex.
    """
    regularizer = _check_regularizer(regularizer)
    eta = _check_eta(eta)
    L = _check_loss(cum_loss)
    m = L.shape[-1]
    if regularizer == "entropy":
        z = -eta * L
        z -= z.max(axis=-1, keepdims=True)  # log-sum-exp shift
        w = np.exp(z)
        return w / w.sum(axis=-1, keepdims=True)
    if regularizer == "euclidean":
        return project_simplex(1.0 / m - eta * L)
    z = eta * L
    z = z - z.min(axis=-1, keepdims=True)  # the argmin is invariant to a common shift of L
    y = (z + _power_normaliser(z, _POWER[regularizer])) ** (-_POWER[regularizer])
    return y / y.sum(axis=-1, keepdims=True)


def ftrl_regret_bound(A: np.ndarray, eta: float, T: int, regularizer: str = "entropy") -> float:
    """Worst-case FTRL regret bound ``(max h - min h)/eta + eta T G^2 / (2 sigma)`` in the game ``A``.

    ``G`` bounds the dual norm of any loss vector ``A^T x`` (its maximum over pure ``x``, by convexity):
    the L-infinity norm for the L1-strongly-convex regularisers, the L2 norm for the Euclidean one. The
    log-barrier has unbounded range, so its bound is ``inf``. Surplus never exceeds regret (in a zero-sum
    game ``min_y sum_t x_t^T A y <= T v``), hence never exceeds this bound.
    """
    from .games import _check_payoff

    regularizer = _check_regularizer(regularizer)
    eta = _check_eta(eta)
    A = _check_payoff(A)
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 0:
        raise ValueError(f"T must be an integer >= 0, got {T!r}")
    m = A.shape[1]
    if regularizer == "log_barrier":
        return float("inf")
    if regularizer == "euclidean":
        rng_h, sigma, G = 0.5 * (1.0 - 1.0 / m), 1.0, float(np.max(np.linalg.norm(A, axis=1)))
    elif regularizer == "entropy":
        rng_h, sigma, G = float(np.log(m)), 1.0, float(np.max(np.abs(A)))
    else:  # tsallis-1/2
        rng_h, sigma, G = 2.0 * (np.sqrt(m) - 1.0), 0.5, float(np.max(np.abs(A)))
    return rng_h / eta + eta * T * G**2 / (2.0 * sigma)
