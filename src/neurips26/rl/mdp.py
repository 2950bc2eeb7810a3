"""A small tabular MDP toolkit shared by the ``neurips26.rl`` papers.

Convention: rewards are maximised. An MDP is ``M = (S, A, P, R, gamma)`` with ``P[s, a, s'] = p(s'|s, a)``
(every row sums to one), ``R[s, a]`` finite and ``gamma in [0, 1)``. Policies are arrays ``pi[s, a]`` with
rows on the simplex. Papers written with costs (e.g. policy mirror descent) use ``R = -c``; their values are
the negated reward values.

Solvers
-------
- :func:`value_iteration`: ``V*(s) = max_a R(s,a) + gamma sum_s' P(s'|s,a) V*(s')`` (Bellman optimality).
- :func:`soft_value_iteration`: the KL-regularised (soft) Bellman operator with reference measure ``mu``,
  ``V(s) = tau log sum_a mu(a) exp(Q(s,a) / tau)``, ``Q = R + gamma P V``; the optimal regularised policy is
  ``pi*(a|s) = mu(a) exp((Q(s,a) - V(s)) / tau)``.
- :func:`policy_evaluation`: exact ``V^pi``/``Q^pi`` by one linear solve of ``(I - gamma P_pi) V = r_pi``
  with the optional KL term ``r_pi(s) = sum_a pi(a|s) (R(s,a) - tau log(pi(a|s)/mu(a)))``.

Generators
----------
- :func:`random_mdp`: Dirichlet transitions, uniform rewards.
- :func:`chain_mdp`: a chain where the "forward" action advances with probability ``p``, so ``p`` controls
  how hard the far end of the chain is to reach (connectivity).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "TabularMDP",
    "random_mdp",
    "chain_mdp",
    "value_iteration",
    "soft_value_iteration",
    "policy_evaluation",
    "greedy_policy",
    "check_policy",
]


def _check_gamma(gamma: float) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.integer, np.floating)):
        raise TypeError(f"gamma must be a real number in [0, 1), got {type(gamma).__name__}")
    gamma = float(gamma)
    if not (0.0 <= gamma < 1.0):
        raise ValueError(f"gamma must lie in [0, 1), got {gamma}")
    return gamma


@dataclass(frozen=True)
class TabularMDP:
    """A validated finite discounted MDP.

    Parameters
    ----------
    P : array (S, A, S), transition kernel, ``P[s, a]`` a probability vector over next states.
    R : array (S, A), finite rewards.
    gamma : discount factor in [0, 1).
    atol : tolerance on the row sums of ``P``.
    """

    P: np.ndarray
    R: np.ndarray
    gamma: float
    atol: float = 1e-8

    def __post_init__(self) -> None:
        P = np.asarray(self.P, dtype=float)
        R = np.asarray(self.R, dtype=float)
        if P.ndim != 3 or P.shape[0] != P.shape[2] or P.shape[0] == 0 or P.shape[1] == 0:
            raise ValueError(f"P must have shape (S, A, S) with S, A >= 1, got {P.shape}")
        if R.shape != P.shape[:2]:
            raise ValueError(f"R must have shape (S, A) = {P.shape[:2]}, got {R.shape}")
        if not np.all(np.isfinite(P)):
            raise ValueError("P must be finite (no NaN/inf)")
        if np.any(P < 0):
            raise ValueError("P must be non-negative")
        if not np.allclose(P.sum(axis=2), 1.0, atol=self.atol, rtol=0):
            raise ValueError("P rows must sum to 1 (P[s, a].sum() == 1 for every s, a)")
        if not np.all(np.isfinite(R)):
            raise ValueError("R must be finite (no NaN/inf)")
        gamma = _check_gamma(self.gamma)
        P = P / P.sum(axis=2, keepdims=True)
        P.setflags(write=False)
        R = R.copy()
        R.setflags(write=False)
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "R", R)
        object.__setattr__(self, "gamma", gamma)

    @property
    def n_states(self) -> int:
        return int(self.P.shape[0])

    @property
    def n_actions(self) -> int:
        return int(self.P.shape[1])

    def policy_matrix(self, policy: np.ndarray) -> np.ndarray:
        """State-to-state kernel ``P_pi[s, s'] = sum_a pi(a|s) P(s'|s, a)``."""
        pi = check_policy(policy, self.n_states, self.n_actions)
        return np.einsum("sa,sat->st", pi, self.P)

    def step(self, state: int, action: int, rng: np.random.Generator) -> int:
        """Sample a next state from ``P[state, action]``."""
        return int(rng.choice(self.n_states, p=self.P[state, action]))


def check_policy(policy: np.ndarray, n_states: int, n_actions: int, name: str = "policy") -> np.ndarray:
    """Validate a stochastic policy ``pi[s, a]`` (rows on the simplex); a 1-D integer array is a
    deterministic one."""
    pi = np.asarray(policy)
    if pi.ndim == 1:
        if pi.shape != (n_states,) or not np.issubdtype(pi.dtype, np.integer):
            raise ValueError(
                f"{name} as a deterministic policy must be an integer array of shape ({n_states},)"
            )
        if np.any(pi < 0) or np.any(pi >= n_actions):
            raise ValueError(f"{name} actions must lie in [0, {n_actions - 1}]")
        out = np.zeros((n_states, n_actions))
        out[np.arange(n_states), pi] = 1.0
        return out
    pi = pi.astype(float)
    if pi.shape != (n_states, n_actions):
        raise ValueError(f"{name} must have shape ({n_states}, {n_actions}), got {pi.shape}")
    if not np.all(np.isfinite(pi)) or np.any(pi < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    if not np.allclose(pi.sum(axis=1), 1.0, atol=1e-8):
        raise ValueError(f"{name} rows must sum to 1")
    return pi


def _rng(random_state: int | np.random.Generator | None) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(random_state)


def random_mdp(
    n_states: int,
    n_actions: int,
    gamma: float = 0.9,
    *,
    concentration: float = 1.0,
    reward_range: tuple[float, float] = (0.0, 1.0),
    random_state: int | np.random.Generator | None = None,
) -> TabularMDP:
    """A random MDP: ``P[s, a] ~ Dirichlet(concentration * 1)``, ``R[s, a] ~ U(reward_range)``."""
    if not isinstance(n_states, (int, np.integer)) or n_states < 1:
        raise ValueError(f"n_states must be an integer >= 1, got {n_states!r}")
    if not isinstance(n_actions, (int, np.integer)) or n_actions < 1:
        raise ValueError(f"n_actions must be an integer >= 1, got {n_actions!r}")
    if not (np.isfinite(concentration) and concentration > 0):
        raise ValueError(f"concentration must be a positive finite number, got {concentration}")
    lo, hi = reward_range
    if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
        raise ValueError(f"reward_range must be finite (lo, hi) with lo <= hi, got {reward_range}")
    rng = _rng(random_state)
    P = rng.dirichlet(np.full(n_states, float(concentration)), size=(n_states, n_actions))
    R = rng.uniform(lo, hi, size=(n_states, n_actions))
    return TabularMDP(P, R, gamma)


def chain_mdp(
    n_states: int,
    p: float,
    gamma: float = 0.9,
    *,
    rewards: np.ndarray | None = None,
) -> TabularMDP:
    """A two-action chain with controllable connectivity.

    Action 0 ("back") returns to state 0. Action 1 ("forward") moves ``s -> s + 1`` with probability ``p`` and
    stays at ``s`` otherwise; at the last state it stays with probability ``p`` and falls back to 0 otherwise.
    The smaller ``p``, the longer the expected time to reach the end of the chain (``(S - 1) / p`` steps).
    Default rewards: 0.05 for "back" at state 0, 1 for "forward" at the last state, 0 elsewhere
    (RiverSwim-like).
    """
    if not isinstance(n_states, (int, np.integer)) or n_states < 2:
        raise ValueError(f"n_states must be an integer >= 2, got {n_states!r}")
    if not (0.0 < p <= 1.0):
        raise ValueError(f"p must lie in (0, 1], got {p}")
    S = int(n_states)
    P = np.zeros((S, 2, S))
    P[:, 0, 0] = 1.0
    for s in range(S - 1):
        P[s, 1, s + 1] = p
        P[s, 1, s] += 1.0 - p
    P[S - 1, 1, S - 1] = p
    P[S - 1, 1, 0] += 1.0 - p
    if rewards is None:
        R = np.zeros((S, 2))
        R[0, 0] = 0.05
        R[S - 1, 1] = 1.0
    else:
        R = np.asarray(rewards, dtype=float)
    return TabularMDP(P, R, gamma)


def _check_tol(tol: float, max_iter: int) -> None:
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive finite number, got {tol}")
    if not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")


def value_iteration(
    mdp: TabularMDP, *, tol: float = 1e-10, max_iter: int = 100_000, V0: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Optimal values by value iteration; returns ``(V*, Q*, greedy policy)``.

    Stops when ``||V_{k+1} - V_k||_inf <= tol (1 - gamma) / (2 gamma)``, so ``||V_k - V*||_inf <= tol / 2``.
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    _check_tol(tol, max_iter)
    g = mdp.gamma
    V = np.zeros(mdp.n_states) if V0 is None else np.asarray(V0, dtype=float).copy()
    stop = tol * (1 - g) / (2 * g) if g > 0 else np.inf
    for _ in range(int(max_iter)):
        Q = mdp.R + g * (mdp.P @ V)
        V_new = Q.max(axis=1)
        done = np.max(np.abs(V_new - V)) <= stop
        V = V_new
        if done:
            break
    Q = mdp.R + g * (mdp.P @ V)
    return V, Q, greedy_policy(Q)


def greedy_policy(Q: np.ndarray) -> np.ndarray:
    """Deterministic greedy policy ``argmax_a Q[s, a]`` (first maximiser on ties)."""
    Q = np.asarray(Q, dtype=float)
    if Q.ndim != 2:
        raise ValueError(f"Q must have shape (S, A), got {Q.shape}")
    return np.argmax(Q, axis=1)


def _check_mu(mu: np.ndarray | None, n_actions: int) -> np.ndarray:
    if mu is None:
        return np.full(n_actions, 1.0 / n_actions)
    mu = np.asarray(mu, dtype=float)
    if mu.shape != (n_actions,) or not np.all(np.isfinite(mu)) or np.any(mu <= 0):
        raise ValueError(f"mu must be a positive probability vector of shape ({n_actions},)")
    if not np.isclose(mu.sum(), 1.0, atol=1e-8):
        raise ValueError("mu must sum to 1")
    return mu


def soft_value_iteration(
    mdp: TabularMDP,
    tau: float,
    *,
    mu: np.ndarray | None = None,
    tol: float = 1e-12,
    max_iter: int = 100_000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """KL-regularised optimal values; returns ``(V_tau*, Q_tau*, pi_tau*)``.

    Iterates the soft Bellman operator ``V(s) = tau logsumexp_a(Q(s,a)/tau + log mu(a))``, ``Q = R + gamma
    P V``, a ``gamma``-contraction, until ``||V_{k+1} - V_k||_inf <= tol``. This maximises
    ``E[sum_n gamma^n (R(s_n,a_n) - tau KL(pi(.|s_n) | mu))]``.
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    if not (np.isfinite(tau) and tau > 0):
        raise ValueError(f"tau must be a positive finite number, got {tau}")
    _check_tol(tol, max_iter)
    log_mu = np.log(_check_mu(mu, mdp.n_actions))
    g = mdp.gamma
    V = np.zeros(mdp.n_states)
    for _ in range(int(max_iter)):
        Q = mdp.R + g * (mdp.P @ V)
        V_new = tau * logsumexp(Q / tau + log_mu, axis=1)
        done = np.max(np.abs(V_new - V)) <= tol
        V = V_new
        if done:
            break
    Q = mdp.R + g * (mdp.P @ V)
    V = tau * logsumexp(Q / tau + log_mu, axis=1)
    pi = np.exp(Q / tau + log_mu - V[:, None] / tau)
    pi /= pi.sum(axis=1, keepdims=True)
    return V, Q, pi


def policy_evaluation(
    mdp: TabularMDP,
    policy: np.ndarray,
    *,
    tau: float = 0.0,
    mu: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``(V^pi, Q^pi)`` with optional KL regularisation ``tau >= 0`` towards ``mu``.

    Solves ``(I - gamma P_pi) V = r_pi`` with ``r_pi(s) = sum_a pi(a|s)(R(s,a) - tau log(pi(a|s)/mu(a)))``
    and returns ``Q^pi = R + gamma P V^pi``.
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    if not (np.isfinite(tau) and tau >= 0):
        raise ValueError(f"tau must be a non-negative finite number, got {tau}")
    pi = check_policy(policy, mdp.n_states, mdp.n_actions)
    r_pi = np.sum(pi * mdp.R, axis=1)
    if tau > 0:
        mu_ = _check_mu(mu, mdp.n_actions)
        with np.errstate(divide="ignore", invalid="ignore"):
            kl = np.where(pi > 0, pi * (np.log(pi) - np.log(mu_)), 0.0).sum(axis=1)
        r_pi = r_pi - tau * kl
    P_pi = np.einsum("sa,sat->st", pi, mdp.P)
    V = np.linalg.solve(np.eye(mdp.n_states) - mdp.gamma * P_pi, r_pi)
    Q = mdp.R + mdp.gamma * (mdp.P @ V)
    return V, Q
