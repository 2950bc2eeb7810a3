"""Tests for Navigate-and-Stop and its characteristic-time allocation (neurips26.rl.nas_bpi)."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.harness.testing import assert_quick_verdict
from neurips26.rl import NavigateAndStop
from neurips26.rl.mdp import TabularMDP, chain_mdp, policy_evaluation, random_mdp
from neurips26.rl.nas_bpi import (
    AllocationSolver,
    bound_terms,
    characteristic_time,
    oracle_allocation,
    stopping_threshold,
    support_path_length,
)
from neurips26.rl.nas_bpi.characteristic_time import _generative_allocation


def _two_state(seed=3):
    mdp = random_mdp(2, 2, gamma=0.5, random_state=seed)
    assert bound_terms(mdp).gap_min > 1e-2
    return mdp


def _hand_terms(mdp):
    """U's terms by scalar loops, straight from the formula (independent of the vectorised code)."""
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
            md = max(abs(V[t] - mean) for t in range(S) if mdp.P[s, a, t] > 0)
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
    return H, T4, pi


def test_bound_terms_match_the_formula_by_hand():
    for seed in (3, 5):
        mdp = random_mdp(3, 2, gamma=0.6, random_state=seed)
        terms = bound_terms(mdp)
        H, T4, pi = _hand_terms(mdp)
        np.testing.assert_array_equal(terms.policy, pi)
        np.testing.assert_allclose(terms.H, H, rtol=1e-8)
        assert terms.H_star == pytest.approx(T4, rel=1e-8)
        # with reward terms: + 2/D^2 and + 2/(D_min^2 (1-gamma)^2)
        tr = bound_terms(mdp, reward_terms=True)
        sub = ~terms.optimal_mask
        np.testing.assert_allclose(tr.H[sub], H[sub] + 2 / terms.gaps[sub] ** 2, rtol=1e-8)
        assert tr.H_star == pytest.approx(T4 + 2 / (terms.gap_min**2 * 0.4**2), rel=1e-8)


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
    need = (~opt) & (terms.H > 0)
    U = terms.H_star / W[:, opt].min(axis=1)
    if need.any():
        U = U + (terms.H[need] / W[:, need]).max(axis=1)
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
    # the stopping rule holds at tau: t / U(M_hat, N/t) >= beta
    t_last, Z = est.statistic_[-1]
    assert t_last == tau
    assert Z >= stopping_threshold(est.counts_.sum(axis=2), 0.05, tau)
    # same seed, same run
    est2 = NavigateAndStop(0.05, monitor_deltas=(0.5,), recompute_every=100, random_state=1).fit(mdp)
    assert est2.stopping_time_ == tau


def test_max_steps_budget_reports_not_stopped():
    mdp = random_mdp(3, 2, gamma=0.5, random_state=10)
    est = NavigateAndStop(1e-3, max_steps=50, random_state=0).fit(mdp)
    assert not est.stopped_ and est.stopping_time_ == 50 and est.policy_.shape == (3,)


def test_stopping_threshold_and_path_length():
    N = np.array([[3.0, 0.0], [5.0, 1.0]])
    expected = math.log(10) + 1 * sum(math.log(math.e * (1 + n)) for n in N.ravel())
    assert stopping_threshold(N, 0.1, 100) == pytest.approx(expected)
    assert stopping_threshold(N, 0.1, 100, "practical") == pytest.approx(math.log((1 + math.log(100)) / 0.1))
    assert support_path_length(chain_mdp(5, 0.3).P) == 4


def test_bad_mdps_raise():
    with pytest.raises(TypeError, match="mdp"):
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


def test_unreachable_pairs_get_infinite_characteristic_time():
    mdp = _two_state()
    w = np.array([[0.5, 0.0], [0.5, 0.0]])
    assert characteristic_time(mdp, w) == math.inf


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("nas-bpi", tmp_path)
