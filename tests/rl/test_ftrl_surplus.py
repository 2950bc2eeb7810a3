"""Tests for neurips26.rl.ftrl_surplus (strategic surplus against FTRL, arXiv 2604.05129)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from neurips26.harness.testing import assert_quick_verdict
from neurips26.rl.ftrl_surplus import (
    REGULARIZERS,
    STEEP,
    best_response_dynamics,
    circulant_game,
    elimination_round,
    euclidean_elimination_time,
    euclidean_sweeping_surplus,
    fixed_optimizer_dynamics,
    ftrl_log_strategy,
    ftrl_regret_bound,
    ftrl_strategy,
    hedge_sweeping_surplus,
    learner_action_gaps,
    maxmin_strategy,
    planted_game,
    project_simplex,
    random_gaussian_game,
    rock_paper_scissors,
)
from neurips26.rl.ftrl_surplus.optimizers import (
    continuous_time_surplus,
    optimal_control_strategy,
    regularizer_conjugate,
    repeated_play,
)

finite_losses = arrays(
    np.float64, st.integers(2, 6), elements=st.floats(-50, 50, allow_nan=False, allow_infinity=False)
)


# --- FTRL argmin ------------------------------------------------------------------------------------------


def _kkt_residual(y: np.ndarray, L: np.ndarray, eta: float, reg: str) -> float:
    """Spread of the gradient ``eta L + grad h(y)`` over the support (zero at the simplex argmin)."""
    m = L.size
    if reg == "entropy":
        g = eta * L + np.log(y) + 1.0
    elif reg == "tsallis":
        g = eta * L - 1.0 / np.sqrt(y)
    elif reg == "log_barrier":
        g = eta * L - 1.0 / y
    else:
        g = eta * L + (y - 1.0 / m)
        on = y > 0
        # off the support the gradient may only be larger (multiplier mu_j >= 0)
        assert np.all(g[~on] >= g[on].max() - 1e-9)
        g = g[on]
    return float(np.ptp(g) / max(1.0, np.abs(g).max()))


@pytest.mark.parametrize("reg", REGULARIZERS)
def test_ftrl_strategy_satisfies_kkt(reg):
    rng = np.random.default_rng(0)
    for _ in range(20):
        L = rng.normal(scale=5.0, size=rng.integers(2, 9))
        y = ftrl_strategy(L, 0.3, reg)
        assert y.min() >= 0 and abs(y.sum() - 1) < 1e-12
        if STEEP[reg]:
            assert y.min() > 0
        assert _kkt_residual(y, L, 0.3, reg) < 1e-9


def test_ftrl_uniform_start_and_hedge_is_softmax():
    for reg in REGULARIZERS:
        np.testing.assert_allclose(ftrl_strategy(np.zeros(4), 0.1, reg), np.full(4, 0.25), atol=1e-12)
    L = np.array([0.0, 1.0, 3.0])
    w = np.exp(-0.5 * L)
    np.testing.assert_allclose(ftrl_strategy(L, 0.5, "entropy"), w / w.sum(), rtol=1e-12)


def test_ftrl_batched_equals_rowwise():
    L = np.random.default_rng(1).normal(size=(3, 7, 5))
    for reg in REGULARIZERS:
        batch = ftrl_strategy(L, 0.7, reg)
        rows = np.array([[ftrl_strategy(L[i, j], 0.7, reg) for j in range(7)] for i in range(3)])
        np.testing.assert_allclose(batch, rows, atol=1e-12)


def test_ftrl_log_strategy_is_finite_for_steep_and_exact_zero_for_euclidean():
    L = np.array([0.0, 1e5])
    assert np.isfinite(ftrl_log_strategy(L, 1.0, "entropy")).all()  # exp(-1e5) underflows; its log does not
    assert np.isclose(ftrl_log_strategy(L, 1.0, "entropy")[1], -1e5)
    assert np.isneginf(ftrl_log_strategy(L, 1.0, "euclidean")[1])
    L2 = np.random.default_rng(2).normal(size=(4, 6))
    for reg in REGULARIZERS:
        np.testing.assert_allclose(
            np.exp(ftrl_log_strategy(L2, 0.4, reg)), ftrl_strategy(L2, 0.4, reg), atol=1e-12
        )


@settings(max_examples=40, deadline=None)
@given(L=finite_losses, shift=st.floats(-100, 100), eta=st.floats(0.01, 2.0))
def test_ftrl_invariant_to_common_shift(L, shift, eta):
    for reg in REGULARIZERS:
        np.testing.assert_allclose(ftrl_strategy(L + shift, eta, reg), ftrl_strategy(L, eta, reg), atol=1e-8)


@settings(max_examples=50, deadline=None)
@given(z=finite_losses, seed=st.integers(0, 2**16))
def test_project_simplex_is_the_closest_simplex_point(z, seed):
    y = project_simplex(z)
    assert y.min() >= 0 and abs(y.sum() - 1) < 1e-9
    w = np.random.default_rng(seed).dirichlet(np.ones(z.size), size=50)
    assert np.all(np.linalg.norm(z - y) <= np.linalg.norm(z - w, axis=1) + 1e-9)
    np.testing.assert_allclose(project_simplex(y), y, atol=1e-12)  # idempotent


@pytest.mark.parametrize("bad", [np.array([np.nan, 1.0]), np.zeros(0), np.array([np.inf, 0.0])])
def test_ftrl_bad_loss(bad):
    with pytest.raises(ValueError, match="cum_loss"):
        ftrl_strategy(bad, 0.1)
    with pytest.raises(ValueError, match="cum_loss"):
        ftrl_log_strategy(bad, 0.1)
    with pytest.raises(ValueError, match="z"):
        project_simplex(bad)


def test_ftrl_bad_parameters():
    for eta in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="eta"):
            ftrl_strategy(np.zeros(3), eta)
    with pytest.raises(TypeError, match="eta"):
        ftrl_strategy(np.zeros(3), "0.1")
    with pytest.raises(ValueError, match="regularizer"):
        ftrl_strategy(np.zeros(3), 0.1, "tsallis2")
    with pytest.raises(ValueError, match="regularizer"):
        ftrl_log_strategy(np.zeros(3), 0.1, "l2")


# --- games --------------------------------------------------------------------------------------------------


def test_maxmin_matches_nashpy_on_random_games():
    nash = pytest.importorskip("nashpy")
    rng = np.random.default_rng(3)
    for _ in range(15):
        A = rng.normal(size=(rng.integers(2, 5), rng.integers(2, 5)))
        x, v = maxmin_strategy(A)
        row, col = nash.Game(A).linear_program()
        assert np.isclose(v, row @ A @ col, atol=1e-7)
        assert np.isclose(np.min(A.T @ row), v, atol=1e-7)  # nashpy's row strategy guarantees the same value
        assert np.isclose(np.min(A.T @ x), v, atol=1e-9)  # x guarantees v
        assert np.isclose(np.max(A @ col), v, atol=1e-7)  # and the learner's equilibrium caps it at v


def test_maxmin_known_games():
    x, v = maxmin_strategy(rock_paper_scissors())
    np.testing.assert_allclose(x, np.full(3, 1 / 3), atol=1e-8)
    assert abs(v) < 1e-9
    x, v = maxmin_strategy(np.array([[3.0, 1.0], [4.0, 2.0]]))  # pure saddle at (row 1, col 1)
    np.testing.assert_allclose(x, [0.0, 1.0], atol=1e-9)
    assert np.isclose(v, 2.0)


@pytest.mark.parametrize("k, N", [(1, 1), (2, 3), (3, 2), (2, 0)])
def test_planted_game_is_what_it_claims(k, N):
    rng = np.random.default_rng(k * 10 + N)
    gaps = rng.uniform(0.2, 0.8, size=N)
    g = planted_game(k, gaps, n_extra_rows=2, value=0.7, random_state=rng)
    assert g.A.shape == (k + 2, k + N) and g.n_optimal == k and g.n_suboptimal == N
    np.testing.assert_allclose(g.A.T @ g.x_star - g.value, g.gaps, atol=1e-12)
    x, v = maxmin_strategy(g.A)
    assert np.isclose(v, 0.7, atol=1e-9)
    np.testing.assert_allclose(x, g.x_star, atol=1e-7)  # the planted max-min strategy is the unique one
    d, n_sub, n_opt = learner_action_gaps(g.A, x, v)
    assert (n_sub, n_opt) == (N, k)
    np.testing.assert_allclose(d, g.gaps, atol=1e-6)


def test_circulant_and_gaussian_games():
    A = circulant_game(5, value=0.3, random_state=0)
    x, v = maxmin_strategy(A)
    assert np.isclose(v, 0.3)
    assert learner_action_gaps(A, x, v)[1] == 0
    assert random_gaussian_game(3, 8, random_state=1).shape == (3, 8)
    G1, G2 = random_gaussian_game(3, 4, random_state=5), random_gaussian_game(3, 4, random_state=5)
    np.testing.assert_array_equal(G1, G2)


def test_games_bad_input():
    with pytest.raises(ValueError, match="A"):
        maxmin_strategy(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="A"):
        maxmin_strategy(np.ones(3))
    with pytest.raises(TypeError, match="A"):
        maxmin_strategy("A")
    with pytest.raises(ValueError, match="x"):
        learner_action_gaps(np.eye(2), [0.7, 0.7])
    with pytest.raises(ValueError, match="x"):
        learner_action_gaps(np.eye(2), [1.0])
    with pytest.raises(ValueError, match="atol"):
        learner_action_gaps(np.eye(2), [0.5, 0.5], atol=-1.0)
    with pytest.raises(ValueError, match="n_optimal"):
        planted_game(0, [0.3])
    with pytest.raises(ValueError, match="gaps"):
        planted_game(2, [0.3, -0.1])
    with pytest.raises(ValueError, match="n_extra_rows"):
        planted_game(2, [0.3], n_extra_rows=-1)
    with pytest.raises(ValueError, match="value"):
        planted_game(2, [0.3], value=np.inf)
    with pytest.raises(ValueError, match="n"):
        circulant_game(1)
    with pytest.raises(ValueError, match="m"):
        random_gaussian_game(3, 0)


# --- dynamics ----------------------------------------------------------------------------------------------


def _naive_fixed(A, x, v, eta, T, reg):
    L, S = np.zeros(A.shape[1]), []
    for _ in range(T):
        y = ftrl_strategy(L, eta, reg)
        S.append(x @ A @ y - v)
        L += A.T @ x
    return np.cumsum(S)


def _naive_best_response(A, v, eta, T, reg):
    L, S = np.zeros(A.shape[1]), []
    for _ in range(T):
        y = ftrl_strategy(L, eta, reg)
        i = int(np.argmax(A @ y))
        S.append(A[i] @ y - v)
        L += A[i]
    return np.cumsum(S)


@pytest.mark.parametrize("reg", REGULARIZERS)
def test_fixed_optimizer_matches_sequential_ftrl(reg):
    g = planted_game(2, [0.3, 0.5, 0.4], random_state=0)
    tr = fixed_optimizer_dynamics(g.A, 0.1, 300, reg, x=g.x_star, value=g.value)
    np.testing.assert_allclose(
        tr.cumulative_surplus, _naive_fixed(g.A, g.x_star, g.value, 0.1, 300, reg), atol=1e-9
    )
    assert np.all(tr.round_surplus >= 0)  # sweeping: surplus against a max-min optimizer is never negative


@pytest.mark.parametrize("reg", ["entropy", "euclidean", "tsallis"])
def test_best_response_matches_sequential_loop_and_batches(reg):
    As = np.random.default_rng(4).normal(size=(3, 3, 4))
    br = best_response_dynamics(As, 0.1, 200, reg)
    for b in range(3):
        v = maxmin_strategy(As[b])[1]
        np.testing.assert_allclose(
            br.cumulative_surplus[b], _naive_best_response(As[b], v, 0.1, 200, reg), atol=1e-9
        )
        one = best_response_dynamics(As[b], 0.1, 200, reg)
        np.testing.assert_allclose(one.cumulative_surplus[0], br.cumulative_surplus[b], atol=1e-12)
    # surplus <= realised regret <= the FTRL regret bound
    assert np.all(br.cumulative_surplus[:, -1] <= br.regret + 1e-9)
    assert all(br.regret[b] <= ftrl_regret_bound(As[b], 0.1, 200, reg) for b in range(3))


@pytest.mark.parametrize("N", [1, 3, 6])
@pytest.mark.parametrize("k", [1, 2])
def test_sweeping_closed_forms_by_simulation(N, k):
    eta = 0.01
    g = planted_game(k, np.full(N, 0.3), random_state=N + 7 * k)
    T = int(60 / (eta * 0.3))
    hedge = fixed_optimizer_dynamics(g.A, eta, T, "entropy")  # x*, v from the LP
    eucl = fixed_optimizer_dynamics(g.A, eta, T, "euclidean")
    assert eta * hedge.surplus == pytest.approx(np.log1p(N / k), rel=0.03)
    assert eta * eucl.surplus == pytest.approx(N / (2 * (N + k) * k), rel=0.03)
    assert hedge_sweeping_surplus(N, k, eta) == pytest.approx(np.log1p(N / k) / eta)
    assert euclidean_sweeping_surplus(N, k, eta) == pytest.approx(N / (2 * (N + k) * k * eta))
    # Euclidean: each suboptimal coordinate is 1/n - eta s D k / n, exactly zero from s >= 1/(eta D k)
    assert elimination_round(eucl) == int(np.ceil(euclidean_elimination_time(0.3, k, eta))) + 1
    assert elimination_round(hedge) is None and np.isfinite(hedge.log_suboptimal_mass).all()


def test_hedge_surplus_is_gap_independent_and_theta_one_over_eta():
    g = planted_game(2, [0.25, 0.5, 0.9, 0.35], random_state=3)
    vals = [
        eta * fixed_optimizer_dynamics(g.A, eta, int(60 / (eta * 0.25)), "entropy").surplus
        for eta in (0.1, 0.03, 0.01)
    ]
    assert max(vals) / min(vals) < 1.05
    assert vals[-1] == pytest.approx(np.log(3.0), rel=0.02)


def test_no_suboptimal_actions_no_surplus():
    for A in (rock_paper_scissors(), circulant_game(4, random_state=1)):
        for reg in REGULARIZERS:
            tr = fixed_optimizer_dynamics(A, 0.1, 2000, reg)
            assert abs(tr.surplus) < 1e-8
            assert elimination_round(tr) == 1  # nothing to eliminate


def test_surplus_increases_with_n_suboptimal():
    for reg in ("entropy", "euclidean"):
        vals = [
            fixed_optimizer_dynamics(
                planted_game(2, np.full(N, 0.4), random_state=N).A, 0.05, 5000, reg
            ).surplus
            for N in (0, 1, 2, 4, 8)
        ]
        assert np.all(np.diff(vals) > 0)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    reg=st.sampled_from(["entropy", "euclidean", "tsallis"]),
    eta=st.sampled_from([0.03, 0.1, 0.3]),
)
def test_surplus_never_exceeds_regret_bound(seed, reg, eta):
    A = np.random.default_rng(seed).normal(size=(3, 4))
    T = 300
    br = best_response_dynamics(A, eta, T, reg)
    bounds = np.array([ftrl_regret_bound(A, eta, t, reg) for t in range(1, T + 1)])
    assert np.all(br.cumulative_surplus[0] <= bounds + 1e-9)
    assert br.regret[0] <= bounds[-1] + 1e-9
    fx = fixed_optimizer_dynamics(A, eta, T, reg)
    assert np.all(fx.cumulative_surplus >= -1e-7)


def test_regret_bound_values():
    A = np.array([[1.0, -2.0], [0.5, 0.0]])
    assert ftrl_regret_bound(A, 0.5, 10, "entropy") == pytest.approx(np.log(2) / 0.5 + 0.5 * 10 * 4 / 2)
    assert ftrl_regret_bound(A, 0.5, 10, "euclidean") == pytest.approx(0.25 / 0.5 + 0.5 * 10 * 5 / 2)
    assert ftrl_regret_bound(A, 0.5, 10, "log_barrier") == np.inf


def test_dynamics_bad_input():
    A = rock_paper_scissors()
    for T in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="T"):
            fixed_optimizer_dynamics(A, 0.1, T)
        with pytest.raises(ValueError, match="T"):
            best_response_dynamics(A, 0.1, T)
    with pytest.raises(ValueError, match="eta"):
        fixed_optimizer_dynamics(A, -0.1, 10)
    with pytest.raises(ValueError, match="eta"):
        best_response_dynamics(A, 0.0, 10)
    with pytest.raises(ValueError, match="regularizer"):
        fixed_optimizer_dynamics(A, 0.1, 10, "hedge")
    with pytest.raises(ValueError, match="regularizer"):
        best_response_dynamics(A, 0.1, 10, "hedge")
    with pytest.raises(ValueError, match="x"):
        fixed_optimizer_dynamics(A, 0.1, 10, x=np.array([0.5, 0.6, 0.0]))
    with pytest.raises(ValueError, match="value"):
        fixed_optimizer_dynamics(A, 0.1, 10, x=np.full(3, 1 / 3), value=np.nan)
    with pytest.raises(ValueError, match="A"):
        fixed_optimizer_dynamics(np.full((2, 2), np.nan), 0.1, 10)
    with pytest.raises(ValueError, match="A"):
        best_response_dynamics(np.ones((2, 2, 2, 2)), 0.1, 10)
    with pytest.raises(ValueError, match="A"):
        best_response_dynamics(np.array([[np.inf, 0.0]]), 0.1, 10)
    with pytest.raises(ValueError, match="values"):
        best_response_dynamics(np.ones((2, 3, 3)), 0.1, 10, values=[0.0])
    for bad in ((-1, 2), (2, 0), (1.5, 2)):
        with pytest.raises(ValueError, match="n_suboptimal|n_optimal"):
            hedge_sweeping_surplus(*bad, 0.1)
        with pytest.raises(ValueError, match="n_suboptimal|n_optimal"):
            euclidean_sweeping_surplus(*bad, 0.1)
    with pytest.raises(ValueError, match="gap"):
        euclidean_elimination_time(0.0, 2, 0.1)
    with pytest.raises(ValueError, match="eta"):
        euclidean_elimination_time(0.3, 2, -0.1)
    with pytest.raises(ValueError, match="T"):
        ftrl_regret_bound(A, 0.1, -1)
    with pytest.raises(ValueError, match="A"):
        ftrl_regret_bound(np.ones(3), 0.1, 10)


# --- game objects, user optimizers, optimal control ----------------------------------------------------------


class _DuckGame:
    """Anything with nashpy's payoff_matrices = (A, B)."""

    def __init__(self, A, B=None):
        self.payoff_matrices = (np.asarray(A), -np.asarray(A) if B is None else np.asarray(B))


def test_nashpy_and_duck_typed_games_are_accepted_everywhere():
    nash = pytest.importorskip("nashpy")
    A = np.random.default_rng(5).normal(size=(3, 4))
    for game in (nash.Game(A), _DuckGame(A)):
        x, v = maxmin_strategy(game)
        np.testing.assert_allclose(x, maxmin_strategy(A)[0], atol=1e-9)
        assert v == pytest.approx(maxmin_strategy(A)[1])
        assert fixed_optimizer_dynamics(game, 0.1, 50).surplus == pytest.approx(
            fixed_optimizer_dynamics(A, 0.1, 50).surplus
        )
        np.testing.assert_allclose(
            best_response_dynamics(game, 0.1, 50).cumulative_surplus,
            best_response_dynamics(A, 0.1, 50).cumulative_surplus,
        )
        assert ftrl_regret_bound(game, 0.1, 10) == ftrl_regret_bound(A, 0.1, 10)
        assert repeated_play(game, "maxmin", 0.1, 20).surplus == pytest.approx(
            repeated_play(A, "maxmin", 0.1, 20).surplus
        )
    with pytest.raises(ValueError, match="zero-sum"):
        maxmin_strategy(nash.Game(A, A))  # general-sum
    with pytest.raises(ValueError, match="zero-sum"):
        repeated_play(_DuckGame(A, np.zeros_like(A)), "maxmin", 0.1, 5)
    with pytest.raises(ValueError, match="pair"):
        maxmin_strategy(type("G", (), {"payoff_matrices": (A,)})())


def test_repeated_play_matches_the_vectorised_dynamics():
    g = planted_game(2, [0.3, 0.5], random_state=2)
    for reg in ("entropy", "euclidean"):
        fixed = fixed_optimizer_dynamics(g.A, 0.1, 200, reg, x=g.x_star, value=g.value)
        np.testing.assert_allclose(
            repeated_play(g.A, g.x_star, 0.1, 200, reg, value=g.value).cumulative_surplus,
            fixed.cumulative_surplus,
            atol=1e-9,
        )
        br = best_response_dynamics(g.A, 0.1, 200, reg)
        named = repeated_play(g.A, "best_response", 0.1, 200, reg)
        np.testing.assert_allclose(named.cumulative_surplus, br.cumulative_surplus[0], atol=1e-9)
        assert named.regret == pytest.approx(br.regret[0])
        # a user's callable: the same best response, returned as a pure action
        user = repeated_play(g.A, lambda t, y, L: int(np.argmax(g.A @ y)), 0.1, 200, reg)
        np.testing.assert_allclose(user.cumulative_surplus, br.cumulative_surplus[0], atol=1e-9)
        assert user.x.shape == (200, g.A.shape[0]) and user.y.shape == (200, g.A.shape[1])


@pytest.mark.parametrize("reg", REGULARIZERS)
@pytest.mark.parametrize("shape", [(2, 2), (3, 4), (5, 3)])
def test_fixed_strategy_all_rounds_at_once_equals_the_round_by_round_loop(reg, shape):
    # the callable path is the protocol round by round (x_t chosen, y_t = FTRL(L_t), L_{t+1} = L_t + A^T x_t);
    # a fixed strategy plays every round at once. L_t is accumulated in the same order (equal bit for bit), so
    # the two differ only by how y_t's normaliser converges (Newton batched over rounds, <= 1e-14 per sum) and
    # by the order of the payoff products: |dy| <= 1e-13, |d payoff| <= max|A| * m * 1e-13, summed over T rounds
    rng = np.random.default_rng(shape[0] * 10 + shape[1])
    A = rng.normal(size=shape)
    x = rng.dirichlet(np.ones(shape[0]))
    T, eta = 300, 0.2
    fast = repeated_play(A, x, eta, T, reg)
    loop = repeated_play(A, lambda t, y, L: x, eta, T, reg)
    tol = np.abs(A).max() * shape[1] * 1e-13
    np.testing.assert_allclose(fast.y, loop.y, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(fast.x, loop.x)
    np.testing.assert_allclose(fast.payoff, loop.payoff, rtol=0, atol=tol)
    np.testing.assert_allclose(fast.cumulative_surplus, loop.cumulative_surplus, rtol=0, atol=T * tol)
    assert fast.regret == pytest.approx(loop.regret, rel=0, abs=T * tol)


def test_repeated_play_passes_the_learner_state_to_the_optimizer():
    A = rock_paper_scissors()
    seen = []

    def spy(t, y, L):
        seen.append((t, y, L))
        return np.array([1.0, 0.0, 0.0])

    repeated_play(A, spy, 0.5, 3)
    assert [t for t, _, _ in seen] == [1, 2, 3]
    np.testing.assert_allclose(seen[0][1], np.full(3, 1 / 3))
    np.testing.assert_allclose(seen[2][2], 2 * A[0])  # cumulative loss after two rounds of row 0
    np.testing.assert_allclose(seen[1][1], ftrl_strategy(A[0], 0.5))


def test_repeated_play_bad_inputs():
    A = rock_paper_scissors()
    with pytest.raises(ValueError, match="optimizer"):
        repeated_play(A, "stackelberg", 0.1, 5)
    with pytest.raises(ValueError, match="optimizer"):
        repeated_play(A, np.array([0.5, 0.5]), 0.1, 5)
    with pytest.raises(ValueError, match="optimizer"):
        repeated_play(A, lambda t, y, L: 3, 0.1, 5)
    with pytest.raises(ValueError, match="optimizer"):
        repeated_play(A, lambda t, y, L: np.array([0.7, 0.7, 0.0]), 0.1, 5)
    with pytest.raises(ValueError, match="T"):
        repeated_play(A, "maxmin", 0.1, 0)
    with pytest.raises(ValueError, match="eta"):
        repeated_play(A, "maxmin", -1.0, 5)
    with pytest.raises(ValueError, match="regularizer"):
        repeated_play(A, "maxmin", 0.1, 5, "hedge")
    with pytest.raises(ValueError, match="value"):
        repeated_play(A, "maxmin", 0.1, 5, value=np.nan)


@pytest.mark.parametrize("reg", REGULARIZERS)
def test_continuous_time_surplus_matches_numerical_integration(reg):
    from scipy.integrate import quad

    g = planted_game(2, [0.3, 0.6, 0.45], random_state=4)
    eta, T = 0.2, 40.0
    x = np.random.default_rng(0).dirichlet(np.ones(g.A.shape[0]))
    loss = g.A.T @ x

    def rate(t):  # x^T A y(t) - v with y(t) the FTRL strategy of the cumulative loss t A^T x
        return float(loss @ ftrl_strategy(t * loss, eta, reg)) - g.value

    integral = quad(rate, 0.0, T, limit=400, epsabs=1e-10, epsrel=1e-10)[0]
    assert continuous_time_surplus(g.A, x, eta, T, reg, value=g.value) == pytest.approx(
        integral, rel=1e-6, abs=1e-8
    )


def test_conjugate_is_the_max_over_the_simplex():
    rng = np.random.default_rng(1)
    L = rng.normal(size=4)
    for reg in REGULARIZERS:
        val = regularizer_conjugate(L, 0.7, reg)
        Y = rng.dirichlet(np.ones(4), size=2000)
        from neurips26.rl.ftrl_surplus.optimizers import _h

        assert np.all(-0.7 * Y @ L - _h(Y, reg) <= val + 1e-12)


def test_optimal_control_strategy():
    # max-min's continuous-time Hedge surplus tends to the closed form ln(1 + N/k) / eta
    g = planted_game(2, np.full(4, 0.3), random_state=0)
    assert continuous_time_surplus(g.A, g.x_star, 0.03, 1e5, value=g.value) == pytest.approx(
        hedge_sweeping_surplus(4, 2, 0.03), rel=1e-6
    )
    # on a 2-row game the plan is the best point of a fine grid over x = (p, 1 - p)
    A = np.array([[1.0, -0.5, 0.2], [-0.8, 0.6, 0.1]])
    v = maxmin_strategy(A)[1]
    X = np.stack([np.linspace(0, 1, 2001), 1 - np.linspace(0, 1, 2001)], axis=1)
    for reg in ("entropy", "euclidean", "tsallis"):
        for T in (5.0, 50.0):
            x, s = optimal_control_strategy(A, 0.3, T, reg)
            zero = regularizer_conjugate(np.zeros(3), 0.3, reg)
            grid = (zero - regularizer_conjugate(T * X @ A, 0.3, reg)) / 0.3 - T * v  # batched over the grid
            assert s >= grid.max() - 1e-9 and s <= grid.max() + 1e-4
            assert s >= continuous_time_surplus(A, maxmin_strategy(A)[0], 0.3, T, reg, value=v) - 1e-12
    # rock-paper-scissors: columns of A^T x always average to 0, so by Jensen nothing beats uniform play
    x, s = optimal_control_strategy(rock_paper_scissors(), 0.1, 1000)
    np.testing.assert_allclose(x, np.full(3, 1 / 3), atol=1e-6)
    assert abs(s) < 1e-8
    # played in discrete time it is a fixed strategy
    tr = repeated_play(g.A, "optimal_control", 0.1, 300, value=g.value)
    x_oc = optimal_control_strategy(g.A, 0.1, 300)[0]
    np.testing.assert_allclose(tr.x, np.tile(x_oc, (300, 1)))
    with pytest.raises(ValueError, match="T"):
        optimal_control_strategy(A, 0.1, 0.0)
    with pytest.raises(ValueError, match="eta"):
        optimal_control_strategy(A, 0.0, 10.0)
    with pytest.raises(ValueError, match="regularizer"):
        optimal_control_strategy(A, 0.1, 10.0, "l1")
    with pytest.raises(ValueError, match="x"):
        continuous_time_surplus(A, np.ones(3) / 3, 0.1, 10.0)
    with pytest.raises(ValueError, match="T"):
        continuous_time_surplus(A, np.ones(2) / 2, 0.1, np.inf)


@settings(max_examples=10, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    reg=st.sampled_from(["entropy", "euclidean"]),
    T=st.sampled_from([3.0, 30.0, 3000.0]),
)
def test_optimal_control_never_below_maxmin(seed, reg, T):
    A = np.random.default_rng(seed).normal(size=(3, 4))
    x, s = optimal_control_strategy(A, 0.1, T, reg)
    assert x.min() >= 0 and abs(x.sum() - 1) < 1e-12
    assert s >= continuous_time_surplus(A, maxmin_strategy(A)[0], 0.1, T, reg) - 1e-9


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("ftrl-surplus", tmp_path)
