"""Tests for Manifold Random Features (arXiv 2602.03797): GRFs, the MRF field, ground-truth heat kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import expm

from neurips26.harness.testing import assert_quick_verdict
from neurips26.kernels import GraphRandomFeatures, ManifoldRandomFeatures
from neurips26.kernels.manifold_random_features import (
    farthest_point_sampling,
    heat_time_to_sigma2,
    intrinsic_dimension,
    knn_gaussian_graph,
    modulation_function,
)
from neurips26.kernels.manifold_random_features import manifolds as M
from neurips26.kernels.manifold_random_features.graph_random_features import power_series_coefficients


def _random_graph(n: int, p_edge: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    W = np.triu(rng.random((n, n)) * (rng.random((n, n)) < p_edge), 1)
    W = W + W.T
    for i in range(n):  # a ring keeps it connected
        j = (i + 1) % n
        W[i, j] = W[j, i] = max(W[i, j], 0.5)
    return W


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


# --- modulation functions: f * f = alpha ----------------------------------------------------------------
@pytest.mark.parametrize("sigma2", [0.5, 3.0, 12.0])
def test_modulation_is_deconvolution_square_root(sigma2):
    f = modulation_function("diffusion", sigma2, max_length=40)
    alpha = power_series_coefficients(f)[:41]
    k = np.arange(41)
    expected = np.exp(-sigma2 + k * np.log(sigma2) - np.array([math.lgamma(x + 1) for x in k]))
    np.testing.assert_allclose(alpha, expected, rtol=1e-10, atol=1e-300)
    f = modulation_function("regularized_laplacian", sigma2, max_length=40)
    beta = sigma2 / (1 + sigma2)
    np.testing.assert_allclose(power_series_coefficients(f)[:41], beta**k / (1 + sigma2), rtol=1e-10)


def test_modulation_bad_input():
    with pytest.raises(ValueError, match="kernel"):
        modulation_function("gauss", 1.0)
    with pytest.raises(ValueError, match="sigma2"):
        modulation_function("diffusion", -1.0)
    with pytest.raises(ValueError, match="max_length"):
        modulation_function("diffusion", 1.0, max_length=-1)


# --- GRF: exactness of the target and unbiasedness of the estimator --------------------------------------
def test_exact_kernel_matches_matrix_exponential_and_inverse():
    W = _random_graph(20, 0.3, 0)
    d = W.sum(1)
    L = np.eye(20) - W / np.sqrt(np.outer(d, d))
    g = GraphRandomFeatures(n_walks=2, sigma2=2.5, random_state=0).fit(W)
    np.testing.assert_allclose(g.exact_kernel(), expm(-2.5 * L), atol=1e-10)
    g = GraphRandomFeatures(n_walks=2, sigma2=2.5, kernel="regularized_laplacian", random_state=0).fit(W)
    np.testing.assert_allclose(g.exact_kernel(), np.linalg.inv(np.eye(20) + 2.5 * L), atol=1e-9)
    # with a hard walk-length cap, exact_kernel is the truncated series f * f
    g = GraphRandomFeatures(n_walks=2, sigma2=2.5, max_walk_length=3, random_state=0).fit(W)
    A = g.adjacency_normalized_.toarray()
    alpha = power_series_coefficients(g.modulation_)
    series = sum(a * np.linalg.matrix_power(A, k) for k, a in enumerate(alpha))
    np.testing.assert_allclose(g.exact_kernel(), series, atol=1e-12)


@pytest.mark.parametrize("sampling", ["uniform", "weighted"])
@pytest.mark.parametrize("kernel", ["diffusion", "regularized_laplacian"])
def test_grf_unbiased_on_20_node_graph(sampling, kernel):
    """E[phi(i)] = sum_l f(l) A^l e_i exactly; E[phi(i).phi(j)] = K_ij off the diagonal (digest pitfall)."""
    W = _random_graph(20, 0.3, 1)
    g = GraphRandomFeatures(
        n_walks=20000, p_halt=0.3, sigma2=1.5, kernel=kernel, neighbor_sampling=sampling, random_state=3
    ).fit(W)
    A = g.adjacency_normalized_.toarray()
    mean_phi = sum(c * np.linalg.matrix_power(A, k) for k, c in enumerate(g.modulation_))
    assert _rel(g.features_.toarray(), mean_phi) < 0.03
    off = ~np.eye(20, dtype=bool)
    assert _rel(g.kernel_matrix()[off], g.exact_kernel()[off]) < 0.03


def test_forgetting_the_halting_factor_would_be_detected():
    """The unbiasedness test has teeth: the same walks without the 1/(1 - p_halt) factor miss E[phi]."""
    W = _random_graph(20, 0.3, 1)
    p = 0.3
    g = GraphRandomFeatures(
        n_walks=20000, p_halt=p, sigma2=1.5, neighbor_sampling="weighted", max_walk_length=1, random_state=3
    ).fit(W)
    A = g.adjacency_normalized_.toarray()
    f = g.modulation_
    # with walks of length <= 1: phi = f0 e_i + f1 * (1/m) sum over moved walks of rowsum/(1-p) e_next
    mean_phi = f[0] * np.eye(20) + f[1] * A
    biased = f[0] * np.eye(20) + (1 - p) * (g.features_.toarray() - f[0] * np.eye(20))
    off = ~np.eye(20, dtype=bool)
    assert _rel(g.features_.toarray()[off], mean_phi[off]) < 0.03
    assert _rel(biased[off], mean_phi[off]) > 0.2


def test_grf_error_shrinks_with_more_walks():
    W = _random_graph(150, 0.05, 2)
    errs = []
    for m in (8, 64, 512):
        g = GraphRandomFeatures(n_walks=m, p_halt=0.2, sigma2=3.0, random_state=5).fit(W)
        errs.append(_rel(g.kernel_matrix(), g.exact_kernel()))
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 0.4 * errs[0]


def test_grf_nodes_subset_rows_match_the_full_estimator_in_distribution():
    W = _random_graph(30, 0.2, 4)
    nodes = np.array([3, 7, 11])
    g = GraphRandomFeatures(n_walks=20000, p_halt=0.3, sigma2=1.0, random_state=0).fit(W, nodes=nodes)
    assert g.features_.shape == (3, 30)
    full = GraphRandomFeatures(n_walks=2, p_halt=0.3, sigma2=1.0).fit(W).exact_kernel()
    np.testing.assert_allclose(g.exact_kernel(), full[np.ix_(nodes, nodes)])
    off = ~np.eye(3, dtype=bool)
    assert _rel(g.kernel_matrix()[off], full[np.ix_(nodes, nodes)][off]) < 0.05


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(2, 25),
    seed=st.integers(0, 10_000),
    p_halt=st.floats(0.05, 0.9),
    sigma2=st.floats(0.1, 20.0),
    kernel=st.sampled_from(["diffusion", "regularized_laplacian"]),
    sampling=st.sampled_from(["uniform", "weighted"]),
)
def test_grf_features_positive_and_bounded(n, seed, p_halt, sigma2, kernel, sampling):
    W = _random_graph(n, 0.4, seed)
    g = GraphRandomFeatures(
        n_walks=8, p_halt=p_halt, sigma2=sigma2, kernel=kernel, neighbor_sampling=sampling, random_state=seed
    ).fit(sp.csr_matrix(W))
    phi = g.features_.toarray()
    assert np.all(np.isfinite(phi))
    assert phi.min() >= 0.0
    assert phi.max() <= g.feature_bound_ * (1 + 1e-12)
    assert g.kernel_matrix().min() >= 0.0


@pytest.mark.parametrize("sampling", ["uniform", "weighted"])
def test_grf_isolated_nodes(sampling):
    W = np.zeros((6, 6))
    W[1, 2] = W[2, 1] = 1.0
    W[2, 3] = W[3, 2] = 0.5  # nodes 0, 4, 5 isolated (5 is the last row: an empty trailing CSR row)
    g = GraphRandomFeatures(
        n_walks=4000, p_halt=0.3, sigma2=1.0, neighbor_sampling=sampling, random_state=0
    ).fit(sp.csr_matrix(W))
    K_hat, K = g.kernel_matrix(), g.exact_kernel()
    np.testing.assert_allclose(K_hat[[0, 4, 5], [0, 4, 5]], K[[0, 4, 5], [0, 4, 5]])  # exact: no walk moves
    off = ~np.eye(6, dtype=bool)
    assert _rel(K_hat[off], K[off]) < 0.05


def test_grf_walk_deposits_are_accumulated_not_stored():
    """Peak memory stays O(nnz(Phi) + walks): storing one triplet per walk and step (N m L of them) would not."""
    import tracemalloc

    n = 60
    W = np.zeros((n, n))
    for i in range(n):  # a ring with chords: every walk keeps moving
        W[i, (i + 1) % n] = W[(i + 1) % n, i] = 1.0
        W[i, (i + 7) % n] = W[(i + 7) % n, i] = 0.5
    g = GraphRandomFeatures(n_walks=1000, p_halt=0.01, sigma2=40.0, random_state=0)
    tracemalloc.start()
    g.fit(W)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    deposits = n * 1000 * 0.6 * len(g.modulation_)  # walks x surviving steps, lower bound (p_halt = 0.01)
    assert (
        deposits * 24 > 4 * peak
    )  # storing triplets (int64, int64, float64) would need 4x the measured peak
    assert peak < 20e6
    assert g.features_.nnz <= n * n


def test_grf_deterministic_given_seed():
    W = _random_graph(40, 0.1, 0)
    a = GraphRandomFeatures(n_walks=16, random_state=7).fit(W).features_
    b = GraphRandomFeatures(n_walks=16, random_state=7).fit(W).features_
    assert (a != b).nnz == 0


def test_grf_bad_input():
    W = _random_graph(10, 0.3, 0)
    with pytest.raises(ValueError, match="n_walks"):
        GraphRandomFeatures(n_walks=0).fit(W)
    with pytest.raises(ValueError, match="p_halt"):
        GraphRandomFeatures(p_halt=1.0).fit(W)
    with pytest.raises(ValueError, match="sigma2"):
        GraphRandomFeatures(sigma2=0.0).fit(W)
    with pytest.raises(ValueError, match="kernel"):
        GraphRandomFeatures(kernel="heat").fit(W)
    with pytest.raises(ValueError, match="neighbor_sampling"):
        GraphRandomFeatures(neighbor_sampling="greedy").fit(W)
    with pytest.raises(ValueError, match="max_walk_length"):
        GraphRandomFeatures(max_walk_length=-1).fit(W)
    with pytest.raises(ValueError, match="adjacency"):
        GraphRandomFeatures().fit(W[:, :5])
    with pytest.raises(ValueError, match="adjacency"):
        GraphRandomFeatures().fit(-W)
    asym = W.copy()
    asym[0, 1] += 1.0
    with pytest.raises(ValueError, match="adjacency"):
        GraphRandomFeatures().fit(asym)
    bad = W.copy()
    bad[0, 1] = bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="adjacency"):
        GraphRandomFeatures().fit(bad)
    with pytest.raises(ValueError, match="adjacency"):
        GraphRandomFeatures().fit(np.zeros((0, 0)))
    with pytest.raises(ValueError, match="nodes"):
        GraphRandomFeatures().fit(W, nodes=[0, 10])
    with pytest.raises(ValueError, match="nodes"):
        GraphRandomFeatures().fit(W, nodes=[1, 1])
    with pytest.raises(ValueError, match="random_state"):
        GraphRandomFeatures(random_state=-3).fit(W)
    with pytest.raises(RuntimeError, match="fit"):
        GraphRandomFeatures().kernel_matrix()


# --- the MRF field -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_roll():
    rng = np.random.default_rng(0)
    uv = M.sample_rectangle(400, 10.0, rng, quasi=True)
    X = M.swiss_roll_embed(uv)
    mrf = ManifoldRandomFeatures(
        n_neighbors=10, sigma2=8.0, n_walks=32, n_anchors=48, n_steps=150, random_state=0
    ).fit(X)
    return X, uv, mrf


def test_mrf_shapes_and_positivity(small_roll):
    X, _, mrf = small_roll
    F = mrf.transform(X[:50])
    assert F.shape == (50, 48)
    assert F.min() >= 0 and F.max() <= mrf.bound_
    K = mrf.kernel_matrix(X[:50], X[:20])
    assert K.shape == (50, 20) and K.min() >= 0
    F30 = mrf.transform(X[:30])
    np.testing.assert_allclose(mrf.kernel_matrix(X[:30]), F30 @ F30.T)
    # transform is row-wise up to round-off: float32 features in [0, bound_] from a 3-128-128-48 MLP (inner sums
    # of 3 + 128 + 128 terms), so a GEMM that blocks 30 rows unlike 50 moves them by about 259 eps of bound_
    np.testing.assert_allclose(F30, F[:30], rtol=0, atol=259 * np.finfo(np.float32).eps * mrf.bound_)
    assert mrf.loss_curve_[-1] < mrf.loss_curve_[0]
    # anchors are distinct nodes, every node has a cell, pooling keeps the feature mass of each row
    assert np.unique(mrf.anchors_).size == 48 and mrf.cells_.min() >= 0 and mrf.cells_.max() < 48


def test_mrf_default_walks_are_the_documented_weighted_ones(small_roll):
    _, _, mrf = small_roll
    assert ManifoldRandomFeatures().neighbor_sampling == "weighted"
    assert mrf.grf_.neighbor_sampling == "weighted"
    doc = " ".join(ManifoldRandomFeatures.__doc__.split())
    assert '"weighted"``, the default' in doc
    assert GraphRandomFeatures().neighbor_sampling == "uniform"  # the GRF papers' estimator, as documented


def test_mrf_fit_leaves_the_global_torch_stream_alone():
    import torch

    rng = np.random.default_rng(1)
    X = M.swiss_roll_embed(M.sample_rectangle(120, 10.0, rng, quasi=True))
    state = torch.get_rng_state().clone()
    a = ManifoldRandomFeatures(n_anchors=8, n_walks=4, n_steps=3, hidden_width=8, random_state=5).fit(X)
    assert torch.equal(torch.get_rng_state(), state)
    b = ManifoldRandomFeatures(n_anchors=8, n_walks=4, n_steps=3, hidden_width=8, random_state=5).fit(X)
    np.testing.assert_array_equal(a.transform(X[:10]), b.transform(X[:10]))


def test_default_n_anchors_is_clamped_to_a_small_training_set():
    # the default n_anchors = 256 on 120 points: one anchor per point, the same fit as n_anchors=None
    rng = np.random.default_rng(2)
    X = M.swiss_roll_embed(M.sample_rectangle(120, 10.0, rng, quasi=True))
    small = dict(n_walks=4, n_steps=3, hidden_width=8, random_state=5)
    with pytest.warns(UserWarning, match="n_anchors = 256 > n_samples = 120"):
        clamped = ManifoldRandomFeatures(**small).fit(X)
    every = ManifoldRandomFeatures(n_anchors=None, **small).fit(X)
    assert clamped.n_anchors_ == every.n_anchors_ == 120
    np.testing.assert_array_equal(clamped.anchors_, np.arange(120))
    assert clamped.transform(X[:7]).shape == (7, 120)
    np.testing.assert_array_equal(clamped.transform(X[:7]), every.transform(X[:7]))


def test_intrinsic_dimension_of_flat_pieces():
    rng = np.random.default_rng(0)
    line = np.column_stack([rng.random(800), np.zeros(800), np.zeros(800)])
    plane = (
        np.column_stack([rng.random((1500, 2)), np.zeros(1500)]) @ np.linalg.qr(rng.normal(size=(3, 3)))[0]
    )
    cube = rng.random((3000, 3))
    assert round(intrinsic_dimension(line)) == 1
    assert round(intrinsic_dimension(plane)) == 2
    assert round(intrinsic_dimension(cube)) == 3
    with pytest.raises(ValueError, match="n_neighbors"):
        intrinsic_dimension(plane, n_neighbors=1)


def test_heat_time_sets_sigma2_near_the_heat_kernel_optimum():
    """Oracle: the flat torus's closed-form heat kernel. The graph time from heat_time lands near the best one."""
    rng = np.random.default_rng(0)
    ab = M.sample_torus(700, rng, quasi=True)
    X = M.torus_embed(ab)
    t = 0.2
    W, h = knn_gaussian_graph(X, 12)
    s2 = heat_time_to_sigma2(W, h, t, 2)
    g = GraphRandomFeatures(n_walks=1, sigma2=1.0).fit(W)
    lam, V = np.linalg.eigh(g.adjacency_normalized_.toarray())
    s = np.sqrt(g.degree_ / g.degree_.mean())
    K_true = M.torus_heat_kernel(ab, ab, t)

    def err(sigma2):
        K = ((V * np.exp(-sigma2 * (1 - lam))) @ V.T) / np.outer(s, s)
        a = (K * K_true).sum() / (K * K).sum()
        return _rel(a * K, K_true)

    e = err(s2)
    assert e < 0.2
    assert e < err(0.6 * s2) and e < err(1.6 * s2)
    mrf = ManifoldRandomFeatures(
        n_neighbors=12, heat_time=t, n_anchors=16, n_walks=2, n_steps=2, hidden_width=4, random_state=0
    ).fit(X)
    assert mrf.manifold_dim_ == 2 and mrf.sigma2_ == pytest.approx(s2)
    assert mrf.grf_.sigma2 == pytest.approx(s2)
    fixed = ManifoldRandomFeatures(n_neighbors=12, sigma2=3.0, n_anchors=16, n_walks=2, n_steps=2).fit(X)
    assert fixed.sigma2_ == 3.0 and fixed.manifold_dim_ is None
    with pytest.raises(ValueError, match="heat_time"):
        heat_time_to_sigma2(W, h, -1.0, 2)
    with pytest.raises(ValueError, match="manifold_dim"):
        heat_time_to_sigma2(W, h, t, 0)
    with pytest.raises(ValueError, match="bandwidth"):
        heat_time_to_sigma2(W, 0.0, t, 2)


def test_nystrom_extension_reproduces_eigenvectors_on_graph_rows():
    """Oracle: A v_j = mu_j v_j, so extending with a node's own row of A returns v_j at that node."""
    from neurips26.kernels.manifold_random_features.experiment import (
        _out_of_sample_affinity,
        nystrom_eigenfunctions,
    )

    W = _random_graph(30, 0.3, 2)
    g = GraphRandomFeatures(n_walks=1).fit(W)
    A = g.adjacency_normalized_.toarray()
    mu, V = np.linalg.eigh(A)
    top = np.argsort(mu)[::-1][:6]
    np.testing.assert_allclose(nystrom_eigenfunctions(A[[2, 5, 9]], V[:, top], mu[top]), V[[2, 5, 9]][:, top])
    # out-of-sample rows: Gaussian weights to the k nearest nodes, normalised by sqrt(d(x) D_i)
    rng = np.random.default_rng(0)
    X, Xh = rng.random((40, 2)), rng.random((5, 2))
    deg = rng.random(40) + 1.0
    a, dx = _out_of_sample_affinity(X, Xh, 0.3, deg, 4)
    d = np.linalg.norm(Xh[:, None] - X[None], axis=-1)
    for i in range(5):
        nb = np.argsort(d[i])[:4]
        w = np.exp(-(d[i, nb] ** 2) / 0.09)
        assert dx[i] == pytest.approx(w.sum())
        np.testing.assert_allclose(a[i].toarray().ravel()[nb], w / np.sqrt(w.sum() * deg[nb]))
        assert a[i].nnz == 4


def test_mrf_field_approximates_the_node_kernel(small_roll):
    X, _, mrf = small_roll
    K_nodes = mrf.node_kernel()
    K_field = mrf.kernel_matrix(X)
    assert _rel(K_field, K_nodes) < 0.35  # the field smooths the walk noise; it must stay close


def test_mrf_beats_ambient_distance_kernel_across_layers(small_roll):
    """Geometry: a point's kernel mass on the adjacent layer (close in R^3, far on the roll) stays small."""
    X, uv, mrf = small_roll
    K = mrf.kernel_matrix(X)
    intrinsic = np.abs(uv[:, None, 0] - uv[None, :, 0])
    ambient = np.linalg.norm(X[:, None] - X[None], axis=-1)
    across = (ambient < 8.0) & (intrinsic > 30.0)  # neighbours in R^3 on another layer
    near = (intrinsic < 2.0) & (np.abs(uv[:, None, 1] - uv[None, :, 1]) < 2.0)
    assert across.any() and near.any()
    assert K[across].mean() < 0.1 * K[near].mean()  # the sigmoid floor keeps it just above 0


@settings(max_examples=10, deadline=None)
@given(st.lists(st.floats(-50, 50), min_size=3, max_size=30))
def test_mrf_features_positive_and_bounded_anywhere(small_roll, coords):
    X, _, mrf = small_roll
    pts = np.array(coords[: len(coords) // 3 * 3]).reshape(-1, 3)
    F = mrf.transform(pts)
    assert np.all(np.isfinite(F)) and F.min() >= 0 and F.max() <= mrf.bound_


def test_mrf_bad_input(small_roll):
    X, _, mrf = small_roll
    with pytest.raises(ValueError, match="n_anchors"):
        ManifoldRandomFeatures(n_anchors=0).fit(X[:100])
    with pytest.raises(ValueError, match="n_neighbors"):
        ManifoldRandomFeatures(n_anchors=10, n_neighbors=100).fit(X[:100])
    with pytest.raises(ValueError, match="p_halt"):
        ManifoldRandomFeatures(n_anchors=10, p_halt=0.0).fit(X[:100])
    with pytest.raises(ValueError, match="output_bound"):
        ManifoldRandomFeatures(n_anchors=10, output_bound=1.0).fit(X[:100])
    with pytest.raises(ValueError, match="neighbor_sampling"):
        ManifoldRandomFeatures(n_anchors=10, neighbor_sampling="x").fit(X[:100])
    with pytest.raises(ValueError, match="n_steps"):
        ManifoldRandomFeatures(n_anchors=10, n_steps=0).fit(X[:100])
    for params, match in [
        ({"sigma2": 0.0}, "sigma2"),
        ({"heat_time": -2.0}, "heat_time"),
        ({"heat_time": 1.0, "manifold_dim": 0}, "manifold_dim"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"hidden_width": 0}, "hidden_width"),
        ({"kernel": "matern"}, "kernel"),
        ({"n_walks": 0}, "n_walks"),
    ]:
        with pytest.raises(ValueError, match=match):
            ManifoldRandomFeatures(n_anchors=10, **params).fit(X[:100])
    bad = X[:100].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ManifoldRandomFeatures().fit(bad)
    with pytest.raises(ValueError, match="columns"):
        mrf.transform(X[:5, :2])
    with pytest.raises(ValueError, match="columns"):
        mrf.kernel_matrix(X[:5], X[:5, :2])
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        ManifoldRandomFeatures().transform(X[:5])


def test_graph_helpers():
    rng = np.random.default_rng(0)
    X = rng.random((60, 2))
    W, h = knn_gaussian_graph(X, 5)
    assert abs(W - W.T).max() == 0 and W.min() >= 0 and W.max() <= 1
    assert (np.diff(W.indptr) >= 5).all()
    d = np.linalg.norm(X[:, None] - X[None], axis=-1)
    i, j = W.nonzero()
    np.testing.assert_allclose(W[i, j].A1, np.exp(-(d[i, j] ** 2) / h**2))
    idx = farthest_point_sampling(X, 10, random_state=0)
    assert np.unique(idx).size == 10
    # greedy rule: each pick is the farthest point from the previous picks
    for k in range(1, 10):
        dmin = d[:, idx[:k]].min(axis=1)
        assert dmin[idx[k]] == pytest.approx(dmin.max())
    Xdup = np.vstack([X, X[:3]])  # coincident points keep their edges
    Wd, _ = knn_gaussian_graph(Xdup, 5)
    assert Wd[0, 60] == 1.0 and Wd[60, 0] == 1.0
    with pytest.raises(ValueError, match="n_neighbors"):
        knn_gaussian_graph(X, 60)
    with pytest.raises(ValueError, match="bandwidth"):
        knn_gaussian_graph(X, 5, bandwidth=-1.0)
    with pytest.raises(ValueError, match="n_points"):
        farthest_point_sampling(X, 0)


# --- ground-truth heat kernels ------------------------------------------------------------------------------
def test_heat_kernels_integrate_to_one_and_are_symmetric():
    rng = np.random.default_rng(0)
    x = M.fibonacci_sphere(4000, rng)
    K = M.sphere_heat_kernel(x[:5], x, 0.05)
    np.testing.assert_allclose(K.mean(axis=1) * 4 * np.pi, 1.0, rtol=1e-3)
    uv = M.sample_rectangle(20000, 10.0, rng, quasi=True)
    K = M.swiss_roll_heat_kernel(uv[:5], uv, 6.0, 10.0)
    area = M.swiss_roll_length() * 10.0
    np.testing.assert_allclose(K.mean(axis=1) * area, 1.0, rtol=2e-3)  # Neumann: mass is conserved
    ab = M.sample_torus(20000, rng, quasi=True)
    K = M.torus_heat_kernel(ab[:5], ab, 0.15)
    np.testing.assert_allclose(K.mean(axis=1) * 4 * np.pi**2, 1.0, rtol=2e-3)
    Ks = M.swiss_roll_heat_kernel(uv[:50], uv[:50], 6.0, 10.0)
    np.testing.assert_allclose(Ks, Ks.T)


def test_sphere_heat_kernel_small_time_is_gaussian():
    x = np.array([[0.0, 0.0, 1.0]])
    ang = 0.05
    y = np.array([[np.sin(ang), 0.0, np.cos(ang)]])
    t = 1e-3
    gauss = np.exp(-(ang**2) / (4 * t)) / (4 * np.pi * t)
    assert M.sphere_heat_kernel(x, y, t)[0, 0] == pytest.approx(gauss, rel=0.01)


def test_swiss_roll_embedding_is_isometric():
    uv = np.array([[10.0, 2.0], [10.01, 2.0], [10.0, 2.01]])
    X = M.swiss_roll_embed(uv)
    assert np.linalg.norm(X[1] - X[0]) == pytest.approx(0.01, rel=1e-3)
    assert np.linalg.norm(X[2] - X[0]) == pytest.approx(0.01, rel=1e-9)


def test_periodic_lattice():
    P, A = M.periodic_lattice(4.0, 0.5)
    assert P.shape == (64, 2) and (np.asarray(A.sum(1)).ravel() == 4).all()
    assert abs(A - A.T).max() == 0
    with pytest.raises(ValueError, match="side"):
        M.periodic_lattice(4.0, 0.3)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("manifold-random-features", tmp_path)
