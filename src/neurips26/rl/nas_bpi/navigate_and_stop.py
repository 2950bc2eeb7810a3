"""Navigate-and-Stop (MDP-NaS): best-policy identification in an unknown discounted MDP from one trajectory.

Paper (2026, arXiv id unknown): "Non-asymptotic sample complexity of Navigate-and-Stop for best policy
identification" (descriptive title; full text not available). The algorithm it analyses is MDP-NaS of Al
Marjani, Garivier & Proutiere, "Navigating to the Best Policy in Markov Decision Processes", NeurIPS 2021,
arXiv 2106.02847. The whole method below is **reconstructed** from our digest (marked [R] there):

* Sampling rule (C-navigation). Every ``recompute_every`` steps solve ``w*_t = argmin_{w in Omega(M_hat_t)}
  U(M_hat_t, w)`` on the empirical model (cvxpy + Clarabel, see :mod:`.characteristic_time`), take the
  oracle policy ``pi^o_t(a|s) = w*_t(s,a) / sum_b w*_t(s,b)`` and play ``a_t ~ eps_t uniform + (1 - eps_t)
  bar pi_t`` where ``bar pi_t`` is the Cesaro average of the oracle policies so far and
  ``eps_t = t^(-1/(m+1))``, ``m`` the largest shortest-path length between two states in the MDP's support
  graph (computed from a known MDP; for an environment with unknown transitions, ``S - 1``, the largest value
  it can take in a communicating MDP, unless the user gives it).
* Stopping rule (GLR type). Stop at the first test time with ``t / U(M_hat_t, N(t)/t) >= beta(N(t), delta)``,
  ``beta(N, delta) = log(1/delta) + (S-1) sum_{s,a} log(e (1 + N(s,a)/(S-1)))`` ("theoretical"), or the
  heuristic ``log((1 + log t)/delta)`` ("practical", clearly not covered by the delta-PAC analysis).
* Decision: the greedy optimal policy of ``M_hat_tau``.

Rewards are deterministic and revealed at the first visit of a pair; transitions are estimated by counts (an
unvisited pair gets a uniform row).

Under-sampled pairs. The stopping statistic is 0 until every pair has ``min_visits`` visits, and it never lets a
pair drop out: ``U`` uses the one-step span over all states, so a pair seen once (a point-mass empirical row,
empirical variance 0) keeps ``H_hat(s, a) >= 6 (span(V_hat) / (2 D_hat))^(4/3) > 0`` and caps the statistic at
``N(s, a) / H_hat(s, a)``. A test whose empirical model has a tie in ``Q_hat`` or a constant ``V_hat`` (where ``U``
is undefined) does not stop.

Environments. :meth:`NavigateAndStop.fit` takes a :class:`~neurips26.rl.mdp.TabularMDP` (simulated, fast) or
any gymnasium-style environment with discrete spaces (``observation_space.n``, ``action_space.n``,
``reset(seed=...) -> (obs, info)``, ``step(a) -> (obs, reward, terminated, truncated, info)``) whose transitions
are unknown; :class:`TabularEnv` wraps a known MDP in that interface. The problem is a continuing one: when an
episodic environment terminates or truncates, it is reset and the reset observation is taken as the next state.

Baselines (``exploration=``): ``"uniform"`` (uniformly random navigation, same stopping rule), ``"oracle"``
(tracks the true model's ``w*``; idealised, needs a known MDP), ``"no_forced"`` (NaS without forced exploration,
``eps_t = 0``).
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..mdp import TabularMDP, _check_gamma
from .characteristic_time import (
    AllocationSolver,
    _check_size,
    _policy_gaps,
    _terms_from_values,
    _u_terms,
    bound_terms,
)

__all__ = ["NavigateAndStop", "TabularEnv", "DiscreteSpace", "support_path_length", "stopping_threshold"]

EXPLORATIONS = ("nas", "uniform", "oracle", "no_forced")
THRESHOLDS = ("theoretical", "practical")


def support_path_length(P: np.ndarray) -> int:
    """``m``: the largest shortest-path length between two states in the support graph of ``P`` (BFS).

    ``P`` has shape ``(S, A, S)``; an edge ``s -> s'`` exists when some action has ``P[s, a, s'] > 0``. Raises
    ``ValueError`` on a malformed ``P`` or when some state cannot reach another (the MDP is not communicating).
    """
    P = np.asarray(P, dtype=float)
    if P.ndim != 3 or P.shape[0] != P.shape[2] or min(P.shape) < 1:
        raise ValueError(f"P must have shape (S, A, S) with S, A >= 1, got {P.shape}")
    if not np.all(np.isfinite(P)) or np.any(P < 0):
        raise ValueError("P must be finite and non-negative")
    S = P.shape[0]
    adj = [np.flatnonzero((P[s] > 0).any(axis=0)).tolist() for s in range(S)]
    m = 0
    for src in range(S):
        dist = [-1] * S
        dist[src] = 0
        queue = deque([src])
        while queue:
            u = queue.popleft()
            for v in adj[u]:
                if dist[v] < 0:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        if min(dist) < 0:
            raise ValueError("mdp must be communicating: some state is unreachable from another")
        m = max(m, max(dist))
    return max(m, 1)


def stopping_threshold(counts: np.ndarray, delta: float, t: int, kind: str = "theoretical") -> float:
    """The threshold ``beta(N(t), delta)`` of the GLR stopping rule.

    Parameters
    ----------
    counts : ``N(s, a)``, visit counts of shape ``(S, A)`` (finite, non-negative).
    delta : confidence level in (0, 1).
    t : the current time (an integer >= 1).
    kind : ``theoretical``: ``log(1/delta) + (S-1) sum_{s,a} log(e (1 + N(s,a)/(S-1)))``;
        ``practical``: ``log((1 + log t)/delta)`` (a heuristic, labelled as such in every report).
    """
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)) or not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
        raise ValueError(f"t must be an integer >= 1, got {t!r}")
    if kind not in THRESHOLDS:
        raise ValueError(f"kind must be one of {THRESHOLDS}, got {kind!r}")
    if kind == "practical":
        return math.log((1.0 + math.log(t)) / delta)
    N = np.asarray(counts, dtype=float)
    if N.ndim != 2 or min(N.shape) < 1:
        raise ValueError(f"counts must be a 2-D array N(s, a) of shape (S, A), got shape {N.shape}")
    if not np.all(np.isfinite(N)) or np.any(N < 0):
        raise ValueError("counts must be finite and non-negative")
    k = max(N.shape[0] - 1, 1)
    return math.log(1.0 / delta) + k * float(np.sum(1.0 + np.log1p(N / k)))


@dataclass(frozen=True)
class DiscreteSpace:
    """A finite space ``{0, ..., n - 1}`` (the part of ``gymnasium.spaces.Discrete`` NaS uses)."""

    n: int

    def contains(self, x: Any) -> bool:
        return isinstance(x, (int, np.integer)) and 0 <= int(x) < self.n


class TabularEnv:
    """A gymnasium-style environment simulating a known :class:`~neurips26.rl.mdp.TabularMDP`.

    ``reset(seed=None) -> (state, info)`` starts at ``initial_state``; ``step(a) -> (next_state, reward,
    terminated, truncated, info)`` samples ``p(.|s, a)`` and pays ``R[s, a]``; the task is continuing, so
    ``terminated`` and ``truncated`` are always False. Useful to run code written for environments on an MDP
    whose answer is known.
    """

    def __init__(self, mdp: TabularMDP, initial_state: int = 0) -> None:
        if not isinstance(mdp, TabularMDP):
            raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
        if not isinstance(initial_state, (int, np.integer)) or not (0 <= initial_state < mdp.n_states):
            raise ValueError(f"initial_state must be an integer in [0, {mdp.n_states - 1}]")
        self.mdp = mdp
        self.initial_state = int(initial_state)
        self.observation_space = DiscreteSpace(mdp.n_states)
        self.action_space = DiscreteSpace(mdp.n_actions)
        self._cdf = np.cumsum(mdp.P, axis=2)
        self._rng = np.random.default_rng()
        self._state: int | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._state = self.initial_state
        return self._state, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an integer in [0, {self.action_space.n - 1}], got {action!r}")
        s, a = self._state, int(action)
        s2 = min(
            int(np.searchsorted(self._cdf[s, a], self._rng.random(), side="right")), self.mdp.n_states - 1
        )
        self._state = s2
        return s2, float(self.mdp.R[s, a]), False, False, {}


def _space_size(env: Any, name: str) -> int:
    space = getattr(env, name, None)
    n = getattr(space, "n", None)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise TypeError(
            f"env must be a TabularMDP or a gymnasium-style environment with a discrete {name} "
            f"(an object with an integer attribute n >= 1); got {type(env).__name__}.{name} = {space!r}"
        )
    return int(n)


def _glr_statistic(
    P: np.ndarray, V: np.ndarray, Q: np.ndarray, gamma: float, N: np.ndarray, reward_terms: bool
) -> tuple[float, np.ndarray] | None:
    """The stopping statistic ``t / U(M_hat, N / t) = 1 / (max_{a != pi(s)} H/N + H_star / min N(s, pi(s)))`` and
    the greedy policy of the empirical model, or None where ``U`` is undefined (a tie in ``Q_hat``, a constant
    ``V_hat``). ``H`` and ``H_star`` come from :func:`.characteristic_time._u_terms`, the oracle's own formula.
    Every pair counts (the span runs over all states, so ``H_hat > 0`` off the policy)."""
    pi, opt, gaps, gap_min = _policy_gaps(V, Q)
    v_lo, v_hi = float(V.min()), float(V.max())
    if not (gap_min > 1e-12 and v_hi - v_lo > 1e-12 * max(1.0, abs(v_lo), abs(v_hi))):
        return None
    H, H_star = _u_terms(P, V, opt, gaps, gap_min, gamma, reward_terms)
    denom = float((H / N).max()) + H_star / float(N[opt].min())
    return 1.0 / denom, pi


class NavigateAndStop:
    """MDP-NaS: navigate one trajectory of an unknown MDP until its best policy is identified with confidence.

    Parameters
    ----------
    delta : confidence level in (0, 1); the answer is wrong with probability at most ``delta``.
    exploration : ``"nas"`` (C-navigation), ``"uniform"``, ``"oracle"`` (true-model allocation; a known MDP
        only) or ``"no_forced"``.
    threshold : ``"theoretical"`` (the delta-PAC threshold) or ``"practical"`` (the heuristic
        ``log((1 + log t)/delta)``).
    recompute_every : steps between two solves of the allocation program (``K``).
    stop_every : steps between two evaluations of the stopping rule.
    max_steps : budget; a run that has not stopped by then ends with ``stopped_ = False`` and a
        ``sklearn.exceptions.ConvergenceWarning`` giving the last statistic and threshold.
    min_visits : the stopping rule is evaluated only once every pair has at least this many visits (>= 1).
    gamma : discount factor in [0, 1); required for an environment, taken from the MDP for a ``TabularMDP``
        (where a different value is an error).
    path_length : ``m`` of the forced-exploration rate ``t^(-1/(m+1))``; default: by BFS on a known MDP's
        support, ``S - 1`` (the largest possible in a communicating MDP) for an environment.
    reward_terms : keep the reward terms T1, T3 in ``U`` (default False: rewards are deterministic and known).
    monitor_deltas : extra confidence levels ``>= delta``; the first time the stopping rule would have fired
        for each is recorded (``crossing_times_``, ``crossing_policies_``) along the same trajectory (the
        sampling rule does not depend on ``delta``), which gives common-random-number comparisons across deltas.
    initial_state : the state ``s_0`` of a ``TabularMDP`` (an environment starts where its ``reset`` puts it).
    random_state : seed or ``numpy.random.Generator`` (an environment is reset once with a seed drawn from it).

    Attributes
    ----------
    policy_ : the identified deterministic policy (array of actions).
    stopping_time_ : ``tau`` (number of transitions observed).
    stopped_ : whether the stopping rule fired within ``max_steps``.
    states_, actions_ : the trajectory ``s_0..s_{tau-1}``, ``a_0..a_{tau-1}``.
    counts_ : ``N(s, a, s')`` at the stop.
    rewards_ : the rewards ``R[s, a]`` revealed so far (NaN for a pair never visited).
    statistic_ : ``(t, t / U(M_hat_t, N/t))`` at each stopping test.
    crossing_times_, crossing_policies_ : per monitored ``delta`` (including ``delta``).
    oracle_policy_ : the Cesaro-averaged oracle policy at the stop.
    n_allocations_, n_solver_fallbacks_ : allocation solves, and those that fell back to the generative one.
    path_length_ : ``m`` of the forced-exploration rate.
    n_states_, n_actions_, gamma_ : the problem's sizes and discount.
    """

    def __init__(
        self,
        delta: float = 0.05,
        *,
        exploration: str = "nas",
        threshold: str = "theoretical",
        recompute_every: int = 200,
        stop_every: int = 10,
        max_steps: int = 1_000_000,
        min_visits: int = 1,
        gamma: float | None = None,
        path_length: int | None = None,
        reward_terms: bool = False,
        monitor_deltas: tuple[float, ...] = (),
        initial_state: int = 0,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.delta = delta
        self.exploration = exploration
        self.threshold = threshold
        self.recompute_every = recompute_every
        self.stop_every = stop_every
        self.max_steps = max_steps
        self.min_visits = min_visits
        self.gamma = gamma
        self.path_length = path_length
        self.reward_terms = reward_terms
        self.monitor_deltas = monitor_deltas
        self.initial_state = initial_state
        self.random_state = random_state

    # --- validation ---------------------------------------------------------------------------------
    def _validate(self, S: int, A: int) -> tuple[float, list[float]]:
        if A < 2:
            raise ValueError("mdp must have at least 2 actions (n_actions >= 2)")
        if S < 2:
            raise ValueError("mdp must have at least 2 states (n_states >= 2)")
        delta = self.delta
        if (
            isinstance(delta, bool)
            or not isinstance(delta, (int, float, np.floating))
            or not (0.0 < delta < 1.0)
        ):
            raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        if self.exploration not in EXPLORATIONS:
            raise ValueError(f"exploration must be one of {EXPLORATIONS}, got {self.exploration!r}")
        if self.threshold not in THRESHOLDS:
            raise ValueError(f"threshold must be one of {THRESHOLDS}, got {self.threshold!r}")
        for name in ("recompute_every", "stop_every", "max_steps", "min_visits"):
            _check_size(name, getattr(self, name), 1)
        if self.path_length is not None:
            _check_size("path_length", self.path_length, 1)
        if not isinstance(self.reward_terms, (bool, np.bool_)):
            raise TypeError(f"reward_terms must be a bool, got {type(self.reward_terms).__name__}")
        mon = sorted({float(delta), *[float(d) for d in self.monitor_deltas]})
        if any(not (delta <= d < 1.0) for d in mon):
            raise ValueError(
                f"monitor_deltas must lie in [delta, 1) = [{delta}, 1), got {self.monitor_deltas!r}"
            )
        return float(delta), mon

    def _problem(self, env: Any, rng: np.random.Generator) -> tuple[int, int, float, int, int, Callable, Any]:
        """Sizes, discount, path length, initial state and the transition sampler of ``env``."""
        if isinstance(env, TabularMDP):
            S, A = env.n_states, env.n_actions
            self._validate(S, A)
            if self.gamma is not None and _check_gamma(self.gamma) != env.gamma:
                raise ValueError(
                    f"gamma={self.gamma} differs from the MDP's discount {env.gamma}; leave it None"
                )
            if not isinstance(self.initial_state, (int, np.integer)) or not (0 <= self.initial_state < S):
                raise ValueError(f"initial_state must be an integer in [0, {S - 1}]")
            m = support_path_length(env.P) if self.path_length is None else int(self.path_length)
            cdf_P = np.cumsum(env.P, axis=2).tolist()
            R = env.R.tolist()
            last = S - 1

            def transition(s: int, a: int, u: float) -> tuple[int, float]:
                row = cdf_P[s][a]
                s2 = 0
                while s2 < last and u >= row[s2]:
                    s2 += 1
                return s2, R[s][a]

            return S, A, env.gamma, m, int(self.initial_state), transition, env
        if not (callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None))):
            raise TypeError(
                "env must be a TabularMDP or a gymnasium-style environment with reset() and step(); "
                f"got {type(env).__name__}"
            )
        S, A = _space_size(env, "observation_space"), _space_size(env, "action_space")
        self._validate(S, A)
        if self.gamma is None:
            raise ValueError("gamma (the discount in [0, 1)) is required for an environment")
        gamma = _check_gamma(self.gamma)
        if self.exploration == "oracle":
            raise ValueError("exploration='oracle' needs the true model: pass a TabularMDP")
        m = S - 1 if self.path_length is None else int(self.path_length)

        def observe(obs: Any) -> int:
            if (
                isinstance(obs, (bool, np.bool_))
                or not isinstance(obs, (int, np.integer))
                or not (0 <= obs < S)
            ):
                raise ValueError(
                    f"env returned the observation {obs!r}; expected an integer state in [0, {S - 1}]"
                )
            return int(obs)

        def transition(s: int, a: int, u: float) -> tuple[int, float]:
            obs, reward, terminated, truncated, _ = env.step(a)
            if terminated or truncated:  # continuing problem: the reset state follows
                obs, _ = env.reset()
            return observe(obs), float(reward)

        obs, _ = env.reset(seed=int(rng.integers(2**31 - 1)))
        return S, A, gamma, max(m, 1), observe(obs), transition, None

    # --- the algorithm ------------------------------------------------------------------------------
    def fit(self, env: TabularMDP | Any) -> NavigateAndStop:
        """Run the algorithm on ``env``: a :class:`~neurips26.rl.mdp.TabularMDP` (used only to sample
        transitions and reveal rewards) or a gymnasium-style environment with discrete spaces."""
        rng = (
            self.random_state
            if isinstance(self.random_state, np.random.Generator)
            else np.random.default_rng(self.random_state)
        )
        S, A, gamma, m, s, transition, mdp = self._problem(env, rng)
        deltas = self._validate(S, A)[1]
        check_rewards = mdp is None
        solver = AllocationSolver(S, A, navigation=True) if self.exploration in ("nas", "no_forced") else None

        uniform_pi = np.full((S, A), 1.0 / A)
        if self.exploration == "oracle":
            w_true, _, _ = AllocationSolver(S, A, navigation=True).solve(
                mdp.P, bound_terms(mdp, reward_terms=self.reward_terms)
            )
            pi_bar = w_true / w_true.sum(axis=1, keepdims=True)
        else:
            pi_bar = uniform_pi.copy()
        cdf_pi = np.cumsum(pi_bar, axis=1).tolist()
        pi_sum = np.zeros((S, A))
        n_alloc = n_fallback = 0

        counts = np.zeros((S, A, S))
        N = np.zeros((S, A))
        R_hat = np.full((S, A), np.nan)
        R_known = np.zeros((S, A))  # revealed rewards, 0 where unknown (the empirical model's placeholder)
        V = np.zeros(S)
        states: list[int] = []
        actions: list[int] = []
        statistic: list[tuple[int, float]] = []
        crossing_t: dict[float, int] = {}
        crossing_pi: dict[float, np.ndarray] = {}
        pending = sorted(deltas, reverse=True)  # largest delta fires first

        K, T_test, T_max = int(self.recompute_every), int(self.stop_every), int(self.max_steps)
        min_visits = int(self.min_visits)
        SA, k_thr = S * A, max(S - 1, 1)  # the theoretical threshold's constants (see stopping_threshold)
        expo = -1.0 / (m + 1)
        forced = self.exploration in ("nas", "oracle")
        uniform_only = self.exploration == "uniform"
        t = 0
        block = 4096
        U = rng.random((block, 3)).tolist()
        j = 0
        decision = None
        last_test: tuple[int, float, float] | None = (
            None  # (t, statistic, threshold) of the last stopping test
        )
        while t < T_max:
            # one step: a_t ~ eps_t uniform + (1 - eps_t) bar pi_t, s' ~ p(.|s, a)
            if j == block:
                U = rng.random((block, 3)).tolist()
                j = 0
            u1, u2, u3 = U[j]
            j += 1
            t += 1
            if uniform_only or (forced and u1 < t**expo):
                a = min(int(u2 * A), A - 1)
            else:
                row = cdf_pi[s]
                a = 0
                while a < A - 1 and u2 >= row[a]:
                    a += 1
            s2, r = transition(s, a, u3)
            states.append(s)
            actions.append(a)
            counts[s, a, s2] += 1.0
            if N[s, a] == 0:
                R_hat[s, a] = R_known[s, a] = r
            elif check_rewards and abs(r - R_hat[s, a]) > 1e-9 * (1.0 + abs(R_hat[s, a])):
                raise ValueError(
                    f"rewards must be deterministic: the pair (s={s}, a={a}) paid {R_hat[s, a]!r} and then {r!r}"
                )
            N[s, a] += 1.0
            s = s2

            if solver is not None and t % K == 0:
                P_hat = self._empirical(counts, N)
                V, Q = self._values(P_hat, R_known, gamma, V)
                try:
                    terms = _terms_from_values(P_hat, V, Q, gamma, self.reward_terms, 1e-12)
                    w, _, ok = solver.solve(P_hat, terms)
                    n_fallback += not ok
                    pi_o = w / w.sum(axis=1, keepdims=True)
                except ValueError:  # a tie in Q_hat or a constant V_hat: keep exploring uniformly this round
                    pi_o = uniform_pi
                n_alloc += 1
                pi_sum += pi_o
                pi_bar = pi_sum / n_alloc
                cdf_pi = np.cumsum(pi_bar, axis=1).tolist()

            if t % T_test == 0 and N.min() >= min_visits:
                P_hat = self._empirical(counts, N)
                V, Q = self._values(P_hat, R_known, gamma, V)
                stat = _glr_statistic(P_hat, V, Q, gamma, N, self.reward_terms)
                if stat is None:  # U undefined on this empirical model (tie or constant V_hat): no stop
                    continue
                Z, policy = stat
                statistic.append((t, Z))
                if self.threshold == "theoretical":
                    base = k_thr * (SA + float(np.log1p(N / k_thr).sum()))
                    beta = [math.log(1.0 / d) + base for d in pending]
                else:
                    beta = [math.log((1.0 + math.log(t)) / d) for d in pending]
                last_test = (t, Z, beta[0])
                while pending and Z >= beta[0]:
                    d = pending.pop(0)
                    beta.pop(0)
                    crossing_t[d] = t
                    crossing_pi[d] = policy
                if not pending:
                    decision = policy
                    break

        self.stopped_ = decision is not None
        if decision is None:
            # a silent stopped_ = False is easy to miss: the returned policy then carries no delta guarantee
            if last_test is None:
                where = (
                    f"the stopping rule was never evaluated (every pair needs min_visits={min_visits} visits)"
                )
            else:
                t_l, Z_l, beta_l = last_test
                where = f"at step {t_l} the statistic was {Z_l:.4g} against the threshold {beta_l:.4g}"
            warnings.warn(
                f"NavigateAndStop did not stop within max_steps={T_max} (threshold={self.threshold!r}): {where}. "
                "policy_ is the empirical greedy policy, without the delta guarantee; raise max_steps "
                "(the theoretical threshold needs far more steps than the practical one on hard MDPs).",
                ConvergenceWarning,
                stacklevel=2,
            )
            P_hat = self._empirical(counts, N)
            _, Q = self._values(P_hat, R_known, gamma, V)
            decision = np.argmax(Q, axis=1)
        self.policy_ = decision
        self.stopping_time_ = t
        self.states_ = np.asarray(states, dtype=np.int64)
        self.actions_ = np.asarray(actions, dtype=np.int64)
        self.counts_ = counts
        self.rewards_ = R_hat
        self.statistic_ = np.asarray(statistic, dtype=float).reshape(-1, 2)
        self.crossing_times_ = crossing_t
        self.crossing_policies_ = crossing_pi
        self.oracle_policy_ = pi_bar
        self.n_allocations_ = n_alloc
        self.n_solver_fallbacks_ = n_fallback
        self.path_length_ = m
        self.n_states_, self.n_actions_, self.gamma_ = S, A, gamma
        return self

    def predict(self, states: int | np.ndarray) -> int | np.ndarray:
        """The identified policy's action in each state."""
        if not hasattr(self, "policy_"):
            raise RuntimeError("this NavigateAndStop is not fitted yet: call fit(env) first")
        idx = np.asarray(states)
        if not np.issubdtype(idx.dtype, np.integer) or np.any(idx < 0) or np.any(idx >= self.n_states_):
            raise ValueError(f"states must be integers in [0, {self.n_states_ - 1}], got {states!r}")
        out = self.policy_[idx]
        return int(out) if np.ndim(out) == 0 else out

    @staticmethod
    def _empirical(counts: np.ndarray, N: np.ndarray) -> np.ndarray:
        S = counts.shape[0]
        return np.where(N[:, :, None] > 0, counts / np.maximum(N, 1.0)[:, :, None], 1.0 / S)

    @staticmethod
    def _values(P: np.ndarray, R: np.ndarray, gamma: float, V0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact ``(V*, Q*)`` of the empirical model by policy iteration, warm-started at the greedy policy of
        ``V0`` (usually one linear solve, since the empirical model changes little between two tests)."""
        S = P.shape[0]
        idx = np.arange(S)
        pi = np.argmax(R + gamma * (P @ V0), axis=1)
        eye = np.eye(S)
        for _ in range(1000):
            V = np.linalg.solve(eye - gamma * P[idx, pi], R[idx, pi])
            Q = R + gamma * (P @ V)
            new = np.argmax(Q, axis=1)
            if np.all(Q[idx, new] <= Q[idx, pi] + 1e-12):
                break
            pi = new
        return Q.max(axis=1), Q
