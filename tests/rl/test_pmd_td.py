"""Tests for policy mirror descent with exact and TD critics (neurips26.rl.pmd_td)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.harness.testing import assert_quick_verdict
from neurips26.rl import policy_mirror_descent
from neurips26.rl.mdp import policy_evaluation, random_mdp, soft_value_iteration
from neurips26.rl.pmd_td import (
    natural_policy_gradient,
    regularised_gap,
    soft_policy_iteration,
    softmax_policy_gradient,
    td_schedule,
)
from neurips26.rl.pmd_td.experiment import conditioned_features


@pytest.fixture(scope="module")
def mdp():
    return random_mdp(6, 3, gamma=0.9, random_state=0)


def test_exact_pmd_converges_linearly_to_the_soft_optimum(mdp):
    tau, lam = 0.1, 1.0
    pi, L = policy_mirror_descent(mdp, tau=tau, step_size=lam, n_iter=200, log=True)
    V_star, Q_star, pi_star = soft_value_iteration(mdp, tau)
    np.testing.assert_allclose(pi, pi_star, atol=1e-6)
    # the PMD fixed point solves the soft Bellman equation: its regularised values are soft VI's
    V_pi, Q_pi = policy_evaluation(mdp, pi, tau=tau)
    np.testing.assert_allclose(V_pi, V_star, atol=1e-8)
    np.testing.assert_allclose(Q_pi, Q_star, atol=1e-8)
    g = L["gap"]
    assert np.all(g > -1e-9)
    # linear rate: gap contracts at least by (1 + lambda tau)^{-1} per step over the first 60 steps
    assert g[60] <= g[0] * (1 + lam * tau) ** -60
    # the gap is monotone for exact PMD (policy improvement)
    assert np.all(np.diff(g[g > 1e-10]) <= 1e-12)


def test_one_pmd_step_matches_the_proximal_closed_form(mdp):
    tau, lam = 0.2, 0.7
    pi1 = policy_mirror_descent(mdp, tau=tau, step_size=lam, n_iter=1)
    # argmin_m <Q, m> + tau KL(m|mu) + KL(m|mu)/lam at pi_0 = mu  =>  m ∝ mu exp(-lam Q / (1 + lam tau))
    _, Q_r = policy_evaluation(mdp, np.full((6, 3), 1 / 3), tau=tau)
    w = np.exp(lam * Q_r / (1 + lam * tau))
    np.testing.assert_allclose(pi1, w / w.sum(axis=1, keepdims=True), atol=1e-12)


def test_td_critic_with_many_steps_matches_exact_pmd(mdp):
    kw = dict(tau=0.1, step_size=0.5, n_iter=30)
    pi_exact = policy_mirror_descent(mdp, **kw)
    pi_td, L = policy_mirror_descent(mdp, critic="td", td_steps=400, log=True, **kw)
    np.testing.assert_allclose(pi_td, pi_exact, atol=1e-8)
    assert L["critic_error"][-1] < 1e-8


def test_td_fixed_point_is_the_soft_q_function(mdp):
    # at a fixed policy, the expected TD iteration with tabular features converges to Q_tau^pi (cost form)
    tau = 0.3
    pi, L = policy_mirror_descent(mdp, tau=tau, step_size=1e-9, n_iter=1, critic="td", td_steps=600, log=True)
    _, Q_r = policy_evaluation(mdp, np.full((6, 3), 1 / 3), tau=tau)
    np.testing.assert_allclose(L["theta"].reshape(6, 3), -Q_r, atol=1e-9)


def test_sampled_td_is_an_unbiased_estimate_of_the_expected_update(mdp):
    # one TD step from theta = 0 at pi_0 = mu: the minibatch average concentrates on the expected update
    kw = dict(tau=0.2, step_size=1e-12, n_iter=1, critic="td", td_steps=1, log=True)
    _, L_exp = policy_mirror_descent(mdp, **kw)
    _, L_smp = policy_mirror_descent(mdp, td_mode="sampled", td_batch_size=200_000, random_state=0, **kw)
    scale = np.abs(L_exp["theta"]).max()
    assert np.abs(L_smp["theta"] - L_exp["theta"]).max() <= 0.05 * scale


def test_sampled_td_actor_critic_reaches_a_small_gap(mdp):
    _, L = policy_mirror_descent(
        mdp,
        tau=0.1,
        step_size=0.5,
        n_iter=150,
        critic="td",
        td_steps=10,
        td_mode="sampled",
        td_batch_size=512,
        random_state=1,
        log=True,
    )
    assert L["gap"][-1] < 0.02 * L["gap"][0]


def test_single_loop_and_schedules_converge(mdp):
    for sched, lam in (("linear", 0.5), ("log", 0.5), (1, 0.5), (3, 2.0)):
        _, L = policy_mirror_descent(
            mdp, tau=0.1, step_size=lam, n_iter=150, critic="td", td_steps=sched, log=True
        )
        assert L["gap"][-1] < 1e-4, sched


def test_td_schedule_values():
    assert [td_schedule("linear", 2.0)(n) for n in range(3)] == [2, 4, 6]
    assert td_schedule("log")(0) == 1 and td_schedule("log")(98) == 5
    assert td_schedule(4)(100) == 4


def test_regularised_gap_is_zero_at_optimum(mdp):
    _, _, pi_star = soft_value_iteration(mdp, 0.1)
    assert abs(regularised_gap(mdp, pi_star, 0.1)) < 1e-9
    assert regularised_gap(mdp, np.full((6, 3), 1 / 3), 0.1) > 0
    # a deterministic policy, a point-mass rho0 and a given V_star: <rho0, V* - V^pi> by hand
    V_star = soft_value_iteration(mdp, 0.1)[0]
    pi = np.zeros(6, dtype=int)
    rho0 = np.eye(6)[2]
    V_pi = policy_evaluation(mdp, pi, tau=0.1)[0]
    assert regularised_gap(mdp, pi, 0.1, rho0=rho0, V_star=V_star) == pytest.approx(V_star[2] - V_pi[2])


def test_regularised_gap_bad_inputs(mdp):
    pi = np.full((6, 3), 1 / 3)
    with pytest.raises(TypeError, match="mdp"):
        regularised_gap(np.ones((2, 2)), pi, 0.1)
    with pytest.raises(ValueError, match="tau"):
        regularised_gap(mdp, pi, 0.0)
    with pytest.raises(TypeError, match="tau"):
        regularised_gap(mdp, pi, "0.1")
    with pytest.raises(ValueError, match="policy"):
        regularised_gap(mdp, np.full((6, 3), 0.5), 0.1)
    with pytest.raises(ValueError, match="rho0"):
        regularised_gap(mdp, pi, 0.1, rho0=np.ones(6))
    with pytest.raises(ValueError, match="rho0"):
        regularised_gap(mdp, pi, 0.1, rho0=np.ones(5) / 5)
    with pytest.raises(ValueError, match="V_star"):
        regularised_gap(mdp, pi, 0.1, V_star=np.zeros(5))
    with pytest.raises(ValueError, match="mu"):
        regularised_gap(mdp, pi, 0.1, mu=np.array([0.5, 0.5, 0.0]))


def test_exact_critic_warns_about_ignored_td_parameters(mdp):
    with pytest.warns(UserWarning, match="features, rho"):
        policy_mirror_descent(mdp, n_iter=2, features=np.eye(18), rho=np.full((6, 3), 1 / 18))
    with pytest.warns(UserWarning, match="td_steps"):
        policy_mirror_descent(mdp, n_iter=2, td_steps="linear")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        policy_mirror_descent(mdp, n_iter=2)  # defaults: no warning
        policy_mirror_descent(mdp, n_iter=2, critic="td", features=np.eye(18))


def test_callable_schedules_must_return_integers(mdp):
    with pytest.raises(ValueError, match="td_steps"):
        policy_mirror_descent(mdp, critic="td", td_steps=lambda n: 1.5, n_iter=3)
    with pytest.raises(ValueError, match="td_steps"):
        policy_mirror_descent(mdp, critic="td", td_steps=lambda n: 0, n_iter=3)
    _, L = policy_mirror_descent(mdp, critic="td", td_steps=lambda n: float(n + 1), n_iter=3, log=True)
    np.testing.assert_array_equal(L["td_steps"], [1, 2, 3])


def test_one_hot_td_step_is_a_bellman_backup_and_conditioned_features_are_not(mdp):
    # one expected TD step from theta = 0 at pi_0 = mu: the Bellman backup T^mu(0) = c = -R
    c = -mdp.R.reshape(-1)
    kw = dict(tau=0.1, step_size=1e-12, n_iter=1, critic="td", td_steps=1, log=True)
    L = policy_mirror_descent(mdp, **kw)[1]
    np.testing.assert_allclose(L["theta"], c, atol=1e-12)
    Phi = conditioned_features(18, 10.0, np.random.default_rng(0))
    s = np.linalg.svd(Phi / np.sqrt(18), compute_uv=False)
    assert s.max() / s.min() == pytest.approx(10.0)
    L = policy_mirror_descent(mdp, features=Phi, **kw)[1]
    assert np.max(np.abs(Phi @ L["theta"] - c)) > 0.1 * np.max(np.abs(c))
    # but the features are realisable: many TD steps reach the soft Q of the fixed policy
    L = policy_mirror_descent(mdp, features=Phi, **{**kw, "td_steps": 20000})[1]
    _, Q_r = policy_evaluation(mdp, np.full((6, 3), 1 / 3), tau=0.1)
    np.testing.assert_allclose((Phi @ L["theta"]).reshape(6, 3), -Q_r, atol=1e-7)


def test_soft_policy_iteration_is_pmd_with_infinite_step(mdp):
    tau = 0.2
    pi1 = soft_policy_iteration(mdp, tau=tau, n_iter=1)
    _, Q_r = policy_evaluation(mdp, np.full((6, 3), 1 / 3), tau=tau)
    w = np.exp(Q_r / tau)  # pi_1 ∝ mu exp(-Q_cost / tau)
    np.testing.assert_allclose(pi1, w / w.sum(axis=1, keepdims=True), atol=1e-12)
    # large finite steps approach it
    np.testing.assert_allclose(policy_mirror_descent(mdp, tau=tau, step_size=1e9, n_iter=1), pi1, atol=1e-7)
    # the fixed point is soft VI's, and the value error contracts at least at rate gamma (a theorem)
    V_star, _, pi_star = soft_value_iteration(mdp, tau)
    errs = []
    pi = np.full((6, 3), 1 / 3)
    for n in range(8):
        errs.append(np.max(np.abs(policy_evaluation(mdp, pi, tau=tau)[0] - V_star)))
        pi = soft_policy_iteration(mdp, tau=tau, n_iter=n + 1)
    assert all(errs[n + 1] <= mdp.gamma * errs[n] + 1e-10 for n in range(7))
    np.testing.assert_allclose(soft_policy_iteration(mdp, tau=tau, n_iter=60), pi_star, atol=1e-8)
    # with a TD critic too
    pi_td = policy_mirror_descent(mdp, tau=tau, step_size=np.inf, n_iter=40, critic="td", td_steps=200)
    np.testing.assert_allclose(pi_td, pi_star, atol=1e-6)


def test_npg_is_pmd_with_reparametrised_step(mdp):
    tau, g = 0.1, mdp.gamma
    eta = 0.4 * (1 - g) / tau
    alpha = eta / (1 - g)
    # Cen et al.'s update ell' = (1 - eta tau/(1-gamma)) ell - eta/(1-gamma) Q is PMD with lambda = alpha/(1 - alpha tau)
    pi_npg = natural_policy_gradient(mdp, tau=tau, learning_rate=eta, n_iter=15)
    pi_pmd = policy_mirror_descent(mdp, tau=tau, step_size=alpha / (1 - alpha * tau), n_iter=15)
    np.testing.assert_allclose(pi_npg, pi_pmd, atol=1e-10)
    # the largest step is soft policy iteration
    np.testing.assert_allclose(
        natural_policy_gradient(mdp, tau=tau, learning_rate=(1 - g) / tau, n_iter=5),
        soft_policy_iteration(mdp, tau=tau, n_iter=5),
        atol=1e-10,
    )
    _, L = natural_policy_gradient(mdp, tau=tau, n_iter=200, log=True)
    assert L["gap"][-1] < 1e-9 and np.all(np.diff(L["gap"][L["gap"] > 1e-10]) <= 1e-12)


def test_softmax_pg_step_follows_the_finite_difference_gradient(mdp):
    tau, eta = 0.1, 0.5
    rho0 = np.random.default_rng(3).dirichlet(np.ones(6))

    def J(theta):  # <rho0, V_tau^pi_theta> in cost form, pi_theta ∝ mu exp(theta) with mu uniform
        pi = np.exp(theta - theta.max(axis=1, keepdims=True))
        pi /= pi.sum(axis=1, keepdims=True)
        return -rho0 @ policy_evaluation(mdp, pi, tau=tau)[0]

    grad = np.zeros((6, 3))
    h = 1e-6
    for s in range(6):
        for a in range(3):
            e = np.zeros((6, 3))
            e[s, a] = h
            grad[s, a] = (J(e) - J(-e)) / (2 * h)
    pi1 = softmax_policy_gradient(mdp, tau=tau, learning_rate=eta, n_iter=1, rho0=rho0)
    w = np.exp(-eta * grad)
    np.testing.assert_allclose(pi1, w / w.sum(axis=1, keepdims=True), atol=1e-7)
    _, L = softmax_policy_gradient(mdp, tau=tau, learning_rate=1.0, n_iter=300, log=True)
    assert L["gap"][-1] < 0.1 * L["gap"][0]


def test_baselines_bad_inputs(mdp):
    for fn in (natural_policy_gradient, softmax_policy_gradient, soft_policy_iteration):
        with pytest.raises(TypeError, match="mdp"):
            fn(np.ones((2, 2)))
        with pytest.raises(ValueError, match="tau"):
            fn(mdp, tau=-1.0)
        with pytest.raises(ValueError, match="n_iter"):
            fn(mdp, n_iter=0)
        with pytest.raises(ValueError, match="rho0"):
            fn(mdp, rho0=np.ones(6))
    for fn in (natural_policy_gradient, softmax_policy_gradient):
        with pytest.raises(ValueError, match="learning_rate"):
            fn(mdp, learning_rate=0.0)
        with pytest.raises(TypeError, match="learning_rate"):
            fn(mdp, learning_rate="1")
    with pytest.raises(ValueError, match="learning_rate"):
        natural_policy_gradient(mdp, tau=0.1, learning_rate=1.5)  # > (1 - gamma) / tau = 1
    with pytest.raises(ValueError, match="step_size"):
        policy_mirror_descent(mdp, step_size=np.nan)


def test_bad_inputs(mdp):
    with pytest.raises(ValueError, match="tau"):
        policy_mirror_descent(mdp, tau=0.0)
    with pytest.raises(ValueError, match="step_size"):
        policy_mirror_descent(mdp, step_size=-1.0)
    with pytest.raises(ValueError, match="n_iter"):
        policy_mirror_descent(mdp, n_iter=0)
    with pytest.raises(ValueError, match="critic"):
        policy_mirror_descent(mdp, critic="mc")
    with pytest.raises(ValueError, match="features"):
        policy_mirror_descent(mdp, critic="td", features=np.ones((5, 2)))
    with pytest.raises(ValueError, match="full column rank"):
        policy_mirror_descent(mdp, critic="td", features=np.ones((18, 2)))
    with pytest.raises(ValueError, match="rho"):
        policy_mirror_descent(mdp, critic="td", rho=np.ones((6, 3)))
    with pytest.raises(ValueError, match="td_step_size"):
        policy_mirror_descent(mdp, critic="td", td_step_size=0.0)
    with pytest.raises(ValueError, match="td_steps"):
        policy_mirror_descent(mdp, critic="td", td_steps="sqrt")
    with pytest.raises(ValueError, match="td_steps"):
        td_schedule(0)
    with pytest.raises(ValueError, match="td_scale"):
        td_schedule("log", td_scale=0.0)
    with pytest.raises(ValueError, match="mu"):
        policy_mirror_descent(mdp, mu=np.array([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="rho0"):
        policy_mirror_descent(mdp, rho0=np.ones(6))
    with pytest.raises(TypeError, match="mdp"):
        policy_mirror_descent(np.zeros((2, 2)))
    with pytest.raises(FloatingPointError, match="diverged"):
        policy_mirror_descent(
            mdp,
            critic="td",
            td_mode="sampled",
            td_batch_size=2,
            td_step_size=1e3,
            td_steps=50,
            random_state=0,
        )
    with pytest.raises(ValueError, match="td_mode"):
        policy_mirror_descent(mdp, critic="td", td_mode="mc")
    with pytest.raises(ValueError, match="td_batch_size"):
        policy_mirror_descent(mdp, critic="td", td_mode="sampled", td_batch_size=0)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), lam=st.floats(0.05, 50.0), tau=st.floats(0.05, 1.0))
def test_exact_pmd_gap_is_nonincreasing(seed, lam, tau):
    mdp = random_mdp(4, 3, gamma=0.8, random_state=seed)
    _, L = policy_mirror_descent(mdp, tau=tau, step_size=lam, n_iter=20, log=True)
    assert np.all(np.diff(L["gap"]) <= 1e-9)
    assert np.all(L["kl_max"] <= np.log(3) + 1e-12)


def test_stability_study_compares_at_equal_td_budget(mdp):
    # with N = 4 the conditioned single loop cannot converge in LONG_HORIZON * N steps, so every lambda fails
    # and the rescue runs: each multi-step run must get the single loop's TD budget, not m times it
    from neurips26.rl.pmd_td.experiment import LONG_HORIZON, _feature_study

    Phi = conditioned_features(mdp.n_states * mdp.n_actions, 10.0, np.random.default_rng(0))
    rows, N, ms = [], 4, [2, 4]
    out = _feature_study(None, mdp, Phi, "conditioned", N, [0.1, 1.0], ms, rows, {})
    budget = LONG_HORIZON * N
    single = [r for r in rows if r["variant"] == "single loop (m = 1)"]
    assert len(single) == 2 and all(r["TD_steps_total"] == budget for r in single)
    rescue = [r for r in rows if r["variant"].startswith("constant m =") and "TD steps" in r["variant"]]
    assert rescue and all(r["TD_steps_total"] == budget for r in rescue)
    assert out["fails"] == [0.1, 1.0]
    # the equal-budget pair at the first lambda: m N TD steps on both sides
    fresh = policy_mirror_descent(
        mdp, tau=0.1, step_size=0.1, n_iter=4 * N, critic="td", td_steps=1, features=Phi, log=True
    )[1]
    assert out["single_gap_at_budget"][4] == pytest.approx(float(fresh["gap"][-1]), rel=1e-9)
    pair = [r for r in rows if "equal-budget" in r["variant"]]
    assert len(pair) == 1 and pair[0]["TD_steps_total"] == 4 * N


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("pmd-td", tmp_path)
