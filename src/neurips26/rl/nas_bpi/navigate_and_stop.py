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
  graph (assumed known, as the connectivity structure is in MDP-NaS).
* Stopping rule (GLR type). Stop at the first test time with ``t / U(M_hat_t, N(t)/t) >= beta(N(t), delta)``,
  ``beta(N, delta) = log(1/delta) + (S-1) sum_{s,a} log(e (1 + N(s,a)/(S-1)))`` ("theoretical"), or the
  heuristic ``log((1 + log t)/delta)`` ("practical", clearly not covered by the delta-PAC analysis).
* Decision: the greedy optimal policy of ``M_hat_tau``.

Rewards are deterministic and revealed at the first visit of a pair; transitions are estimated by counts (an
unvisited pair gets a uniform row, and the stopping statistic is 0 until every pair has been visited).

Baselines (``exploration=``): ``"uniform"`` (uniformly random navigation, same stopping rule), ``"oracle"``
(tracks the true model's ``w*``; idealised), ``"no_forced"`` (NaS without forced exploration, ``eps_t = 0``).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ..mdp import TabularMDP
from .characteristic_time import AllocationSolver, _terms_from_values, bound_terms

__all__ = ["NavigateAndStop", "support_path_length", "stopping_threshold"]

EXPLORATIONS = ("nas", "uniform", "oracle", "no_forced")
THRESHOLDS = ("theoretical", "practical")


def support_path_length(P: np.ndarray) -> int:
    """``m``: the largest shortest-path length between two states in the support graph of ``P`` (BFS).

    Raises ``ValueError`` if some state cannot reach another (the MDP is not communicating).
    """
    P = np.asarray(P)
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

    ``theoretical``: ``log(1/delta) + (S-1) sum_{s,a} log(e (1 + N(s,a)/(S-1)))``;
    ``practical``: ``log((1 + log t)/delta)`` (a heuristic, labelled as such in every report).
    """
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    if kind == "practical":
        return math.log((1.0 + math.log(max(t, 1))) / delta)
    if kind != "theoretical":
        raise ValueError(f"kind must be one of {THRESHOLDS}, got {kind!r}")
    S = counts.shape[0]
    k = max(S - 1, 1)
    return math.log(1.0 / delta) + k * float(np.sum(1.0 + np.log1p(counts / k)))


class NavigateAndStop:
    """MDP-NaS: navigate one trajectory of an unknown MDP until its best policy is identified with confidence.

    Parameters
    ----------
    delta : confidence level in (0, 1); the answer is wrong with probability at most ``delta``.
    exploration : ``"nas"`` (C-navigation), ``"uniform"``, ``"oracle"`` (true-model allocation) or
        ``"no_forced"``.
    threshold : ``"theoretical"`` (the delta-PAC threshold) or ``"practical"`` (the heuristic
        ``log((1 + log t)/delta)``).
    recompute_every : steps between two solves of the allocation program (``K``).
    stop_every : steps between two evaluations of the stopping rule.
    max_steps : budget; a run that has not stopped by then ends with ``stopped_ = False``.
    reward_terms : keep the reward terms T1, T3 in ``U`` (default False: rewards are deterministic and known).
    monitor_deltas : extra confidence levels ``>= delta``; the first time the stopping rule would have fired
        for each is recorded (``crossing_times_``, ``crossing_policies_``) along the same trajectory (the
        sampling rule does not depend on ``delta``), which gives common-random-number comparisons across deltas.
    initial_state : the state ``s_0``.
    random_state : seed or ``numpy.random.Generator``.

    Attributes
    ----------
    policy_ : the identified deterministic policy (array of actions).
    stopping_time_ : ``tau`` (number of transitions observed).
    stopped_ : whether the stopping rule fired within ``max_steps``.
    states_, actions_ : the trajectory ``s_0..s_{tau-1}``, ``a_0..a_{tau-1}``.
    counts_ : ``N(s, a, s')`` at the stop.
    statistic_ : ``(t, t / U(M_hat_t, N/t))`` at each stopping test.
    crossing_times_, crossing_policies_ : per monitored ``delta`` (including ``delta``).
    oracle_policy_ : the Cesaro-averaged oracle policy at the stop.
    n_allocations_, n_solver_fallbacks_ : allocation solves, and those that fell back to the generative one.
    path_length_ : ``m`` of the forced-exploration rate.
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
        self.reward_terms = reward_terms
        self.monitor_deltas = monitor_deltas
        self.initial_state = initial_state
        self.random_state = random_state

    # --- validation ---------------------------------------------------------------------------------
    def _validate(self, mdp: TabularMDP) -> tuple[float, list[float]]:
        if not isinstance(mdp, TabularMDP):
            raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
        if mdp.n_actions < 2:
            raise ValueError("mdp must have at least 2 actions (n_actions >= 2)")
        if mdp.n_states < 2:
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
        for name in ("recompute_every", "stop_every", "max_steps"):
            val = getattr(self, name)
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {val!r}")
        if not isinstance(self.initial_state, (int, np.integer)) or not (
            0 <= self.initial_state < mdp.n_states
        ):
            raise ValueError(f"initial_state must be an integer in [0, {mdp.n_states - 1}]")
        if not isinstance(self.reward_terms, (bool, np.bool_)):
            raise TypeError(f"reward_terms must be a bool, got {type(self.reward_terms).__name__}")
        mon = sorted({float(delta), *[float(d) for d in self.monitor_deltas]})
        if any(not (delta <= d < 1.0) for d in mon):
            raise ValueError(
                f"monitor_deltas must lie in [delta, 1) = [{delta}, 1), got {self.monitor_deltas!r}"
            )
        return float(delta), mon

    # --- the algorithm ------------------------------------------------------------------------------
    def fit(self, mdp: TabularMDP) -> NavigateAndStop:
        """Run the algorithm on the environment ``mdp`` (used only to sample transitions and reveal
        rewards)."""
        delta, deltas = self._validate(mdp)
        m = support_path_length(mdp.P)
        S, A, gamma = mdp.n_states, mdp.n_actions, mdp.gamma
        rng = (
            self.random_state
            if isinstance(self.random_state, np.random.Generator)
            else np.random.default_rng(self.random_state)
        )
        cdf_P = np.cumsum(mdp.P, axis=2).tolist()
        R_true = mdp.R
        solver = AllocationSolver(S, A, navigation=True) if self.exploration in ("nas", "no_forced") else None

        uniform_pi = np.full((S, A), 1.0 / A)
        if self.exploration == "oracle":
            w_true, _, ok = AllocationSolver(S, A, navigation=True).solve(
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
        seen = np.zeros((S, A), dtype=bool)
        R_hat = np.zeros((S, A))
        V = np.zeros(S)
        states: list[int] = []
        actions: list[int] = []
        statistic: list[tuple[int, float]] = []
        crossing_t: dict[float, int] = {}
        crossing_pi: dict[float, np.ndarray] = {}
        pending = sorted(deltas, reverse=True)  # largest delta fires first

        K, T_test, T_max = int(self.recompute_every), int(self.stop_every), int(self.max_steps)
        expo = -1.0 / (m + 1)
        forced = self.exploration in ("nas", "oracle")
        uniform_only = self.exploration == "uniform"
        s = int(self.initial_state)
        t = 0
        block = 4096
        U = rng.random((block, 3)).tolist()
        j = 0
        decision = None
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
            row = cdf_P[s][a]
            s2 = 0
            while s2 < S - 1 and u3 >= row[s2]:
                s2 += 1
            states.append(s)
            actions.append(a)
            counts[s, a, s2] += 1.0
            N[s, a] += 1.0
            if not seen[s, a]:
                seen[s, a] = True
                R_hat[s, a] = R_true[s, a]
            s = s2

            if solver is not None and t % K == 0:
                P_hat = self._empirical(counts, N)
                V, Q = self._values(P_hat, R_hat, gamma, V)
                try:
                    terms = _terms_from_values(P_hat, V, Q, gamma, self.reward_terms, 1e-12)
                    w, _, ok = solver.solve(P_hat, terms)
                    n_fallback += not ok
                    pi_o = w / np.maximum(w.sum(axis=1, keepdims=True), 1e-300)
                    pi_o[w.sum(axis=1) <= 0] = 1.0 / A
                except ValueError:  # a tie in the empirical Q*: keep exploring uniformly this round
                    pi_o = uniform_pi
                n_alloc += 1
                pi_sum += pi_o
                pi_bar = pi_sum / n_alloc
                cdf_pi = np.cumsum(pi_bar, axis=1).tolist()

            if t % T_test == 0 and seen.all():
                P_hat = self._empirical(counts, N)
                V, Q = self._values(P_hat, R_hat, gamma, V)
                try:
                    terms = _terms_from_values(P_hat, V, Q, gamma, self.reward_terms, 1e-12)
                except ValueError:
                    continue
                opt = terms.optimal_mask
                denom = float(np.max(np.where(opt, 0.0, terms.H / N))) + terms.H_star / float(N[opt].min())
                Z = math.inf if denom <= 0 else 1.0 / denom  # = t / U(M_hat, N / t)
                statistic.append((t, Z))
                while pending and Z >= stopping_threshold(N, pending[0], t, self.threshold):
                    d = pending.pop(0)
                    crossing_t[d] = t
                    crossing_pi[d] = terms.policy.copy()
                if not pending:
                    decision = terms.policy.copy()
                    break

        self.stopped_ = decision is not None
        if decision is None:
            P_hat = self._empirical(counts, N)
            _, Q = self._values(P_hat, R_hat, gamma, V)
            decision = np.argmax(Q, axis=1)
        self.policy_ = decision
        self.stopping_time_ = t
        self.states_ = np.asarray(states, dtype=np.int64)
        self.actions_ = np.asarray(actions, dtype=np.int64)
        self.counts_ = counts
        self.statistic_ = np.asarray(statistic, dtype=float).reshape(-1, 2)
        self.crossing_times_ = crossing_t
        self.crossing_policies_ = crossing_pi
        self.oracle_policy_ = pi_bar
        self.n_allocations_ = n_alloc
        self.n_solver_fallbacks_ = n_fallback
        self.path_length_ = m
        return self

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
