"""NBFFG: backward filter vs closed forms, guide exactness for linear dynamics, grid reference, unbiased path
subsampling, tree validation and bad input."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.harness.testing import assert_quick_verdict
from neurips26.inference.nbffg import (
    NBFFG,
    as_tree,
    backward_filter,
    balanced_binary_tree,
    bootstrap_importance_sampling,
    dense_gaussian_tree_posterior,
    gaussian_tree_smoother,
    grid_posterior_1d,
    importance_summary,
    root_log_evidence,
    simulate_tree,
    subdivide_edges,
)
from neurips26.inference.nbffg.baselines import MeanFieldGaussianVI, bffg_mcmc
from neurips26.inference.nbffg.tree import diffusion_grid


def f_lin(x):
    return 0.9 * x + 0.1


def f_sin(x):
    return x + 0.8 * torch.sin(x)


UNBALANCED = np.array([-1, 0, 0, 1, 1, 3, 3, 2, 7, 7, 9, 9, 4])  # leaves at depths 2, 3, 4


@pytest.fixture(scope="module")
def linear_fit():
    parent = balanced_binary_tree(4)
    _, y = simulate_tree(parent, f_lin, 0.3, 0.0, 1.0, 0.01, 1, 0)
    model = NBFFG(f_lin, 0.3, 0.0, 1.0, 0.01, n_steps=60, batch_size=32, random_state=0).fit(parent, y[0])
    return parent, y[0], model


@pytest.fixture(scope="module")
def nonlinear_fit():
    _, y = simulate_tree(UNBALANCED, f_sin, 0.3, 0.0, 1.0, 0.01, 1, 1)
    model = NBFFG(f_sin, 0.3, 0.0, 1.0, 0.01, n_steps=80, batch_size=32, random_state=1).fit(UNBALANCED, y[0])
    return y[0], model


# ---------------------------------------------------------------------------------------------- trees
def test_tree_structure_and_inclusion_probabilities():
    t = as_tree(UNBALANCED)
    assert t.root == 0 and t.max_depth == 4
    np.testing.assert_array_equal(t.leaves, [5, 6, 8, 10, 11, 12])
    assert t.leaf_count[0] == 6 and t.leaf_count[1] == 3 and t.leaf_count[2] == 3
    # pi over the children of any node sums to the parent's pi
    pi = t.inclusion_probability()
    for v in range(t.n_nodes):
        kids = np.flatnonzero(t.parent == v)
        if kids.size:
            assert pi[kids].sum() == pytest.approx(pi[v])
    for row, leaf in zip(t.paths, t.leaves, strict=True):
        path = row[row >= 0]
        assert path[0] == 0 and path[-1] == leaf
        assert np.all(t.parent[path[1:]] == path[:-1])


@pytest.mark.parametrize(
    ("parent", "match"),
    [
        ([-1, 0, 3, 2], "cycle"),  # 2 <-> 3
        ([-1, 0, 2], "self-loop"),
        ([-1, -1, 0], "exactly one root"),
        ([0, 0, 1], "exactly one root"),
        ([-1, 0, 5], r"\[-1, 2\]"),
        ([-1], "at least 2"),
        ([[-1, 0]], "1-D"),
        ([-1, 0.5], "integer"),
    ],
)
def test_bad_trees_raise(parent, match):
    with pytest.raises(ValueError, match=match):
        as_tree(parent)


def test_subdivide_edges_and_bad_input():
    p, node_map = subdivide_edges(balanced_binary_tree(2), 4)
    t = as_tree(p)
    assert t.n_nodes == 1 + 6 * 4 and t.max_depth == 8
    np.testing.assert_array_equal(t.leaves, node_map[as_tree(balanced_binary_tree(2)).leaves])
    with pytest.raises(ValueError, match="n_steps"):
        subdivide_edges(balanced_binary_tree(2), 0)
    with pytest.raises(ValueError, match="depth"):
        balanced_binary_tree(0)


# ------------------------------------------------------------------------------------- backward filter
def test_linear_smoother_matches_dense_conditioning_2d():
    rng = np.random.default_rng(0)
    t = as_tree(UNBALANCED)
    y = rng.normal(size=(t.n_leaves, 2))
    Phi = np.array([[0.9, 0.2], [-0.1, 1.1]])
    beta = np.array([0.1, -0.2])
    Q = np.array([[0.3, 0.05], [0.05, 0.2]])
    R = np.array([[0.02, 0.0], [0.0, 0.05]])
    a = gaussian_tree_smoother(t, y, R, Phi, beta, Q, [0.5, 0.0], np.eye(2))
    b = dense_gaussian_tree_posterior(t, y, R, Phi, beta, Q, [0.5, 0.0], np.eye(2))
    np.testing.assert_allclose(a[0], b[0], atol=1e-10)
    np.testing.assert_allclose(a[1], b[1], atol=1e-10)
    assert a[2] == pytest.approx(b[2], abs=1e-9)


def test_backward_filter_leaf_and_one_edge_closed_form():
    # root -> one leaf: h~_root(x) = N(y; phi x + beta, q + r) exactly
    y, phi, beta, q, r = 0.7, 1.3, -0.2, 0.4, 0.05
    msg = backward_filter([-1, 0], np.array([[np.nan], [y]]), r, [[phi]], [beta], q)
    assert msg.H[1, 0, 0] == pytest.approx(1 / r) and msg.F[1, 0] == pytest.approx(y / r)
    s = q + r
    assert msg.H[0, 0, 0] == pytest.approx(phi**2 / s)
    assert msg.F[0, 0] == pytest.approx(phi * (y - beta) / s)
    x = 0.3
    log_h = msg.c[0] - 0.5 * msg.H[0, 0, 0] * x**2 + msg.F[0, 0] * x
    assert log_h == pytest.approx(-0.5 * ((y - phi * x - beta) ** 2 / s + np.log(2 * np.pi * s)), abs=1e-12)
    # evidence against N(y; phi m0 + beta, phi^2 v0 + q + r)
    ev = root_log_evidence(msg, 0, np.array([0.4]), np.array([[2.0]]))
    var = phi**2 * 2.0 + s
    assert ev == pytest.approx(
        -0.5 * ((y - phi * 0.4 - beta) ** 2 / var + np.log(2 * np.pi * var)), abs=1e-12
    )


def test_backward_filter_observed_internal_node_and_bad_input():
    t = as_tree(balanced_binary_tree(2))
    rng = np.random.default_rng(3)
    y = np.full((t.n_nodes, 1), np.nan)
    y[t.leaves] = rng.normal(size=(t.n_leaves, 1))
    y[1] = 0.4  # an observed internal node
    a = gaussian_tree_smoother(t, y, 0.1, [[1.0]], [0.0], 0.3, 0.0, 1.0)
    b = dense_gaussian_tree_posterior(t, y, 0.1, [[1.0]], [0.0], 0.3, 0.0, 1.0)
    np.testing.assert_allclose(a[0], b[0], atol=1e-12)
    y_bad = y.copy()
    y_bad[t.leaves[0]] = np.nan
    with pytest.raises(ValueError, match="leaves without observations"):
        backward_filter(t, y_bad, 0.1, [[1.0]], [0.0], 0.3)
    with pytest.raises(ValueError, match="obs_cov"):
        backward_filter(t, y, -1.0, [[1.0]], [0.0], 0.3)
    with pytest.raises(ValueError, match="proxy_cov"):
        backward_filter(t, y, 0.1, [[1.0]], [0.0], [[0.0]])
    with pytest.raises(ValueError, match="Phi"):
        backward_filter(t, y, 0.1, np.ones((2, 2)), [0.0], 0.3)
    with pytest.raises(ValueError, match="jitter"):
        backward_filter(t, y, 0.1, [[1.0]], [0.0], 0.3, jitter=-1.0)
    with pytest.raises(ValueError, match="y must have one row"):
        backward_filter(t, y[:3], 0.1, [[1.0]], [0.0], 0.3)
    with pytest.raises(ValueError, match="inf"):
        backward_filter(t, np.where(np.isnan(y), np.nan, np.inf), 0.1, [[1.0]], [0.0], 0.3)


@settings(max_examples=15, deadline=None)
@given(
    phi=st.floats(-1.5, 1.5).filter(lambda v: abs(v) > 0.05),
    beta=st.floats(-1.0, 1.0),
    q=st.floats(0.05, 2.0),
    r=st.floats(0.01, 1.0),
    seed=st.integers(0, 2**16),
)
def test_property_filter_evidence_equals_dense(phi, beta, q, r, seed):
    y = np.random.default_rng(seed).normal(size=(6, 1)) * 2
    a = gaussian_tree_smoother(UNBALANCED, y, r, [[phi]], [beta], q, 0.0, 1.0)
    b = dense_gaussian_tree_posterior(UNBALANCED, y, r, [[phi]], [beta], q, 0.0, 1.0)
    assert a[2] == pytest.approx(b[2], abs=1e-8)
    np.testing.assert_allclose(a[0], b[0], atol=1e-8)


# ---------------------------------------------------------------------------------------------- grid
def test_grid_is_exact_for_linear_and_matches_brute_force_for_nonlinear():
    t = as_tree(balanced_binary_tree(3))
    y = np.random.default_rng(1).normal(size=(t.n_leaves, 1)) * 2
    g = grid_posterior_1d(t, y, lambda x: 1.1 * x + 0.2, 0.3, 0.0, 1.0, 0.01)
    m, c, ev = dense_gaussian_tree_posterior(t, y, 0.01, [[1.1]], [0.2], 0.3, 0.0, 1.0)
    np.testing.assert_allclose(g.means, m[:, 0], atol=1e-8)
    np.testing.assert_allclose(g.variances, c[:, 0, 0], atol=1e-8)
    assert g.log_evidence == pytest.approx(ev, abs=1e-8)
    # nonlinear, root -> child -> 2 leaves: brute-force 2-D quadrature on a fine grid
    parent = [-1, 0, 1, 1]
    yy = np.array([1.2, 0.9])
    fn = lambda x: x + 0.8 * np.sin(x)  # noqa: E731
    g = grid_posterior_1d(parent, yy, fn, 0.3, 0.0, 1.0, 0.01, grid=400)
    xs = np.linspace(-7, 7, 1401)
    dx = xs[1] - xs[0]
    ln = lambda x, m, v: -0.5 * ((x - m) ** 2 / v + np.log(2 * np.pi * v))  # noqa: E731
    lj = ln(xs[:, None], 0, 1) + ln(xs[None, :], fn(xs)[:, None], 0.3)
    lj += ln(yy[0], fn(xs)[None, :], 0.31) + ln(yy[1], fn(xs)[None, :], 0.31)
    w = np.exp(lj - lj.max())
    assert g.log_evidence == pytest.approx(lj.max() + np.log(w.sum() * dx * dx), abs=1e-6)
    assert g.means[1] == pytest.approx((w.sum(0) @ xs) / w.sum(), abs=1e-6)
    with pytest.raises(ValueError, match="grid"):
        grid_posterior_1d(parent, yy, fn, 0.3, 0.0, 1.0, 0.01, grid=4)
    with pytest.raises(ValueError, match="obs_var"):
        grid_posterior_1d(parent, yy, fn, 0.3, 0.0, 1.0, 0.0)


# ----------------------------------------------------------------------------------------------- NBFFG
def test_linear_guide_is_exact_posterior(linear_fit):
    parent, y, model = linear_fit
    _, log_w = model.sample(500, residual=False, random_state=1)
    assert np.max(np.abs(log_w - model.log_evidence_proxy_)) < 1e-10
    means, covs = model.guided_moments()
    m, c, ev = dense_gaussian_tree_posterior(parent, y, 0.01, [[0.9]], [0.1], 0.3, 0.0, 1.0)
    np.testing.assert_allclose(means, m, atol=1e-8)
    np.testing.assert_allclose(covs, c, atol=1e-8)
    assert model.log_evidence_proxy_ == pytest.approx(ev, abs=1e-8)
    assert model.residual_magnitude(256) < 1e-3  # STL gradient vanishes at the exact posterior
    # Monte Carlo moments of the guide agree with the closed form
    x, _ = model.sample(4000, residual=False, random_state=2)
    assert np.max(np.abs(x.mean(0) - m)) < 5 * np.sqrt(c.max() / 4000)


def test_nonlinear_guide_weights_match_definition(nonlinear_fit):
    """log w = log p(x, y) - log q°(x): recompute both sides by brute force on the unbalanced tree."""
    y_leaf, model = nonlinear_fit
    t = model.tree_
    x, log_w = model.sample(64, residual=False, random_state=3)
    x = x[..., 0]
    ln = lambda v, m, s2: -0.5 * ((v - m) ** 2 / s2 + np.log(2 * np.pi * s2))  # noqa: E731
    fx = x + 0.8 * np.sin(x)
    child = np.arange(1, t.n_nodes)
    log_p = ln(x[:, 0], 0, 1) + ln(x[:, child], fx[:, t.parent[child]], 0.3).sum(1)
    log_p += ln(y_leaf[None, :, 0], x[:, t.leaves], 0.01).sum(1)
    H, F = model.messages_.H[:, 0, 0], model.messages_.F[:, 0]
    J = H[child] + 1 / 0.3
    mu = (F[child] + fx[:, t.parent[child]] / 0.3) / J
    log_q = ln(x[:, 0], (F[0]) / (H[0] + 1), 1 / (H[0] + 1)) + ln(x[:, child], mu, 1 / J).sum(1)
    np.testing.assert_allclose(log_w, log_p - log_q, atol=1e-9)


def test_path_subsampling_is_unbiased_on_unbalanced_tree(nonlinear_fit):
    _, model = nonlinear_fit
    t = model.tree_
    noise = np.random.default_rng(5).standard_normal((8, t.n_nodes, 1))
    full = model.loss_estimate(noise)
    per_leaf = np.stack([model.loss_estimate(noise, np.full(8, k)) for k in range(t.n_leaves)])
    np.testing.assert_allclose(per_leaf.mean(0), full, atol=1e-10)
    # the estimate is not trivially the full loss: it varies across leaves
    assert np.ptp(per_leaf, axis=0).min() > 1e-3
    # and the full-tree loss equals -log_w of the sample drawn with the same noise
    with torch.no_grad():
        loss, xs = model._forward(
            8, leaves=None, noise=torch.as_tensor(noise), use_residual=True, stl=False, keep_states=True
        )
    np.testing.assert_allclose(loss.numpy(), full, atol=1e-12)


def test_path_subsampling_unbiased_with_wrong_weights_would_fail(nonlinear_fit):
    """Sanity of the gate: uniform (un-weighted) path sums are biased on the unbalanced tree."""
    _, model = nonlinear_fit
    t = model.tree_
    noise = np.random.default_rng(6).standard_normal((4, t.n_nodes, 1))
    saved = model._table.clone()
    a, b, _ = model._slices["ht"]
    model._table[:, a] = torch.where(model._table[:, a] > 0, torch.ones(()), model._table[:, a]) * t.n_leaves
    try:
        per_leaf = np.stack([model.loss_estimate(noise, np.full(4, k)) for k in range(t.n_leaves)])
    finally:
        model._table = saved
    assert np.max(np.abs(per_leaf.mean(0) - model.loss_estimate(noise))) > 1e-3


@pytest.mark.slow
def test_training_reduces_loss_and_improves_ess():
    parent = balanced_binary_tree(3)
    _, y = simulate_tree(parent, f_sin, 0.3, 0.0, 1.0, 0.01, 1, 2)
    model = NBFFG(
        f_sin, 0.3, 0.0, 1.0, 0.01, n_steps=300, batch_size=64, learning_rate=1e-2, random_state=2
    ).fit(parent, y[0])
    h = model.loss_history_
    assert h[-50:].mean() < h[:50].mean()
    guide = model.importance_estimate(2000, residual=False, random_state=3)
    ours = model.importance_estimate(2000, random_state=3)
    assert ours["ess"] > guide["ess"]


def test_fit_is_deterministic_given_random_state():
    parent = balanced_binary_tree(2)
    _, y = simulate_tree(parent, f_sin, 0.3, 0.0, 1.0, 0.01, 1, 4)
    kw = dict(n_steps=20, batch_size=16, random_state=7)
    a = NBFFG(f_sin, 0.3, **kw).fit(parent, y[0])
    b = NBFFG(f_sin, 0.3, **kw).fit(parent, y[0])
    np.testing.assert_array_equal(a.loss_history_, b.loss_history_)
    np.testing.assert_array_equal(a.sample(5, random_state=1)[1], b.sample(5, random_state=1)[1])
    first = a.loss_history_.copy()
    a.train(5)  # continues training; the history accumulates
    assert a.loss_history_.shape == (25,)
    np.testing.assert_array_equal(a.loss_history_[:20], first)


def test_a_non_finite_training_step_is_skipped_not_applied():
    parent = balanced_binary_tree(2)
    _, y = simulate_tree(parent, f_sin, 0.3, 0.0, 1.0, 0.01, 1, 4)
    model = NBFFG(f_sin, 0.3, n_steps=5, batch_size=16, random_state=7).fit(parent, y[0])
    assert model.n_skipped_steps_ == 0
    forward, calls = model._forward, {"n": 0}

    def overflowing(*args, **kwargs):  # the second training batch overflows, as a cubic drift's tail can
        loss, states = forward(*args, **kwargs)
        calls["n"] += 1
        return (loss * float("nan") if calls["n"] == 2 else loss), states

    model._forward = overflowing
    with pytest.warns(RuntimeWarning, match="1 of 5 steps"):
        model.train(5)
    assert model.n_skipped_steps_ == 1 and np.isnan(model.loss_history_[-4])
    assert all(torch.isfinite(p).all() for p in model.residual_.parameters())
    assert np.isfinite(model.sample(50, random_state=0)[1]).all()


def test_shift_only_flow_has_no_log_scale():
    parent = balanced_binary_tree(2)
    _, y = simulate_tree(parent, f_sin, 0.3, 0.0, 1.0, 0.01, 1, 4)
    m = NBFFG(f_sin, 0.3, flow="shift", n_steps=30, batch_size=16, random_state=0).fit(parent, y[0])
    s, t = m.residual_(torch.zeros(3, 4, dtype=torch.float64))
    assert torch.all(s == 0) and torch.any(t != 0)


def test_bootstrap_and_importance_summary():
    parent = balanced_binary_tree(2)
    x0, y = simulate_tree(parent, f_lin, 0.3, 0.0, 1.0, 0.5, 1, 0)
    x, log_w = bootstrap_importance_sampling(parent, y[0], f_lin, 0.3, 0.0, 1.0, 0.5, 20000, 1)
    s = importance_summary(x, log_w)
    m, _, ev = dense_gaussian_tree_posterior(parent, y[0], 0.5, [[0.9]], [0.1], 0.3, 0.0, 1.0)
    assert s["log_evidence"] == pytest.approx(ev, abs=0.05)
    np.testing.assert_allclose(s["means"], m, atol=0.05)
    assert 0 < s["ess"] <= 1
    assert importance_summary(x[:3], np.zeros(3))["ess"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="log_w"):
        importance_summary(x[:3], np.zeros(2))
    with pytest.raises(ValueError, match="log_w"):
        importance_summary(x[:2], np.array([0.0, np.nan]))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(n_steps=-1), "n_steps"),
        (dict(batch_size=0), "batch_size"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(hidden_size=0), "hidden_size"),
        (dict(estimator="tree"), "estimator"),
        (dict(flow="spline"), "flow"),
        (dict(proxy="kalman"), "proxy"),
        (dict(proxy=([[1.0, 0.0]], [0.0])), "proxy"),
        (dict(jitter=-1e-3), "jitter"),
        (dict(random_state=-1), "random_state"),
        (dict(transition_cov=-0.3), "transition_cov"),
        (dict(transition_cov=np.full((5, 1, 1), 0.3)), "transition_cov"),
        (dict(node_dependent="yes"), "node_dependent"),
        (dict(obs_cov=[[0.1, 0.2], [0.0, 0.1]]), "obs_cov"),
        (dict(root_mean=np.nan), "root_mean"),
    ],
)
def test_nbffg_bad_parameters(kwargs, match):
    parent = balanced_binary_tree(2)
    y = np.zeros((4, 1))
    params = dict(f=f_lin, transition_cov=0.3, n_steps=0)
    params.update(kwargs)
    with pytest.raises(ValueError, match=match):
        NBFFG(**params).fit(parent, y)


def test_nbffg_bad_data_and_calls():
    parent = balanced_binary_tree(2)
    with pytest.raises(ValueError, match="cycle"):
        NBFFG(f_lin, 0.3, n_steps=0).fit([-1, 0, 3, 2], np.zeros((2, 1)))
    y = np.full((7, 1), np.nan)
    y[3:6] = 0.0  # leaf 6 unobserved
    with pytest.raises(ValueError, match="leaves without observations"):
        NBFFG(f_lin, 0.3, n_steps=0).fit(parent, y)
    with pytest.raises(ValueError, match="f must map"):
        NBFFG(lambda x: x[:, :1].repeat(1, 2), 0.3, n_steps=0).fit(parent, np.zeros((4, 1)))
    with pytest.raises(TypeError, match="callable"):
        NBFFG(3.0, 0.3, n_steps=0).fit(parent, np.zeros((4, 1)))
    with pytest.raises(RuntimeError, match="not fitted"):
        NBFFG(f_lin, 0.3).sample(3)
    m = NBFFG(f_sin, 0.3, n_steps=0).fit(parent, np.zeros((4, 1)))
    with pytest.raises(ValueError, match="affine"):
        m.guided_moments()
    with pytest.raises(ValueError, match="noise"):
        m.loss_estimate(np.zeros((2, 5, 1)))
    with pytest.raises(ValueError, match="leaves"):
        m.loss_estimate(np.zeros((2, 7, 1)), np.array([0, 4]))
    with pytest.raises(ValueError, match="n_samples"):
        m.sample(0)
    with pytest.raises(ValueError, match="n_steps"):
        m.train(0)
    with pytest.raises(ValueError, match="n_samples"):
        simulate_tree(parent, f_lin, 0.3, 0.0, 1.0, 0.01, 0)


# ------------------------------------------------------------------- per-edge dynamics and diffusion grids
def _dense_joint(parent, Phi, beta, Q, m0, P0):
    """Prior mean and covariance of all states from x = B x + a + e (per-node Phi, beta, Q), by brute force."""
    t = as_tree(parent)
    n, d = t.n_nodes, Phi.shape[-1]
    B, a, D = np.zeros((n * d, n * d)), np.zeros(n * d), np.zeros((n * d, n * d))
    for c in range(n):
        s = slice(c * d, c * d + d)
        if t.parent[c] < 0:
            a[s], D[s, s] = m0, P0
        else:
            p = t.parent[c]
            B[s, p * d : p * d + d], a[s], D[s, s] = Phi[c], beta[c], Q[c]
    M = np.linalg.inv(np.eye(n * d) - B)
    return M @ a, M @ D @ M.T


def test_node_dependent_linear_dynamics_make_the_guide_exact():
    """Per-edge linear f(x, node) and per-edge Q: the per-edge least-squares proxy is exact, the guide's log
    weights are constant and equal the dense Gaussian log evidence."""
    parent = UNBALANCED
    n = len(parent)
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.5, 1.2, n), rng.normal(0, 0.3, n)
    q = rng.uniform(0.1, 0.5, n)
    at, bt = torch.as_tensor(a), torch.as_tensor(b)

    def f(x, node):
        return at[node][:, None] * x + bt[node][:, None]

    Q = q[:, None, None]
    _, y = simulate_tree(parent, f, Q, 0.0, 1.0, 0.01, 1, 3, node_dependent=True)
    model = NBFFG(f, Q, 0.0, 1.0, 0.01, node_dependent=True, n_steps=0, random_state=0).fit(parent, y[0])
    child = np.arange(1, n)
    np.testing.assert_allclose(model.Phi_[child, 0, 0], a[child], atol=1e-9)
    np.testing.assert_allclose(model.beta_[child, 0], b[child], atol=1e-9)
    _, log_w = model.sample(200, residual=False, random_state=1)
    mu, S = _dense_joint(parent, a[:, None, None], b[:, None], Q, np.zeros(1), np.eye(1))
    t = as_tree(parent)
    Syy = S[np.ix_(t.leaves, t.leaves)] + 0.01 * np.eye(t.n_leaves)
    r = y[0][:, 0] - mu[t.leaves]
    ev = -0.5 * (r @ np.linalg.solve(Syy, r) + np.linalg.slogdet(Syy)[1] + t.n_leaves * np.log(2 * np.pi))
    np.testing.assert_allclose(log_w, ev, atol=1e-9)
    with pytest.raises(ValueError, match="node_dependent"):
        model.guided_moments()


def test_per_node_covariance_equal_to_a_shared_one_changes_nothing():
    parent = balanced_binary_tree(3)
    _, y = simulate_tree(parent, f_sin, 0.3, 0.0, 1.0, 0.01, 1, 5)
    kw = dict(n_steps=10, batch_size=8, random_state=3)
    shared = NBFFG(f_sin, 0.3, **kw).fit(parent, y[0])
    per = NBFFG(f_sin, np.full((15, 1, 1), 0.3), **kw).fit(parent, y[0])
    np.testing.assert_allclose(per.loss_history_, shared.loss_history_, atol=1e-12)
    np.testing.assert_allclose(
        per.sample(4, random_state=2)[1], shared.sample(4, random_state=2)[1], atol=1e-12
    )


def test_diffusion_grid_time_change():
    base = balanced_binary_tree(2)
    for tc in (True, False):
        parent, node_map, dt = diffusion_grid(base, 10, 2.0, time_change=tc)
        ref_parent, ref_map = subdivide_edges(base, 10)
        np.testing.assert_array_equal(parent, ref_parent)
        np.testing.assert_array_equal(node_map, ref_map)
        assert dt[0] == 0
        t = as_tree(parent)
        for c in node_map[1:]:  # walking up from each original node sums one edge
            total, node, steps = 0.0, c, []
            for _ in range(10):
                total += dt[node]
                steps.append(dt[node])
                node = t.parent[node]
            assert total == pytest.approx(2.0)
            if tc:  # steps shrink towards the child end: t = T u (2 - u)
                assert np.all(np.diff(steps) > 0) and steps[0] == pytest.approx(2.0 / 100)
            else:
                np.testing.assert_allclose(steps, 0.2)
    with pytest.raises(ValueError, match="n_steps"):
        diffusion_grid(base, 0)
    with pytest.raises(ValueError, match="branch_length"):
        diffusion_grid(base, 5, -1.0)


# ------------------------------------------------------------------------------- the two new baselines
def test_transform_matches_loss_estimate_and_sampling(nonlinear_fit):
    _, model = nonlinear_fit
    noise = np.random.default_rng(7).standard_normal((6, model.tree_.n_nodes, 1))
    x, log_w = model.transform(noise)
    np.testing.assert_allclose(-log_w, model.loss_estimate(noise), atol=1e-12)
    assert x.shape == (6, model.tree_.n_nodes, 1)
    with pytest.raises(ValueError, match="noise"):
        model.transform(np.zeros((2, 3, 1)))


@pytest.mark.slow
def test_mean_field_vi_on_a_gaussian_tree_recovers_the_exact_means():
    """Reverse-KL mean-field Gaussian VI on a Gaussian target: exact means, variances 1 / diag(precision)."""
    parent = balanced_binary_tree(2)
    _, y = simulate_tree(parent, f_lin, 0.3, 0.0, 1.0, 0.05, 1, 2)
    vi = MeanFieldGaussianVI(
        f_lin, 0.3, 0.0, 1.0, 0.05, n_steps=3000, batch_size=256, learning_rate=2e-2, random_state=0
    )
    vi.fit(parent, y[0])
    m, _, ev = dense_gaussian_tree_posterior(parent, y[0], 0.05, [[0.9]], [0.1], 0.3, 0.0, 1.0)
    n = len(parent)
    mu, S = _dense_joint(
        parent, np.full((n, 1, 1), 0.9), np.full((n, 1), 0.1), np.full((n, 1, 1), 0.3), np.zeros(1), np.eye(1)
    )
    t = as_tree(parent)
    P = np.linalg.inv(S)
    P[t.leaves, t.leaves] += 1 / 0.05
    np.testing.assert_allclose(vi.mean_.detach().numpy()[:, 0], m[:, 0], atol=0.02)
    np.testing.assert_allclose(np.exp(2 * vi.log_scale_.detach().numpy()[:, 0]), 1 / np.diag(P), rtol=0.1)
    # log_joint is the model's joint density (brute force at the posterior mean)
    x = torch.as_tensor(m[None])
    r = y[0][:, 0] - m[t.leaves, 0]
    d = m[:, 0] - mu
    want = -0.5 * (d @ np.linalg.solve(S, d) + np.linalg.slogdet(S)[1] + n * np.log(2 * np.pi))
    want += -0.5 * (r @ r / 0.05 + t.n_leaves * np.log(2 * np.pi * 0.05))
    assert float(vi.log_joint(x)[0]) == pytest.approx(want, abs=1e-9)
    s = importance_summary(*vi.sample(4000, random_state=1))
    assert s["log_evidence"] == pytest.approx(ev, abs=0.05)
    with pytest.raises(ValueError, match="learning_rate"):
        MeanFieldGaussianVI(f_lin, 0.3, learning_rate=0.0).fit(parent, y[0])
    with pytest.raises(RuntimeError, match="not fitted"):
        MeanFieldGaussianVI(f_lin, 0.3).sample(3)


def test_bffg_mcmc_accepts_every_move_under_an_exact_guide(linear_fit):
    parent, y, model = linear_fit
    out = bffg_mcmc(model, n_chains=10, n_iter=200, random_state=0)
    assert out["acceptance"] == 1.0  # constant weights: every pCN move is accepted
    m, c, _ = dense_gaussian_tree_posterior(parent, y, 0.01, [[0.9]], [0.1], 0.3, 0.0, 1.0)
    assert np.max(np.abs(out["means"] - m)) < 0.1
    with pytest.raises(ValueError, match="rho"):
        bffg_mcmc(model, rho=1.0)
    with pytest.raises(ValueError, match="fitted NBFFG"):
        bffg_mcmc(NBFFG(f_lin, 0.3))
    with pytest.raises(ValueError, match="n_chains"):
        bffg_mcmc(model, n_chains=0)


def test_bffg_mcmc_targets_the_posterior_on_a_nonlinear_tree():
    """BFFG-MCMC and the grid posterior agree on the internal-node means (a long run, the weights vary)."""
    parent = balanced_binary_tree(3)
    _, y = simulate_tree(parent, f_sin, 0.3, 0.0, 1.0, 0.01, 1, 8)
    model = NBFFG(f_sin, 0.3, 0.0, 1.0, 0.01, n_steps=0, random_state=0).fit(parent, y[0])
    out = bffg_mcmc(model, n_chains=40, n_iter=400, random_state=1)
    truth = grid_posterior_1d(parent, y[0], lambda v: v + 0.8 * np.sin(v), 0.3, 0.0, 1.0, 0.01)
    inner = ~as_tree(parent).is_leaf
    assert 0.05 < out["acceptance"] < 0.9
    assert np.max(np.abs(out["means"][inner, 0] - truth.means[inner])) < 0.1


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("nbffg", tmp_path)
