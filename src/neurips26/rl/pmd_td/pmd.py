"""Policy mirror descent (PMD) with exact or temporal-difference critics for entropy-regularised MDPs.

Paper: Zorba, Siska, Szpruch, "Mirror descent actor-critic methods for entropy regularised MDPs in general
spaces: stability and convergence", arXiv 2602.10838. Only the abstract and third-party summaries were
available to us; the update formulas below are the standard ones of this line of work and are
**reconstructed** (see the digest [R]).

Cost form (the paper minimises costs; our :class:`~neurips26.rl.mdp.TabularMDP` stores rewards, so
``c = -R``):

    V_tau^pi(s) = E[ sum_n gamma^n ( c(s_n, a_n) + tau KL(pi(.|s_n) | mu) ) ],
    Q_tau^pi = c + gamma P V_tau^pi.

PMD step with step size ``lambda`` (closed form of the KL-proximal step), per state ``s``:

    log dpi_{n+1}/dmu = (log dpi_n/dmu - lambda Qhat_n) / (1 + lambda tau) - log Z_n(s).

With a linear critic ``Qhat = Phi theta`` the log-density stays linear in the features,
``log dpi/dmu = Phi psi - log Z`` with ``psi_{n+1} = (psi_n - lambda theta_n) / (1 + lambda tau)``. The limit
``lambda = inf`` is soft policy iteration, ``log dpi_{n+1}/dmu = -Qhat_n / tau - log Z_n``.

Critic: expected ("mean-path") semi-gradient TD(0) under a state-action sampling distribution ``rho``,

    theta <- theta - beta Phi^T D_rho ( Phi theta - c - gamma P_pi (Phi theta + tau log dpi/dmu) ),

which keeps the ``tau log dpi/dmu`` term inside the target (otherwise the critic learns the unregularised Q).
Schedules of TD steps per policy step: ``m_n = 1`` (single-loop actor-critic), constant ``m``,
``m_n = ceil(c log(n + 2))`` and ``m_n = ceil(c (n + 1))``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import logsumexp

from ..mdp import TabularMDP, _check_mu, check_policy, policy_evaluation, soft_value_iteration

__all__ = ["policy_mirror_descent", "td_schedule", "regularised_gap"]


def td_schedule(td_steps: int | str | Callable[[int], int], td_scale: float = 1.0) -> Callable[[int], int]:
    """The number of TD steps ``m_n`` before policy step ``n`` (n = 0, 1, ...).

    ``td_steps`` is an int (constant), ``"log"`` (``ceil(td_scale log(n + 2))``), ``"linear"``
    (``ceil(td_scale (n + 1))``) or a callable ``n -> m_n`` returning integers >= 1 (checked at every call; a
    fractional or smaller value raises ``ValueError``). ``td_scale`` multiplies the two named schedules only.
    """
    if not (np.isfinite(td_scale) and td_scale > 0):
        raise ValueError(f"td_scale must be a positive finite number, got {td_scale}")
    if isinstance(td_steps, str):
        if td_steps == "log":
            return lambda n: max(1, math.ceil(td_scale * math.log(n + 2)))
        if td_steps == "linear":
            return lambda n: max(1, math.ceil(td_scale * (n + 1)))
        raise ValueError(f"td_steps must be a positive int, 'log', 'linear' or a callable, got {td_steps!r}")
    if callable(td_steps):

        def checked(n: int) -> int:
            m = td_steps(n)
            integral = isinstance(m, (int, np.integer)) or (
                isinstance(m, (float, np.floating)) and float(m).is_integer()
            )
            if isinstance(m, (bool, np.bool_)) or not integral or m < 1:
                raise ValueError(f"td_steps schedule must return integers >= 1, got {m!r} at n = {n}")
            return int(m)

        return checked
    if isinstance(td_steps, bool) or not isinstance(td_steps, (int, np.integer)) or td_steps < 1:
        raise ValueError(f"td_steps must be a positive int, 'log', 'linear' or a callable, got {td_steps!r}")
    m = int(td_steps)
    return lambda n: m


def _policy_from_logits(z: np.ndarray, log_mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Normalised ``log dpi/dmu`` and ``pi`` from unnormalised logits ``z`` (log-sum-exp for Z)."""
    ell = z - logsumexp(z + log_mu, axis=1, keepdims=True)
    return ell, np.exp(ell + log_mu)


def _sampled_td(
    theta: np.ndarray,
    m: int,
    Phi: np.ndarray,
    c_flat: np.ndarray,
    cum_P: np.ndarray,
    pi: np.ndarray,
    soft_bonus: np.ndarray,
    gamma: float,
    beta: float,
    rho_flat: np.ndarray,
    batch: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``m`` minibatch semi-gradient TD(0) steps with transitions ``(s,a) ~ rho, s' ~ P(.|s,a), a' ~ pi(.|s')``:
    ``theta <- theta - beta Phi_B^T (Phi_B theta - c - gamma (Phi_B' theta + tau log dpi/dmu(a'|s'))) / B``."""
    S, A = pi.shape
    cum_pi = np.cumsum(pi, axis=1)
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging critic is reported by the caller
        for _ in range(m):
            idx = rng.choice(S * A, size=batch, p=rho_flat)
            s_, a_ = np.divmod(idx, A)
            u = rng.random((2, batch))
            s_next = np.minimum((u[0][:, None] > cum_P[s_, a_]).sum(axis=1), S - 1)
            a_next = np.minimum((u[1][:, None] > cum_pi[s_next]).sum(axis=1), A - 1)
            phi, phi_next = Phi[idx], Phi[s_next * A + a_next]
            delta = phi @ theta - c_flat[idx] - gamma * (phi_next @ theta + soft_bonus[s_next, a_next])
            theta = theta - beta * (phi.T @ delta) / batch
    return theta


def _check_distribution(x: np.ndarray | None, size: int, name: str) -> np.ndarray:
    """A probability vector of length ``size`` (uniform when None)."""
    if x is None:
        return np.full(size, 1.0 / size)
    x = np.asarray(x, dtype=float)
    if x.shape != (size,) or not np.all(np.isfinite(x)) or np.any(x < 0) or not np.isclose(x.sum(), 1.0):
        raise ValueError(
            f"{name} must be a probability vector of shape ({size},) (entries >= 0 summing to 1)"
        )
    return x


def _is_default(value: Any, default: Any) -> bool:
    if default is None or value is None:
        return value is default
    return isinstance(value, (int, float, str)) and not isinstance(value, bool) and value == default


def regularised_gap(
    mdp: TabularMDP,
    policy: np.ndarray,
    tau: float,
    *,
    mu: np.ndarray | None = None,
    rho0: np.ndarray | None = None,
    V_star: np.ndarray | None = None,
) -> float:
    """Value gap ``G = <rho0, V_tau^pi - V_tau^*>`` in cost form (``>= 0``), i.e. ``<rho0, V*_r - V^pi_r>``.

    Parameters
    ----------
    mdp : the MDP (rewards; costs ``c = -R``).
    policy : ``pi[s, a]`` (rows on the simplex) or a deterministic policy (integer actions of shape ``(S,)``).
    tau : KL-regularisation strength ``> 0``.
    mu : reference measure on actions (default uniform).
    rho0 : initial-state distribution (default uniform).
    V_star : the regularised optimal values (reward form) if already known; default by soft value iteration.
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    if isinstance(tau, bool) or not isinstance(tau, (int, float, np.integer, np.floating)):
        raise TypeError("tau must be a real number > 0")
    if not (np.isfinite(tau) and tau > 0):
        raise ValueError(f"tau must be a positive finite number, got {tau}")
    pi = check_policy(policy, mdp.n_states, mdp.n_actions)
    mu_ = _check_mu(mu, mdp.n_actions)
    rho0 = _check_distribution(rho0, mdp.n_states, "rho0")
    if V_star is None:
        V_star = soft_value_iteration(mdp, tau, mu=mu_)[0]
    else:
        V_star = np.asarray(V_star, dtype=float)
        if V_star.shape != (mdp.n_states,) or not np.all(np.isfinite(V_star)):
            raise ValueError(f"V_star must be a finite array of shape ({mdp.n_states},)")
    V_pi = policy_evaluation(mdp, pi, tau=tau, mu=mu_)[0]
    return float(rho0 @ (V_star - V_pi))


def policy_mirror_descent(
    mdp: TabularMDP,
    *,
    tau: float = 0.1,
    step_size: float = 1.0,
    n_iter: int = 300,
    critic: str = "exact",
    features: np.ndarray | None = None,
    td_steps: int | str | Callable[[int], int] = 1,
    td_scale: float = 1.0,
    td_step_size: float | None = None,
    td_mode: str = "expected",
    td_batch_size: int = 256,
    random_state: int | np.random.Generator | None = None,
    rho: np.ndarray | None = None,
    mu: np.ndarray | None = None,
    rho0: np.ndarray | None = None,
    log: bool = False,
) -> np.ndarray | tuple[np.ndarray, dict[str, Any]]:
    """Entropy-regularised policy mirror descent with an exact or a linear TD critic.

    Parameters
    ----------
    mdp : the MDP (rewards; costs are ``c = -R``).
    tau : entropy (KL to ``mu``) regularisation strength, ``> 0``.
    step_size : PMD step ``lambda > 0``; ``numpy.inf`` gives soft policy iteration.
    n_iter : number of policy steps ``N``.
    critic : ``"exact"`` (``Qhat_n = Q_tau^{pi_n}``, tabular policy) or ``"td"`` (linear TD critic).
    features : ``Phi`` of shape ``(S * A, d)`` (row ``s * A + a``) for the TD critic; default one-hot
    (tabular). With one-hot features, uniform ``rho`` and the default ``td_step_size`` one TD step is exactly
    one Bellman backup ``theta <- T^pi theta``; with any other features it is not.
    td_steps, td_scale : the TD-step schedule, see :func:`td_schedule`.
    td_step_size : TD step ``beta > 0``; default ``1 / lambda_max(Phi^T D_rho Phi)``.
    rho : sampling distribution over ``(s, a)`` for the expected TD update, shape ``(S, A)``; default uniform.
    mu : reference measure on actions (default uniform); ``pi_0 = mu``.
    rho0 : initial-state distribution of the gap (default uniform).
    td_mode : ``"expected"`` (the mean-path TD update the paper analyses) or ``"sampled"`` (an extension: each TD
        step averages ``td_batch_size`` transitions ``(s, a) ~ rho, s' ~ P, a' ~ pi_n``, an unbiased estimate of
        the expected update; a smaller ``td_step_size`` than the default usually suits it).
    td_batch_size : transitions per sampled TD step.
    random_state : seed or generator for ``td_mode="sampled"``.
    log : also return a dict with per-iteration ``gap`` (``N + 1``), ``kl_max`` (``max_s KL(pi_n|mu)``),
        ``critic_error`` (``||Qhat_n - Q_tau^{pi_n}||_inf``), ``td_steps`` and the final ``theta``/``psi``.

    Returns
    -------
    pi : final policy ``(S, A)``, and the log when ``log=True``.

    With ``critic="exact"`` the critic parameters (``features``, ``rho``, ``td_steps``, ``td_scale``,
    ``td_step_size``, ``td_mode``, ``td_batch_size``, ``random_state``) have no effect; passing any of them
    raises a ``UserWarning`` naming them.
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    for name, val in (("tau", tau), ("step_size", step_size)):
        if isinstance(val, bool) or not isinstance(val, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a real number > 0")
    if not (np.isfinite(tau) and tau > 0):
        raise ValueError(f"tau must be a positive finite number, got {tau}")
    if not (step_size > 0 and not np.isnan(step_size)):
        raise ValueError(
            f"step_size must be a positive number (numpy.inf: soft policy iteration), got {step_size}"
        )
    soft_pi = bool(np.isinf(step_size))
    if isinstance(n_iter, bool) or not isinstance(n_iter, (int, np.integer)) or n_iter < 1:
        raise ValueError(f"n_iter must be an integer >= 1, got {n_iter!r}")
    if td_mode not in ("expected", "sampled"):
        raise ValueError(f"td_mode must be 'expected' or 'sampled', got {td_mode!r}")
    if (
        isinstance(td_batch_size, bool)
        or not isinstance(td_batch_size, (int, np.integer))
        or td_batch_size < 1
    ):
        raise ValueError(f"td_batch_size must be an integer >= 1, got {td_batch_size!r}")
    if critic not in ("exact", "td"):
        raise ValueError(f"critic must be 'exact' or 'td', got {critic!r}")
    if critic == "exact":
        td_args = {
            "features": (features, None),
            "rho": (rho, None),
            "td_steps": (td_steps, 1),
            "td_scale": (td_scale, 1.0),
            "td_step_size": (td_step_size, None),
            "td_mode": (td_mode, "expected"),
            "td_batch_size": (td_batch_size, 256),
            "random_state": (random_state, None),
        }
        ignored = [k for k, (v, default) in td_args.items() if not _is_default(v, default)]
        if ignored:
            warnings.warn(
                f"critic='exact' ignores {', '.join(ignored)} (they configure the TD critic; use critic='td')",
                UserWarning,
                stacklevel=2,
            )
    S, A, g = mdp.n_states, mdp.n_actions, mdp.gamma
    mu_ = _check_mu(mu, A)
    log_mu = np.log(mu_)
    rho0 = _check_distribution(rho0, S, "rho0")
    c = -mdp.R
    schedule = td_schedule(td_steps, td_scale)

    if critic == "td":
        Phi = np.eye(S * A) if features is None else np.asarray(features, dtype=float)
        if Phi.ndim != 2 or Phi.shape[0] != S * A or Phi.shape[1] < 1:
            raise ValueError(f"features must have shape (S * A, d) = ({S * A}, d), got {Phi.shape}")
        if not np.all(np.isfinite(Phi)):
            raise ValueError("features must be finite")
        if rho is None:
            rho_flat = np.full(S * A, 1.0 / (S * A))
        else:
            rho_flat = np.asarray(rho, dtype=float).reshape(-1)
            if rho_flat.shape != (S * A,) or np.any(rho_flat < 0) or not np.isclose(rho_flat.sum(), 1.0):
                raise ValueError(f"rho must be a probability array of shape ({S}, {A})")
        cov = Phi.T @ (rho_flat[:, None] * Phi)
        eig = np.linalg.eigvalsh(cov)
        if eig[0] <= 1e-12 * max(eig[-1], 1e-300):
            raise ValueError(
                "features must have full column rank under rho (lambda_min(Phi^T D_rho Phi) > 0)"
            )
        if td_step_size is None:
            beta = 1.0 / eig[-1]
        else:
            if not (np.isfinite(td_step_size) and td_step_size > 0):
                raise ValueError(f"td_step_size must be a positive finite number, got {td_step_size}")
            beta = float(td_step_size)
        d = Phi.shape[1]
        theta = np.zeros(d)
        psi = np.zeros(d)
        wPhiT = (Phi * rho_flat[:, None]).T  # Phi^T D_rho
        if td_mode == "sampled":
            rng = (
                random_state
                if isinstance(random_state, np.random.Generator)
                else np.random.default_rng(random_state)
            )
            cum_P = np.cumsum(mdp.P, axis=2)
            c_flat = c.reshape(-1)
    V_star = soft_value_iteration(mdp, tau, mu=mu_)[0] if log else None

    z = np.zeros((S, A))  # logits of pi_0 = mu
    ell, pi = _policy_from_logits(z, log_mu)
    gaps, kls, crit_err, steps = [], [], [], []

    def record(pi: np.ndarray, ell: np.ndarray, Qhat: np.ndarray | None) -> None:
        V_r, Q_r = policy_evaluation(mdp, pi, tau=tau, mu=mu_)
        gaps.append(float(rho0 @ (V_star - V_r)))
        kls.append(float(np.max(np.sum(pi * ell, axis=1))))
        if Qhat is not None:
            crit_err.append(float(np.max(np.abs(Qhat + Q_r))))  # Q_cost = -Q_reward

    for n in range(int(n_iter)):
        if critic == "exact":
            _, Q_r = policy_evaluation(mdp, pi, tau=tau, mu=mu_)
            Qhat = -Q_r
            if log:
                record(pi, ell, Qhat)
            z = -Qhat / tau if soft_pi else (ell - step_size * Qhat) / (1.0 + step_size * tau)
        else:
            m = schedule(n)
            soft_next = np.sum(pi * (tau * ell), axis=1)  # E_{a'~pi} tau log dpi/dmu(a'|s')
            if td_mode == "expected":
                for _ in range(m):
                    Qhat = (Phi @ theta).reshape(S, A)
                    target = c + g * (mdp.P @ (np.sum(pi * Qhat, axis=1) + soft_next))
                    theta = theta - beta * (wPhiT @ (Qhat - target).reshape(-1))
            else:
                theta = _sampled_td(
                    theta, m, Phi, c_flat, cum_P, pi, tau * ell, g, beta, rho_flat, td_batch_size, rng
                )
            if not np.all(np.isfinite(theta)):
                raise FloatingPointError(
                    f"the TD critic diverged at policy step {n}; reduce td_step_size (beta = {beta:.3g})"
                )
            Qhat = (Phi @ theta).reshape(S, A)
            if log:
                record(pi, ell, Qhat)
                steps.append(m)
            psi = -theta / tau if soft_pi else (psi - step_size * theta) / (1.0 + step_size * tau)
            z = (Phi @ psi).reshape(S, A)
        ell, pi = _policy_from_logits(z, log_mu)
        if not np.all(np.isfinite(pi)):
            raise FloatingPointError(
                f"policy became non-finite at iteration {n}; reduce step_size or td_step_size"
            )
    if not log:
        return pi
    record(pi, ell, None)
    out: dict[str, Any] = {
        "gap": np.array(gaps),
        "kl_max": np.array(kls),
        "critic_error": np.array(crit_err),
        "td_steps": np.array(steps, dtype=int),
    }
    if critic == "td":
        out["theta"] = theta
        out["psi"] = psi
    return pi, out
