"""Baselines for policy mirror descent on entropy-regularised MDPs: soft policy iteration, entropy-regularised
natural policy gradient, and entropy-regularised softmax policy gradient (all with exact, tabular critics).

Cost form, as in :mod:`.pmd`: ``V_tau^pi = E[sum_n gamma^n (c + tau KL(pi(.|s_n) | mu))]``, ``c = -R``, and
``ell = log dpi/dmu``.

- **Soft policy iteration** (PMD with ``lambda = inf``): ``log dpi_{n+1}/dmu = -Q_tau^{pi_n} / tau - log Z``;
  it contracts at rate ``gamma``.
- **Entropy-regularised NPG** (Cen, Cheng, Chen, Wei & Chi, "Fast global convergence of natural policy gradient
  methods with entropy regularization", Oper. Res. 2022, arXiv 2007.06558), KL-to-``mu`` form:
  ``ell_{n+1} = (1 - eta tau / (1 - gamma)) ell_n - eta / (1 - gamma) Q_tau^{pi_n} - log Z`` for
  ``0 < eta <= (1 - gamma) / tau`` (``eta = (1 - gamma)/tau`` is soft policy iteration). It is PMD with
  ``lambda = alpha / (1 - alpha tau)``, ``alpha = eta / (1 - gamma)``, written in its own step size.
- **Entropy-regularised softmax policy gradient** (Mei, Xiao, Szepesvari & Schuurmans, "On the global
  convergence rates of softmax policy gradient methods", ICML 2020): ``pi_theta(a|s) ∝ mu(a) exp(theta_{s,a})``
  and ``theta <- theta - eta grad_theta <rho0, V_tau^{pi_theta}>`` with the exact gradient
  ``dV(rho0)/dtheta_{s,a} = d_rho0^pi(s) pi(a|s) (Q_tau^pi(s,a) + tau ell(a|s) - V_tau^pi(s)) / (1 - gamma)``,
  ``d_rho0^pi = (1 - gamma) rho0^T (I - gamma P_pi)^{-1}``. Its default step is Mei et al.'s
  ``(1 - gamma)^3 / (2 + tau (4 + 8 log |A|))`` (rewards in [0, 1]).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import logsumexp

from ..mdp import TabularMDP, _check_mu, policy_evaluation, soft_value_iteration
from .pmd import _check_distribution, policy_mirror_descent

__all__ = ["soft_policy_iteration", "natural_policy_gradient", "softmax_policy_gradient"]


def soft_policy_iteration(
    mdp: TabularMDP,
    *,
    tau: float = 0.1,
    n_iter: int = 100,
    mu: np.ndarray | None = None,
    rho0: np.ndarray | None = None,
    log: bool = False,
) -> np.ndarray | tuple[np.ndarray, dict[str, Any]]:
    """Soft policy iteration ``pi_{n+1} ∝ mu exp(-Q_tau^{pi_n} / tau)``: PMD with ``lambda = inf``."""
    return policy_mirror_descent(mdp, tau=tau, step_size=np.inf, n_iter=n_iter, mu=mu, rho0=rho0, log=log)


def _check_common(mdp: TabularMDP, tau: float, n_iter: int, learning_rate: float) -> None:
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    for name, val in (("tau", tau), ("learning_rate", learning_rate)):
        if isinstance(val, bool) or not isinstance(val, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a real number > 0")
        if not (np.isfinite(val) and val > 0):
            raise ValueError(f"{name} must be a positive finite number, got {val}")
    if isinstance(n_iter, bool) or not isinstance(n_iter, (int, np.integer)) or n_iter < 1:
        raise ValueError(f"n_iter must be an integer >= 1, got {n_iter!r}")


def _run(mdp, tau, n_iter, mu, rho0, log, update) -> np.ndarray | tuple[np.ndarray, dict[str, Any]]:
    """Shared loop: ``update(ell, pi, Q_cost, V_cost) -> new logits``; logs the gap and ``max_s KL``."""
    S, A = mdp.n_states, mdp.n_actions
    mu_ = _check_mu(mu, A)
    log_mu = np.log(mu_)
    rho0 = _check_distribution(rho0, S, "rho0")
    V_star = soft_value_iteration(mdp, tau, mu=mu_)[0] if log else None
    z = np.zeros((S, A))
    gaps, kls = [], []
    for n in range(int(n_iter) + 1):
        ell = z - logsumexp(z + log_mu, axis=1, keepdims=True)
        pi = np.exp(ell + log_mu)
        V_r, Q_r = policy_evaluation(mdp, pi, tau=tau, mu=mu_)
        if log:
            gaps.append(float(rho0 @ (V_star - V_r)))
            kls.append(float(np.max(np.sum(pi * ell, axis=1))))
        if n == int(n_iter):
            break
        z = update(ell, pi, -Q_r, -V_r, rho0)
        if not np.all(np.isfinite(z)):
            raise FloatingPointError("the policy logits became non-finite; reduce learning_rate")
    if not log:
        return pi
    return pi, {"gap": np.array(gaps), "kl_max": np.array(kls)}


def natural_policy_gradient(
    mdp: TabularMDP,
    *,
    tau: float = 0.1,
    learning_rate: float | None = None,
    n_iter: int = 100,
    mu: np.ndarray | None = None,
    rho0: np.ndarray | None = None,
    log: bool = False,
) -> np.ndarray | tuple[np.ndarray, dict[str, Any]]:
    """Entropy-regularised NPG of Cen et al. (2022), exact ``Q``; ``learning_rate`` ``eta`` in
    ``(0, (1 - gamma) / tau]`` (default ``(1 - gamma) / (2 tau)``, half the largest step).

    Returns the final policy, and with ``log=True`` a dict with ``gap`` (``N + 1`` values) and ``kl_max``.
    """
    _check_common(mdp, tau, n_iter, 1.0 if learning_rate is None else learning_rate)
    g = mdp.gamma
    eta = (1.0 - g) / (2.0 * tau) if learning_rate is None else float(learning_rate)
    if eta > (1.0 - g) / tau * (1 + 1e-12):
        raise ValueError(
            f"learning_rate must lie in (0, (1 - gamma) / tau] = (0, {(1 - g) / tau:.6g}], got {eta}"
        )
    keep, step = 1.0 - eta * tau / (1.0 - g), eta / (1.0 - g)
    return _run(mdp, tau, n_iter, mu, rho0, log, lambda ell, pi, Q, V, rho0: keep * ell - step * Q)


def softmax_policy_gradient(
    mdp: TabularMDP,
    *,
    tau: float = 0.1,
    learning_rate: float | None = None,
    n_iter: int = 100,
    mu: np.ndarray | None = None,
    rho0: np.ndarray | None = None,
    log: bool = False,
) -> np.ndarray | tuple[np.ndarray, dict[str, Any]]:
    """Entropy-regularised softmax policy gradient (Mei et al. 2020) with the exact gradient of
    ``<rho0, V_tau^{pi_theta}>``; default ``learning_rate`` ``(1 - gamma)^3 / (2 + tau (4 + 8 log |A|))``.

    Returns the final policy, and with ``log=True`` a dict with ``gap`` (``N + 1`` values) and ``kl_max``.
    """
    _check_common(mdp, tau, n_iter, 1.0 if learning_rate is None else learning_rate)
    if learning_rate is None:
        learning_rate = (1.0 - mdp.gamma) ** 3 / (2.0 + tau * (4.0 + 8.0 * np.log(mdp.n_actions)))
    P, g = mdp.P, mdp.gamma
    S = mdp.n_states
    theta = np.zeros((S, mdp.n_actions))

    def update(ell, pi, Q, V, rho0):
        nonlocal theta
        P_pi = np.einsum("sa,sat->st", pi, P)
        d = (1.0 - g) * np.linalg.solve((np.eye(S) - g * P_pi).T, rho0)
        grad = d[:, None] * pi * (Q + tau * ell - V[:, None]) / (1.0 - g)
        theta = theta - learning_rate * grad
        return theta

    return _run(mdp, tau, n_iter, mu, rho0, log, update)
