"""Tests for Navigate-and-Stop and its characteristic-time allocation (neurips26.rl.nas_bpi)."""

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from neurips26.harness.testing import assert_quick_verdict
from neurips26.rl import NavigateAndStop
from neurips26.rl.mdp import TabularMDP, chain_mdp, policy_evaluation, random_mdp
from neurips26.rl.nas_bpi import (
    AllocationSolver,
    TabularEnv,
    bound_terms,
    characteristic_time,
    oracle_allocation,
    stopping_threshold,
    support_path_length,
)
from neurips26.rl.nas_bpi.characteristic_time import _generative_allocation, _policy_gaps, _u_terms
from neurips26.rl.nas_bpi.navigate_and_stop import _glr_statistic


def _two_state(seed=3):
    mdp = random_mdp(2, 2, gamma=0.5, random_state=seed)
    assert bound_terms(mdp).gap_min > 1e-2
    return mdp


def _hand_terms(mdp, support_only=False):
    """U's terms by scalar loops, straight from the digest's formula (independent of the vectorised code):
    MD(s, a) = max over ALL states s' of |V*(s') - E_{p(.|s,a)} V*| (over the support of p(.|s,a) with
    ``support_only``, the first version's formula that the experiment still measures)."""
    S, A, g = mdp.n_states, mdp.n_actions, mdp.gamma
    best = None
    for acts in itertools.product(range(A), repeat=S):  # V* by enumerating deterministic policies
        V, _ = policy_evaluation(mdp, np.array(acts))
        best = V if best is None else np.maximum(best, V)
    V = best
    Q = mdp.R + g * mdp.P @ V
    pi = Q.argmax(axis=1)
    H = np.zeros((S, A))
    gaps, var_opt, md_opt = [], [], []
    for s in range(S):
        for a in range(A):
            mean = sum(mdp.P[s, a, t] * V[t] for t in range(S))
            var = sum(mdp.P[s, a, t] * (V[t] - mean) ** 2 for t in range(S))
            md = max(abs(V[t] - mean) for t in range(S) if mdp.P[s, a, t] > 0 or not support_only)
            if a == pi[s]:
                var_opt.append(var)
                md_opt.append(md)
            else:
                D = V[s] - Q[s, a]
                gaps.append(D)
                H[s, a] = max(16 * var / D**2, 6 * md ** (4 / 3) / D ** (4 / 3))
    Dm, vs, ms = min(gaps), max(var_opt), max(md_opt)
    T4 = min(
        max(27 / (Dm**2 * (1 - g) ** 3), 8 / (Dm * (1 - g) ** 2.5), 14 * (ms / (Dm * (1 - g))) ** (4 / 3)),
        max(16 * vs / (Dm**2 * (1 - g) ** 2), 6 * (ms / (Dm * (1 - g))) ** (4 / 3)),
    )
    return H, T4, pi, V, Q


def _sparse_mdps():
    """Sparse-support MDPs: deterministic 'back' actions, a stochastic and a deterministic chain, and a
    random MDP with most transitions removed."""
    yield chain_mdp(4, 0.3, gamma=0.5)
    yield chain_mdp(5, 1.0, gamma=0.6)  # every transition deterministic
    rng = np.random.default_rng(7)
    P = rng.dirichlet(np.ones(4), size=(4, 3)) * (rng.random((4, 3, 4)) < 0.4)
    P[np.arange(4), :, (np.arange(4) + 1) % 4] += 0.3  # keeps it communicating
    yield TabularMDP(P / P.sum(axis=2, keepdims=True), rng.uniform(size=(4, 3)), 0.5)


def test_bound_terms_match_the_formula_by_hand():
    mdps = [random_mdp(3, 2, gamma=0.6, random_state=seed) for seed in (3, 5)] + list(_sparse_mdps())
    for mdp in mdps:
        S, A = mdp.n_states, mdp.n_actions
        terms = bound_terms(mdp)
        H, T4, pi, _, _ = _hand_terms(mdp)
        np.testing.assert_array_equal(terms.policy, pi)
        np.testing.assert_allclose(terms.H, H, rtol=1e-8)
        assert terms.H_star == pytest.approx(T4, rel=1e-8)
        # with reward terms: + 2/D^2 and + 2/(D_min^2 (1-gamma)^2)
        tr = bound_terms(mdp, reward_terms=True)
        sub = ~terms.optimal_mask
        np.testing.assert_allclose(tr.H[sub], H[sub] + 2 / terms.gaps[sub] ** 2, rtol=1e-8)
        one_m = 1 - mdp.gamma
        assert tr.H_star == pytest.approx(T4 + 2 / (terms.gap_min**2 * one_m**2), rel=1e-8)
        assert terms.H.shape == (S, A)


def test_stopping_statistic_and_support_span_match_the_formula_by_hand():
    # the stopping statistic and the experiment's support-span U* share the oracle's one formula (_u_terms);
    # here each is checked against the scalar-loop transcription of the digest
    rng = np.random.default_rng(0)
    mdps = [random_mdp(3, 2, gamma=0.6, random_state=seed) for seed in (3, 5)] + list(_sparse_mdps())
    for mdp in mdps:
        H, T4, pi, V, Q = _hand_terms(mdp)
        N = rng.integers(1, 500, size=H.shape).astype(float)
        opt = np.zeros(H.shape, dtype=bool)
        opt[np.arange(mdp.n_states), pi] = True
        want = 1.0 / (max(H[s, a] / N[s, a] for s, a in zip(*np.nonzero(~opt))) + T4 / N[opt].min())
        Z, pi_hat = _glr_statistic(mdp.P, V, Q, mdp.gamma, N, False)
        np.testing.assert_array_equal(pi_hat, pi)
        assert Z == pytest.approx(want, rel=1e-8)
        H_sup, T4_sup, _, _, _ = _hand_terms(mdp, support_only=True)
        _, opt2, gaps, gap_min = _policy_gaps(V, Q)
        H_got, T4_got = _u_terms(mdp.P, V, opt2, gaps, gap_min, mdp.gamma, False, support_span=True)
        np.testing.assert_allclose(H_got, H_sup, rtol=1e-8, atol=1e-12)
        assert T4_got == pytest.approx(T4_sup, rel=1e-8)


def test_deterministic_pairs_still_need_samples():
    # with the span over the support only, a deterministic sub-optimal pair had H = 0 and cost no samples;
    # the agent does not know the support, so it must still sample it
    mdp = chain_mdp(4, 0.3, gamma=0.5)  # every 'back' action is deterministic
    terms = bound_terms(mdp)
    sub = ~terms.optimal_mask
    assert np.all(terms.H[sub] > 0)
    span = np.ptp(terms.V)
    assert np.all(terms.H[sub] >= 6 * (span / 2 / terms.gaps[sub]) ** (4 / 3) * (1 - 1e-12))
    w, u = oracle_allocation(mdp)
    assert np.all(w > 0) and np.isfinite(u) and u > 0
    # a fully deterministic MDP is not 'nothing to learn': finite, positive U* and every pair sampled
    w, u = oracle_allocation(chain_mdp(5, 1.0, gamma=0.6))
    assert np.all(w > 1e-6) and 0 < u < np.inf
    # starving one sub-optimal pair (even a deterministic one) makes U infinite
    w0 = w.copy()
    s, a = np.argwhere(~bound_terms(chain_mdp(5, 1.0, gamma=0.6)).optimal_mask)[0]
    w0[s, a] = 0.0
    assert characteristic_time(chain_mdp(5, 1.0, gamma=0.6), w0 / w0.sum()) == math.inf


def test_constant_values_are_rejected():
    # V* constant: U(M, w) would vanish for every w (the bound is undefined there)
    P = np.full((2, 2, 2), 0.5)
    R = np.array([[1.0, 0.0], [1.0, 0.5]])
    with pytest.raises(ValueError, match="constant"):
        bound_terms(TabularMDP(P, R, 0.5))


def test_characteristic_time_against_brute_force_on_two_states():
    mdp = _two_state()
    P = mdp.P
    w_star, U_star = oracle_allocation(mdp)
    # Omega holds the flow constraint
    np.testing.assert_allclose(w_star.sum(axis=1), np.einsum("sa,sat->t", w_star, P), atol=1e-6)
    # brute force: w(0,0) = x, w(0,1) = y, w(1,0) = u from the flow into state 0, w(1,1) = 1 - x - y - u
    grid = np.linspace(1e-3, 1 - 1e-3, 600)
    x, y = np.meshgrid(grid, grid, indexing="ij")
    W0 = x + y
    W1 = 1 - W0
    # P(0|0,0) x + P(0|0,1) y + P(0|1,0) u + P(0|1,1) (W1 - u) = W0
    u = (W0 - P[0, 0, 0] * x - P[0, 1, 0] * y - P[1, 1, 0] * W1) / (P[1, 0, 0] - P[1, 1, 0])
    v = W1 - u
    ok = (W1 > 0) & (u > 0) & (v > 0)
    terms = bound_terms(mdp)
    W = np.stack([np.stack([x, y], -1), np.stack([u, v], -1)], axis=2)[ok]  # (n, S, A) feasible allocations
    opt = terms.optimal_mask
    U = terms.H_star / W[:, opt].min(axis=1) + (terms.H[~opt] / W[:, ~opt]).max(axis=1)
    k = int(np.argmin(U))
    best = float(U[k])
    assert characteristic_time(mdp, W[k], terms=terms) == pytest.approx(best)
    assert U_star <= best * (1 + 1e-6)
    assert best <= U_star * 1.02


def test_generative_closed_form_matches_cvxpy():
    mdp = random_mdp(4, 3, gamma=0.5, random_state=2)
    terms = bound_terms(mdp)
    w_cf = _generative_allocation(terms)
    w_cp, u_cp, ok = AllocationSolver(4, 3, navigation=False).solve(mdp.P, terms)
    assert ok
    assert characteristic_time(mdp, w_cf, terms=terms) == pytest.approx(u_cp, rel=1e-4)
    w_nav, u_nav = oracle_allocation(mdp)
    assert u_nav >= u_cp * (1 - 1e-6)  # navigation constraints can only cost


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_navigation_allocation_lower_bounds_every_policy_occupancy(seed):
    mdp = random_mdp(3, 2, gamma=0.5, random_state=seed)
    try:
        terms = bound_terms(mdp)
    except ValueError:
        return
    _, U_star = oracle_allocation(mdp)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        pi = rng.dirichlet(np.ones(2), size=3)
        P_pi = np.einsum("sa,sat->st", pi, mdp.P)
        vals, vecs = np.linalg.eig(P_pi.T)
        d = np.real(vecs[:, np.argmin(np.abs(vals - 1))])
        w = (d / d.sum())[:, None] * pi
        assert characteristic_time(mdp, w, terms=terms) >= U_star * (1 - 1e-5)


@pytest.mark.parametrize("seed", [10, 26])
def test_never_stops_with_a_wrong_policy_on_easy_instances(seed):
    mdp = random_mdp(3, 2, gamma=0.5, random_state=seed)
    pi_star = bound_terms(mdp).policy
    for exploration in ("nas", "uniform"):
        for rs in range(6):
            est = NavigateAndStop(0.1, exploration=exploration, recompute_every=100, random_state=rs).fit(mdp)
            assert est.stopped_
            np.testing.assert_array_equal(est.policy_, pi_star)


def test_trajectory_and_counts_are_consistent():
    mdp = random_mdp(3, 2, gamma=0.5, random_state=10)
    est = NavigateAndStop(0.05, monitor_deltas=(0.5,), recompute_every=100, random_state=1).fit(mdp)
    tau = est.stopping_time_
    assert len(est.states_) == len(est.actions_) == tau
    assert est.counts_.sum() == tau
    assert est.states_[0] == 0
    # next states of the trajectory are the next recorded states
    nxt = np.zeros_like(est.counts_)
    np.add.at(nxt, (est.states_[:-1], est.actions_[:-1], est.states_[1:]), 1)
    assert np.all(est.counts_ - nxt >= 0) and (est.counts_ - nxt).sum() == 1
    assert est.crossing_times_[0.5] <= est.crossing_times_[0.05] == tau
    # the stopping rule holds at tau: t / U(M_hat, N/t) >= beta, with U of the empirical model computed the long
    # way (value iteration on a TabularMDP of the empirical model, bound_terms, characteristic_time)
    t_last, Z = est.statistic_[-1]
    assert t_last == tau
    N = est.counts_.sum(axis=2)
    assert Z >= stopping_threshold(N, 0.05, tau)
    m_hat = TabularMDP(est.counts_ / N[:, :, None], est.rewards_, mdp.gamma)
    assert Z == pytest.approx(tau / characteristic_time(m_hat, N / tau), rel=1e-8)
    np.testing.assert_array_equal(est.rewards_, mdp.R)
    np.testing.assert_array_equal(est.predict(np.arange(3)), est.policy_)
    # same seed, same run
    est2 = NavigateAndStop(0.05, monitor_deltas=(0.5,), recompute_every=100, random_state=1).fit(mdp)
    assert est2.stopping_time_ == tau


def test_max_steps_budget_reports_not_stopped():
    mdp = random_mdp(3, 2, gamma=0.5, random_state=10)
    with pytest.warns(ConvergenceWarning, match="did not stop within max_steps=50"):
        est = NavigateAndStop(1e-3, max_steps=50, random_state=0).fit(mdp)
    assert not est.stopped_ and est.stopping_time_ == 50 and est.policy_.shape == (3,)


def _slippery_lake():
    """A 3-state MDP with U* in the thousands (the second-pass review's user case)."""
    P = np.zeros((3, 3, 3))
    P[0, 0] = [0.9, 0.1, 0.0]
    P[0, 1] = [0.2, 0.8, 0.0]
    P[0, 2] = [0.5, 0.0, 0.5]
    P[1, 0] = [1.0, 0.0, 0.0]
    P[1, 1] = [0.1, 0.3, 0.6]
    P[1, 2] = [0.0, 0.7, 0.3]
    P[2, 0] = [0.0, 0.0, 1.0]
    P[2, 1] = [0.6, 0.0, 0.4]
    P[2, 2] = [0.3, 0.3, 0.4]
    R = np.array([[0.1, 0.0, 0.3], [0.0, 0.2, 0.5], [1.0, 0.4, 0.6]])
    return TabularMDP(P, R, 0.6)


def test_an_unstopped_theoretical_run_warns_with_its_statistic():
    # the theoretical threshold needs far more steps than the practical one: a budget it cannot meet must not
    # end silently. At t = 20000 the statistic is a small fraction of the threshold (which is >= log(1/delta)
    # plus S - 1 times S * A = 18 here), so this does not hang on a margin.
    mdp = _slippery_lake()
    with pytest.warns(
        ConvergenceWarning, match=r"threshold='theoretical'.*statistic was .* against the threshold"
    ):
        est = NavigateAndStop(0.05, threshold="theoretical", max_steps=20_000, random_state=0).fit(mdp)
    assert not est.stopped_ and est.stopping_time_ == 20_000
    t_last, Z_last = est.statistic_[-1]
    assert Z_last < stopping_threshold(est.counts_.sum(axis=2), 0.05, int(t_last))
    # a run that stops does not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = NavigateAndStop(0.1, threshold="practical", random_state=0).fit(
            random_mdp(3, 2, gamma=0.5, random_state=10)
        )
    assert est.stopped_


def test_a_pair_seen_once_caps_the_statistic():
    # a point-mass empirical row (variance 0) must not drop out of the GLR statistic
    mdp = chain_mdp(4, 0.3, gamma=0.5)
    P_hat = mdp.P.copy()
    P_hat[1, 1] = 0.0
    P_hat[1, 1, 2] = 1.0  # (1, forward) seen once, it went forward
    m_hat = TabularMDP(P_hat, mdp.R, mdp.gamma)
    terms = bound_terms(m_hat)
    N = np.full((4, 2), 1e6)
    for s, a in [(1, 1), (2, 0)]:
        N[s, a] = 1.0
        V, Q = terms.V, m_hat.R + m_hat.gamma * m_hat.P @ terms.V
        Z, pi = _glr_statistic(m_hat.P, V, Q, m_hat.gamma, N, False)
        np.testing.assert_array_equal(pi, terms.policy)
        H = terms.H_star if a == terms.policy[s] else terms.H[s, a]
        assert H > 0 and Z <= 1.0 / H * (1 + 1e-12)  # capped at N(s,a) / H(s,a) with N(s,a) = 1
        assert Z < stopping_threshold(N, 0.5, 100, "practical")  # cannot stop on a single visit
        N[s, a] = 1e6
    # a tie in Q_hat or a constant V_hat: no statistic, no stop
    assert (
        _glr_statistic(np.full((2, 2, 2), 0.5), np.zeros(2), np.zeros((2, 2)), 0.5, np.ones((2, 2)), False)
        is None
    )


def test_min_visits_delays_the_first_test():
    mdp = random_mdp(3, 2, gamma=0.5, random_state=10)
    e1 = NavigateAndStop(0.1, min_visits=1, threshold="practical", recompute_every=50, random_state=0).fit(
        mdp
    )
    e5 = NavigateAndStop(0.1, min_visits=50, threshold="practical", recompute_every=50, random_state=0).fit(
        mdp
    )
    assert e5.counts_.sum(axis=2).min() >= 50
    assert e5.statistic_[0, 0] >= e1.statistic_[0, 0]


def test_stopping_threshold_and_path_length():
    N = np.array([[3.0, 0.0], [5.0, 1.0]])
    expected = math.log(10) + 1 * sum(math.log(math.e * (1 + n)) for n in N.ravel())
    assert stopping_threshold(N, 0.1, 100) == pytest.approx(expected)
    assert stopping_threshold(N, 0.1, 100, "practical") == pytest.approx(math.log((1 + math.log(100)) / 0.1))
    assert support_path_length(chain_mdp(5, 0.3).P) == 4


def test_bad_mdps_raise():
    with pytest.raises(TypeError, match="env must be a TabularMDP"):
        NavigateAndStop(0.1).fit(np.ones((2, 2, 2)))
    one_action = TabularMDP(np.full((2, 1, 2), 0.5), np.zeros((2, 1)), 0.5)
    with pytest.raises(ValueError, match="2 actions"):
        NavigateAndStop(0.1).fit(one_action)
    with pytest.raises(ValueError, match="2 actions"):
        bound_terms(one_action)
    P = np.zeros((2, 2, 2))
    P[:, :, 1] = 1.0  # state 1 absorbing: state 0 unreachable from 1
    with pytest.raises(ValueError, match="communicating"):
        NavigateAndStop(0.1).fit(TabularMDP(P, np.zeros((2, 2)), 0.5))
    tie = TabularMDP(np.full((2, 2, 2), 0.5), np.ones((2, 2)), 0.5)
    with pytest.raises(ValueError, match="min_gap"):
        bound_terms(tie)
    with pytest.raises(ValueError, match="min_gap"):
        oracle_allocation(tie)


def test_bad_parameters_raise():
    mdp = random_mdp(3, 2, gamma=0.5, random_state=10)
    for kw, name in [
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"exploration": "greedy"}, "exploration"),
        ({"threshold": "loose"}, "threshold"),
        ({"recompute_every": 0}, "recompute_every"),
        ({"stop_every": -1}, "stop_every"),
        ({"max_steps": 0}, "max_steps"),
        ({"monitor_deltas": (0.01,)}, "monitor_deltas"),
        ({"initial_state": 3}, "initial_state"),
    ]:
        params = {"delta": 0.1, **kw}
        with pytest.raises(ValueError, match=name):
            NavigateAndStop(**params).fit(mdp)
    with pytest.raises(TypeError, match="reward_terms"):
        NavigateAndStop(0.1, reward_terms="yes").fit(mdp)
    terms = bound_terms(mdp)
    with pytest.raises(ValueError, match="w must"):
        characteristic_time(mdp, np.ones((3, 3)) / 9, terms=terms)
    with pytest.raises(ValueError, match="w must"):
        characteristic_time(mdp, np.ones((3, 2)), terms=terms)
    with pytest.raises(ValueError, match="delta"):
        stopping_threshold(np.ones((3, 2)), 2.0, 10)
    with pytest.raises(ValueError, match="kind"):
        stopping_threshold(np.ones((3, 2)), 0.1, 10, "loose")
    with pytest.raises(ValueError, match="min_gap"):
        bound_terms(mdp, min_gap=0.0)
    with pytest.raises(ValueError, match="min_visits"):
        NavigateAndStop(0.1, min_visits=0).fit(mdp)
    with pytest.raises(ValueError, match="path_length"):
        NavigateAndStop(0.1, path_length=0).fit(mdp)
    with pytest.raises(ValueError, match="gamma"):
        NavigateAndStop(0.1, gamma=0.9).fit(mdp)  # differs from the MDP's


def test_stopping_threshold_validates_its_inputs():
    for bad in (
        np.ones(3),
        np.ones((2, 2, 2)),
        np.array([[1.0, -1.0]]),
        np.array([[np.nan, 1.0]]),
        np.zeros((0, 2)),
    ):
        with pytest.raises(ValueError, match="counts"):
            stopping_threshold(bad, 0.1, 10)
    for t in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="t must"):
            stopping_threshold(np.ones((2, 2)), 0.1, t)
    with pytest.raises(ValueError, match="delta"):
        stopping_threshold(np.ones((2, 2)), True, 10)


def test_support_path_length_validates_its_input():
    for bad in (np.ones((2, 2)), np.ones((2, 2, 3)), np.full((2, 2, 2), np.nan), -np.ones((2, 2, 2))):
        with pytest.raises(ValueError, match="P"):
            support_path_length(bad)
    P = np.zeros((3, 1, 3))
    P[0, 0, 1] = P[1, 0, 2] = P[2, 0, 0] = 1.0  # a 3-cycle: the farthest state is 2 steps away
    assert support_path_length(P) == 2


def test_allocation_solver_validates_its_inputs():
    mdp = random_mdp(3, 2, gamma=0.5, random_state=10)
    terms = bound_terms(mdp)
    for kw, match in [
        ((0, 2), "n_states"),
        ((3, 1), "n_actions"),
        ((3.0, 2), "n_states"),
        ((3, True), "n_actions"),
    ]:
        with pytest.raises(ValueError, match=match):
            AllocationSolver(*kw)
    with pytest.raises(TypeError, match="navigation"):
        AllocationSolver(3, 2, navigation="yes")
    with pytest.raises(ValueError, match="solver"):
        AllocationSolver(3, 2, solver="NOT_A_SOLVER")
    solver = AllocationSolver(3, 2)
    with pytest.raises(ValueError, match="P must have shape"):
        solver.solve(np.full((3, 3, 3), 1 / 3), terms)
    with pytest.raises(ValueError, match="P rows"):
        solver.solve(np.full((3, 2, 3), 0.5), terms)
    with pytest.raises(ValueError, match="P must be finite"):
        solver.solve(np.full((3, 2, 3), np.nan), terms)
    with pytest.raises(TypeError, match="terms"):
        solver.solve(mdp.P, {"H": terms.H})
    with pytest.raises(ValueError, match="terms"):
        solver.solve(mdp.P, bound_terms(random_mdp(4, 2, gamma=0.5, random_state=1)))
    w, u, ok = solver.solve(mdp.P, terms)
    assert ok and u == pytest.approx(characteristic_time(mdp, w, terms=terms))


def test_unreachable_pairs_get_infinite_characteristic_time():
    mdp = _two_state()
    w = np.array([[0.5, 0.0], [0.5, 0.0]])
    assert characteristic_time(mdp, w) == math.inf


# --- environment interface -------------------------------------------------------------------------------


def test_tabular_env_follows_the_gymnasium_step_api():
    mdp = chain_mdp(3, 0.5, gamma=0.5)
    env = TabularEnv(mdp, initial_state=1)
    assert (env.observation_space.n, env.action_space.n) == (3, 2)
    s, info = env.reset(seed=0)
    assert s == 1 and info == {}
    counts = np.zeros(3)
    for _ in range(4000):
        env.reset()
        s2, r, terminated, truncated, _ = env.step(1)
        counts[s2] += 1
        assert r == mdp.R[1, 1] and not terminated and not truncated
    np.testing.assert_allclose(counts / 4000, mdp.P[1, 1], atol=0.03)
    with pytest.raises(ValueError, match="action"):
        env.step(2)
    with pytest.raises(RuntimeError, match="reset"):
        TabularEnv(mdp).step(0)
    with pytest.raises(TypeError, match="mdp"):
        TabularEnv(mdp.P)
    with pytest.raises(ValueError, match="initial_state"):
        TabularEnv(mdp, initial_state=3)


def test_nas_identifies_the_best_policy_through_the_environment_interface():
    mdp = random_mdp(3, 2, gamma=0.5, random_state=10)
    pi_star = bound_terms(mdp).policy
    for rs in range(3):
        est = NavigateAndStop(0.1, gamma=0.5, recompute_every=100, random_state=rs).fit(TabularEnv(mdp))
        assert est.stopped_ and est.path_length_ == 2  # S - 1: the support is unknown
        np.testing.assert_array_equal(est.policy_, pi_star)
        np.testing.assert_array_equal(est.rewards_, mdp.R)
    # same seed, same trajectory
    a = NavigateAndStop(0.1, gamma=0.5, random_state=4).fit(TabularEnv(mdp))
    b = NavigateAndStop(0.1, gamma=0.5, random_state=4).fit(TabularEnv(mdp))
    assert a.stopping_time_ == b.stopping_time_


def test_environment_bad_inputs():
    mdp = random_mdp(3, 2, gamma=0.5, random_state=10)
    env = TabularEnv(mdp)
    with pytest.raises(ValueError, match="gamma"):
        NavigateAndStop(0.1).fit(env)
    with pytest.raises(ValueError, match="oracle"):
        NavigateAndStop(0.1, gamma=0.5, exploration="oracle").fit(env)
    with pytest.raises(TypeError, match="env"):
        NavigateAndStop(0.1, gamma=0.5).fit(object())

    class NoSpaces:
        def reset(self, seed=None):
            return 0, {}

        def step(self, a):
            return 0, 0.0, False, False, {}

    with pytest.raises(TypeError, match="observation_space"):
        NavigateAndStop(0.1, gamma=0.5).fit(NoSpaces())

    class Noisy(TabularEnv):
        def step(self, action):
            s2, r, te, tr, info = super().step(action)
            return s2, r + self._rng.normal(), te, tr, info

    with pytest.raises(ValueError, match="deterministic"):
        NavigateAndStop(0.1, gamma=0.5, max_steps=500).fit(Noisy(mdp))

    class BadObs(TabularEnv):
        def step(self, action):
            return 7, 0.0, False, False, {}

    with pytest.raises(ValueError, match="observation"):
        NavigateAndStop(0.1, gamma=0.5, max_steps=50).fit(BadObs(mdp))
    with pytest.raises(RuntimeError, match="fit"):
        NavigateAndStop(0.1).predict(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a 200-step budget: fitted, unstopped
        est = NavigateAndStop(0.1, max_steps=200, random_state=0).fit(mdp)
    with pytest.raises(ValueError, match="states"):
        est.predict(3)


def test_nas_on_a_gymnasium_env():
    gym = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    class TwoRooms(gym.Env):
        """Room 0 pays 0.2 and room 1 pays 1 for staying; moving succeeds with probability 0.7. Episodic:
        truncated every 100 steps, then reset to room 0."""

        observation_space = gym.spaces.Discrete(2)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.s, self.t = 0, 0
            return self.s, {}

        def step(self, action):
            s, a = self.s, int(action)
            reward = (0.2 if s == 0 else 1.0) if a == 0 else 0.0
            if a == 1 and self.np_random.random() < 0.7:
                self.s = 1 - s
            self.t += 1
            return self.s, reward, False, self.t >= 100, {}

    check_env(TwoRooms(), skip_render_check=True)
    est = NavigateAndStop(0.1, gamma=0.5, threshold="practical", recompute_every=500, random_state=0)
    est.fit(TwoRooms())
    assert est.stopped_
    np.testing.assert_array_equal(est.policy_, [1, 0])  # leave room 0, stay in room 1
    # the answer of the model NaS saw (truncations make 'reset to 0' part of the dynamics)
    N = est.counts_.sum(axis=2)
    m_hat = TabularMDP(est.counts_ / N[:, :, None], est.rewards_, 0.5)
    np.testing.assert_array_equal(est.policy_, bound_terms(m_hat, min_gap=1e-9).policy)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("nas-bpi", tmp_path)
