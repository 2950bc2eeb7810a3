"""Tests for the shared tabular MDP toolkit (neurips26.rl.mdp)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.rl.mdp import (
    TabularMDP,
    chain_mdp,
    check_policy,
    greedy_policy,
    policy_evaluation,
    random_mdp,
    soft_value_iteration,
    value_iteration,
)


def test_value_iteration_matches_brute_force_over_deterministic_policies():
    mdp = random_mdp(4, 3, gamma=0.8, random_state=0)
    V, Q, pi = value_iteration(mdp, tol=1e-12)
    best = np.full(4, -np.inf)
    for actions in itertools.product(range(3), repeat=4):
        Vp, _ = policy_evaluation(mdp, np.array(actions))
        best = np.maximum(best, Vp)
    np.testing.assert_allclose(V, best, atol=1e-9)
    Vpi, _ = policy_evaluation(mdp, pi)
    np.testing.assert_allclose(Vpi, V, atol=1e-9)


def test_policy_evaluation_closed_form_single_state():
    # one state, one action: V = r / (1 - gamma); KL term vanishes at pi = mu
    mdp = TabularMDP(np.ones((1, 1, 1)), np.array([[2.0]]), 0.75)
    V, Q = policy_evaluation(mdp, np.ones((1, 1)), tau=0.3)
    np.testing.assert_allclose(V, [8.0])
    np.testing.assert_allclose(Q, [[8.0]])


def test_soft_value_iteration_is_the_regularised_fixed_point():
    mdp = random_mdp(5, 3, gamma=0.9, random_state=1)
    tau = 0.2
    mu = np.array([0.5, 0.3, 0.2])
    V, Q, pi = soft_value_iteration(mdp, tau, mu=mu)
    # Bellman fixed point
    V2 = tau * np.log(np.sum(mu * np.exp((mdp.R + mdp.gamma * mdp.P @ V) / tau), axis=1))
    np.testing.assert_allclose(V2, V, atol=1e-10)
    # the soft-greedy policy's regularised value is V*
    Vpi, Qpi = policy_evaluation(mdp, pi, tau=tau, mu=mu)
    np.testing.assert_allclose(Vpi, V, atol=1e-8)
    np.testing.assert_allclose(Qpi, Q, atol=1e-8)
    # and it beats random policies in the regularised objective
    rng = np.random.default_rng(0)
    for _ in range(5):
        other = rng.dirichlet(np.ones(3), size=5)
        Vo, _ = policy_evaluation(mdp, other, tau=tau, mu=mu)
        assert np.all(Vo <= V + 1e-9)


def test_soft_value_iteration_tends_to_hard_values_as_tau_vanishes():
    mdp = random_mdp(4, 2, gamma=0.7, random_state=3)
    V, _, _ = value_iteration(mdp)
    Vs, _, _ = soft_value_iteration(mdp, 1e-4)
    # V_tau in [V* - tau log|A| / (1 - gamma), V*]
    assert np.all(Vs <= V + 1e-9)
    assert np.all(Vs >= V - 1e-4 * np.log(2) / 0.3 - 1e-9)


def test_chain_connectivity():
    mdp = chain_mdp(5, 0.25, gamma=0.5)
    assert mdp.P.shape == (5, 2, 5)
    np.testing.assert_allclose(mdp.P.sum(axis=2), 1.0)
    assert mdp.P[0, 1, 1] == pytest.approx(0.25)
    assert mdp.P[3, 0, 0] == 1.0


def test_bad_mdps_raise():
    P = np.full((2, 2, 2), 0.5)
    R = np.zeros((2, 2))
    with pytest.raises(ValueError, match="sum to 1"):
        TabularMDP(P * 0.9, R, 0.5)
    with pytest.raises(ValueError, match="R must be finite"):
        TabularMDP(P, np.array([[np.nan, 0], [0, 0]]), 0.5)
    with pytest.raises(ValueError, match="gamma"):
        TabularMDP(P, R, 1.0)
    with pytest.raises(ValueError, match="gamma"):
        TabularMDP(P, R, -0.1)
    with pytest.raises(ValueError, match="P must have shape"):
        TabularMDP(np.full((2, 2, 3), 1 / 3), R, 0.5)
    with pytest.raises(ValueError, match="R must have shape"):
        TabularMDP(P, np.zeros(2), 0.5)
    with pytest.raises(ValueError, match="non-negative"):
        TabularMDP(np.array([[[1.5, -0.5]], [[0.5, 0.5]]]), np.zeros((2, 1)), 0.5)
    with pytest.raises(ValueError, match="P must be finite"):
        TabularMDP(np.array([[[np.inf, 0.0]], [[0.5, 0.5]]]), np.zeros((2, 1)), 0.5)


def test_bad_arguments_raise():
    mdp = random_mdp(3, 2, random_state=0)
    with pytest.raises(ValueError, match="n_states"):
        random_mdp(0, 2)
    with pytest.raises(ValueError, match="n_actions"):
        random_mdp(2, 0)
    with pytest.raises(ValueError, match="concentration"):
        random_mdp(2, 2, concentration=0)
    with pytest.raises(ValueError, match="reward_range"):
        random_mdp(2, 2, reward_range=(1, 0))
    with pytest.raises(ValueError, match="p must"):
        chain_mdp(3, 0.0)
    with pytest.raises(ValueError, match="n_states"):
        chain_mdp(1, 0.5)
    with pytest.raises(ValueError, match="tol"):
        value_iteration(mdp, tol=0)
    with pytest.raises(ValueError, match="max_iter"):
        value_iteration(mdp, max_iter=0)
    with pytest.raises(TypeError, match="mdp"):
        value_iteration("mdp")
    with pytest.raises(ValueError, match="tau"):
        soft_value_iteration(mdp, 0.0)
    with pytest.raises(ValueError, match="mu"):
        soft_value_iteration(mdp, 0.1, mu=np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="tau"):
        policy_evaluation(mdp, np.full((3, 2), 0.5), tau=-1)
    with pytest.raises(ValueError, match="policy"):
        policy_evaluation(mdp, np.full((3, 2), 0.6))
    with pytest.raises(ValueError, match="policy"):
        check_policy(np.array([0, 2, 1]), 3, 2)
    with pytest.raises(ValueError, match="Q"):
        greedy_policy(np.zeros(3))


@settings(max_examples=15, deadline=None)
@given(
    S=st.integers(1, 5),
    A=st.integers(1, 3),
    gamma=st.floats(0.0, 0.95),
    seed=st.integers(0, 10_000),
)
def test_optimal_value_dominates_every_policy(S, A, gamma, seed):
    mdp = random_mdp(S, A, gamma=gamma, random_state=seed)
    V, Q, pi = value_iteration(mdp)
    np.testing.assert_allclose(V, Q.max(axis=1), atol=1e-8)
    other = np.random.default_rng(seed).dirichlet(np.ones(A), size=S)
    Vo, _ = policy_evaluation(mdp, other)
    assert np.all(Vo <= V + 1e-7)
