"""Tests for the srGW network / graphon estimator (arXiv 2606.02223)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import NotFittedError
from sklearn.metrics import adjusted_rand_score

from neurips26.harness.testing import assert_quick_verdict
from neurips26.transport.srgw_graphon import (
    SBMS,
    SRGWGraphonEstimator,
    initial_coupling,
    round_coupling,
    sample_graphon,
    sample_sbm,
    sas_estimate,
    spectral_sbm_estimate,
    srgw_block_coordinate_descent,
    srgw_conditional_gradient,
    srgw_loss,
    theta_mse,
    update_block_matrix,
    usvt_estimate,
)
from neurips26.transport.srgw_graphon.baselines import tv_denoise


def _random_problem(n: int, K: int, seed: int):
    rng = np.random.default_rng(seed)
    A = rng.uniform(size=(n, n))
    A = (A + A.T) / 2
    C = rng.uniform(size=(K, K))
    C = (C + C.T) / 2
    T = rng.uniform(size=(n, K))
    T *= (1.0 / n) / T.sum(axis=1, keepdims=True)
    return A, C, T


def _brute_loss(A, T, C):
    n, K = T.shape
    total = 0.0
    for i, j, k, l in itertools.product(range(n), range(K), range(n), range(K)):
        total += (A[i, k] - C[j, l]) ** 2 * T[i, j] * T[k, l]
    return total


def test_loss_matches_brute_force_four_index_sum():
    A, C, T = _random_problem(6, 3, 0)
    assert srgw_loss(A, T, C) == pytest.approx(_brute_loss(A, T, C), rel=1e-12)


def test_block_update_is_the_exact_minimiser_and_matches_pot():
    ot = pytest.importorskip("ot")
    A, _, T = _random_problem(30, 4, 1)
    C, keep = update_block_matrix(A, T)
    assert keep.tolist() == [0, 1, 2, 3]
    C_pot = ot.gromov.update_barycenter_structure([T], [A], np.ones(1), p=T.sum(0))
    np.testing.assert_allclose(C, C_pot, atol=1e-12)
    base = srgw_loss(A, T, C)
    rng = np.random.default_rng(0)
    for _ in range(5):  # the square loss is a convex quadratic in C: any perturbation is worse
        E = rng.normal(scale=1e-3, size=C.shape)
        assert srgw_loss(A, T, C + (E + E.T) / 2) > base


def test_block_update_drops_empty_blocks():
    A, _, T = _random_problem(10, 3, 2)
    T[:, 1] = 0.0
    T *= (1 / 10) / T.sum(axis=1, keepdims=True)
    C, keep = update_block_matrix(A, T)
    assert keep.tolist() == [0, 2] and C.shape == (2, 2)


def test_frank_wolfe_matches_pot_from_the_same_start():
    ot = pytest.importorskip("ot")
    A, _, _ = sample_graphon("u*v", 150, random_state=0)
    C = SRGWGraphonEstimator(5, random_state=0).fit(A).relaxed_block_matrix_
    C = C + 0.02 * np.eye(C.shape[0])
    T0 = initial_coupling(A, C.shape[0], "random", random_state=3)
    p = np.full(150, 1 / 150)
    T, log = srgw_conditional_gradient(A, C, T0, max_iter=500, tol=1e-12, log=True)
    T_pot, log_pot = ot.gromov.semirelaxed_gromov_wasserstein(
        A, C, p, symmetric=True, G0=T0, log=True, max_iter=500, tol_rel=1e-12, tol_abs=0.0
    )
    assert log["loss"][-1] == pytest.approx(float(log_pot["srgw_dist"]), rel=1e-8, abs=1e-12)
    assert srgw_loss(A, T, C) == pytest.approx(log["loss"][-1], rel=1e-10)
    np.testing.assert_allclose(T, T_pot, atol=1e-8)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 25), K=st.integers(1, 5))
def test_frank_wolfe_is_feasible_and_monotone(seed, n, K):
    A, C, T0 = _random_problem(n, K, seed)
    T, log = srgw_conditional_gradient(A, C, T0, max_iter=50, tol=0.0, log=True)
    assert np.all(T >= -1e-15)
    np.testing.assert_allclose(T.sum(axis=1), np.full(n, 1 / n), atol=1e-12)
    assert np.all(np.diff(log["loss"]) <= 1e-12)
    assert srgw_loss(A, T, C) == pytest.approx(log["loss"][-1], rel=1e-9, abs=1e-12)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), init=st.sampled_from(["kmeans", "spectral", "product", "random"]))
def test_loss_never_increases(seed, init):
    B, pi = SBMS["3-block"]
    A, _, _ = sample_sbm(B, pi, 60, random_state=seed)
    est = SRGWGraphonEstimator(4, init=init, random_state=seed).fit(A)
    assert np.all(np.diff(est.loss_history_) <= 1e-12 * est.loss_history_[0])
    relaxed = srgw_loss(A, est.coupling_, est.relaxed_block_matrix_)
    assert est.relaxed_loss_ == pytest.approx(relaxed, rel=1e-9)
    assert est.relaxed_loss_ >= 0


def test_noiseless_sbm_is_recovered_exactly():
    rng = np.random.default_rng(0)
    B = np.array([[0.9, 0.1, 0.3], [0.1, 0.7, 0.2], [0.3, 0.2, 0.5]])
    z = rng.permutation(np.repeat([0, 1, 2], [20, 30, 50]))
    A = B[np.ix_(z, z)]  # weighted, noiseless (self-loops included)
    est = SRGWGraphonEstimator(3, random_state=0).fit(A)
    assert adjusted_rand_score(z, est.labels_) == 1.0
    perm = [np.bincount(est.labels_[z == j]).argmax() for j in range(3)]
    np.testing.assert_allclose(est.block_matrix_[np.ix_(perm, perm)], B, atol=1e-12)
    assert est.loss_ == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(est.probability_matrix(), A, atol=1e-12)
    np.testing.assert_allclose(est.probability_matrix(relaxed=True), A, atol=1e-12)
    assert est.fractional_rows_ == 0.0


def test_sbm_recovery_beats_noise_and_matches_spectral():
    B, pi = SBMS["2-block assortative"]
    A, theta, z = sample_sbm(B, pi, 300, random_state=1)
    est = SRGWGraphonEstimator(2, random_state=0).fit(A)
    P_sc, lab = spectral_sbm_estimate(A, 2, random_state=0)
    assert adjusted_rand_score(z, est.labels_) == 1.0
    assert theta_mse(theta, est.probability_matrix()) == pytest.approx(theta_mse(theta, P_sc), rel=1e-9)


def test_graphon_step_function():
    B = np.array([[0.9, 0.1], [0.1, 0.5]])
    z = np.repeat([0, 1], [30, 70])
    est = SRGWGraphonEstimator(2, random_state=0).fit(B[np.ix_(z, z)])
    grid = (np.arange(400) + 0.5) / 400
    W = est.graphon(grid[:, None], grid[None, :])
    q, C = est.block_proportions_, est.block_matrix_
    assert W.shape == (400, 400)
    assert W.mean() == pytest.approx(q @ C @ q, abs=1e-12)
    assert set(np.unique(W)) <= set(np.unique(C))
    assert est.graphon(0.0, 1.0).shape == ()


def test_sparse_input_matches_dense():
    A, _, _ = sample_graphon("1-|u-v|", 120, random_state=4)
    T0 = initial_coupling(A, 6, "kmeans", random_state=0)  # k-means itself differs on sparse rows
    dense = SRGWGraphonEstimator(6, init=T0).fit(A)
    sparse = SRGWGraphonEstimator(6, init=T0).fit(sp.csr_matrix(A))
    np.testing.assert_allclose(dense.loss_history_, sparse.loss_history_, rtol=1e-10)
    np.testing.assert_array_equal(dense.labels_, sparse.labels_)


def _networkx_two_block_graph():
    nx = pytest.importorskip("networkx")
    G = nx.stochastic_block_model([30, 50], [[0.5, 0.05], [0.05, 0.4]], seed=3)
    return nx, G, np.repeat([0, 1], [30, 50])


@pytest.mark.parametrize("n_init", [1, "auto"])
@pytest.mark.parametrize("init", ["kmeans", "spectral", "product", "random"])
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "matrix"])
def test_networkx_sparse_adjacency_fits_with_every_start(fmt, init, n_init):
    # networkx returns sparse arrays with int64 indices, which scikit-learn's KMeans (the default start) rejects;
    # the fit must match the fit of the same graph given densely, start by start
    nx, G, z = _networkx_two_block_graph()
    if fmt == "matrix":  # a scipy sparse *matrix* with int64 indices
        A_sparse = sp.csr_matrix(nx.to_scipy_sparse_array(G, format="csr"))
        A_sparse.indices = A_sparse.indices.astype(np.int64)
        A_sparse.indptr = A_sparse.indptr.astype(np.int64)
    else:
        A_sparse = nx.to_scipy_sparse_array(G, format=fmt)
    assert sp.issparse(A_sparse)
    assert (A_sparse.row if fmt == "coo" else A_sparse.indices).dtype == np.int64
    sparse = SRGWGraphonEstimator(2, init=init, n_init=n_init, random_state=0).fit(A_sparse)
    dense = SRGWGraphonEstimator(2, init=init, n_init=n_init, random_state=0).fit(nx.to_numpy_array(G))
    assert sparse.loss_ == pytest.approx(dense.loss_, rel=1e-9)
    assert adjusted_rand_score(dense.labels_, sparse.labels_) == 1.0
    if init != "product":  # the digest's product start may collapse (tested below); the others recover
        assert adjusted_rand_score(z, sparse.labels_) == 1.0


def test_solver_functions_accept_int64_sparse_input():
    nx, G, _ = _networkx_two_block_graph()
    A_sparse = nx.to_scipy_sparse_array(G, format="csr")
    A = A_sparse.toarray()
    for init in ("kmeans", "spectral", "product", "random"):
        T0 = initial_coupling(A_sparse, 3, init, random_state=0)
        np.testing.assert_allclose(T0.sum(axis=1), np.full(80, 1 / 80), rtol=1e-12)
    T0 = initial_coupling(A, 3, "random", random_state=0)
    C, _ = update_block_matrix(A, T0)
    C_sparse, _ = update_block_matrix(A_sparse, T0)
    np.testing.assert_allclose(C_sparse, C, rtol=1e-12)
    assert srgw_loss(A_sparse, T0, C) == pytest.approx(srgw_loss(A, T0, C), rel=1e-12)
    np.testing.assert_allclose(
        srgw_conditional_gradient(A_sparse, C, T0), srgw_conditional_gradient(A, C, T0), atol=1e-12
    )
    T, C_bcd = srgw_block_coordinate_descent(A, T0)
    T_sparse, C_bcd_sparse = srgw_block_coordinate_descent(A_sparse, T0)
    np.testing.assert_allclose(T_sparse, T, atol=1e-12)
    np.testing.assert_allclose(C_bcd_sparse, C_bcd, atol=1e-10)
    labels, _, C_hard = round_coupling(A, T)
    labels_sparse, _, C_hard_sparse = round_coupling(A_sparse, T)
    np.testing.assert_array_equal(labels_sparse, labels)
    np.testing.assert_allclose(C_hard_sparse, C_hard, rtol=1e-12)


def _unequal_four_block_sbm(seed: int, p_in=(0.18, 0.22, 0.26, 0.3)):
    nx = pytest.importorskip("networkx")
    sizes = [150, 250, 100, 300]
    P = np.full((4, 4), 0.05)
    np.fill_diagonal(P, p_in)
    G = nx.stochastic_block_model(sizes, P.tolist(), seed=seed)
    return nx.to_scipy_sparse_array(G, format="csr"), np.repeat(np.arange(4), sizes)


def _planted_partition_loss(A, z) -> float:
    # brute force: block means of A over the planted blocks (diagonal included, as the C-step), then the mean
    # squared residual over all n^2 pairs, i.e. L(T, C) at the planted hard coupling with uniform p
    A = A.toarray() if sp.issparse(A) else np.asarray(A)
    K = z.max() + 1
    C = np.array([[A[np.ix_(z == j, z == l)].mean() for l in range(K)] for j in range(K)])
    return float(np.mean((A - C[np.ix_(z, z)]) ** 2))


@pytest.mark.parametrize("graph_seed", [7, 8, 9])
def test_default_starts_recover_an_unequal_four_block_sbm(graph_seed):
    # one k-means start on the rows of A stops in a worse local optimum on 2 of these 3 graphs (ARI 0.29-0.77);
    # the default n_init runs a spectral start beside it and keeps the lowest loss
    A, z = _unequal_four_block_sbm(graph_seed)
    single = SRGWGraphonEstimator(4, n_init=1, random_state=0).fit(A)
    est = SRGWGraphonEstimator(4, random_state=0).fit(A)
    assert est.n_init_ == 3 and est.init_losses_.shape == (3,)
    assert adjusted_rand_score(z, est.labels_) >= 0.99
    # the first start draws what the single start draws, so its loss is the same; the kept one is the lowest
    assert est.init_losses_[0] == pytest.approx(single.loss_, rel=1e-12)
    assert est.loss_ == est.init_losses_.min() <= single.loss_
    spectral = SRGWGraphonEstimator(4, init="spectral", n_init=1, random_state=0).fit(A)
    assert est.loss_ <= spectral.loss_ * (1 + 1e-12)


def test_review_probe_unequal_four_block_sbm_before_and_after_n_init():
    # the review's probe (second pass, srgw-graphon): networkx SBM, sizes 150/250/100/300, P_in 0.25/0.2/0.3/0.18,
    # P_out 0.05, n = 800, graph seeds 7-9, estimator seeds 0-1, given as networkx's sparse array. Measured here:
    # before (one k-means start, the authors' protocol, n_init=1) 5 of the 6 fits stop at ARI 0.707-0.770 with
    # loss 0.0804-0.0811, above the planted partition's 0.0794-0.0799; after (default n_init) all 6 reach
    # ARI 1.0 at the planted loss
    before_stuck = 0
    for graph_seed in (7, 8, 9):
        A, z = _unequal_four_block_sbm(graph_seed, p_in=(0.25, 0.2, 0.3, 0.18))
        planted = _planted_partition_loss(A, z)
        for seed in (0, 1):
            single = SRGWGraphonEstimator(4, n_init=1, random_state=seed).fit(A)
            if adjusted_rand_score(z, single.labels_) < 0.9 and single.loss_ > planted * 1.005:
                before_stuck += 1
            est = SRGWGraphonEstimator(4, random_state=seed).fit(A)
            assert adjusted_rand_score(z, est.labels_) >= 0.99
            assert est.loss_ <= planted * (1 + 1e-9)
            assert est.loss_ <= single.loss_ * (1 + 1e-12)
    assert before_stuck >= 3  # the probe does reproduce the defect the default n_init fixes


def test_n_init_keeps_the_lowest_of_the_starts_run():
    B, pi = SBMS["3-block"]
    A, _, _ = sample_sbm(B, pi, 90, random_state=2)
    est = SRGWGraphonEstimator(5, init="random", n_init=4, random_state=1).fit(A)
    assert est.n_init_ == 4 and est.best_init_ in ("random", "spectral")
    assert est.loss_ == pytest.approx(est.init_losses_.min(), rel=1e-12)
    # the kept attributes belong together: the loss of the kept labels and block matrix
    z, C = est.labels_, est.block_matrix_
    assert np.mean((A - C[np.ix_(z, z)]) ** 2) == pytest.approx(est.loss_, rel=1e-9)
    labels = SRGWGraphonEstimator(5, init="random", n_init=4, random_state=1).fit_predict(A)
    np.testing.assert_array_equal(labels, est.labels_)
    T0 = initial_coupling(A, 3, "kmeans", random_state=0)
    with pytest.warns(RuntimeWarning, match="n_init"):
        one = SRGWGraphonEstimator(3, init=T0, n_init=3).fit(A)
    assert one.n_init_ == 1 and one.best_init_ == "array"
    with warnings.catch_warnings():  # "auto" runs an explicit array once, silently
        warnings.simplefilter("error")
        assert SRGWGraphonEstimator(3, init=T0).fit(A).n_init_ == 1


def test_n_init_is_deterministic_given_random_state():
    # n = 800 > 500: the spectral start uses eigsh with a starting vector drawn from random_state
    A, _ = _unequal_four_block_sbm(8)
    first = SRGWGraphonEstimator(4, n_init=4, random_state=5).fit(A)
    again = SRGWGraphonEstimator(4, n_init=np.int64(4), random_state=5).fit(A)
    assert first.n_init_ == again.n_init_ == 4
    np.testing.assert_allclose(again.init_losses_, first.init_losses_, rtol=1e-12)
    np.testing.assert_array_equal(again.labels_, first.labels_)
    assert again.best_init_ == first.best_init_


def test_rounding_a_hard_coupling_is_lossless():
    A, _, _ = sample_graphon("u*v", 50, random_state=0)
    T = initial_coupling(A, 4, "kmeans", random_state=0)
    C, _ = update_block_matrix(A, T)
    labels, T_hard, C_hard = round_coupling(A, T)
    np.testing.assert_allclose(T_hard, T[:, np.unique(np.argmax(T, axis=1))])
    assert srgw_loss(A, T_hard, C_hard) == pytest.approx(srgw_loss(A, T, C), rel=1e-12)
    assert labels.max() + 1 == C_hard.shape[0]


def test_estimator_params_roundtrip():
    from sklearn.base import clone

    est = SRGWGraphonEstimator(5, init="spectral", tol=1e-4, random_state=3)
    assert clone(est).get_params() == est.get_params()


def test_usvt_recovers_a_noiseless_low_rank_matrix():
    x = np.linspace(0.2, 0.9, 200)
    theta = np.outer(x, x)
    np.testing.assert_allclose(usvt_estimate(theta), theta, atol=1e-10)


def test_tv_denoise_and_sas():
    img = np.full((8, 8), 0.3)
    np.testing.assert_allclose(tv_denoise(img, 0.1), img, atol=1e-12)
    rng = np.random.default_rng(0)
    noisy = np.kron(np.eye(2), np.ones((8, 8))) + rng.normal(scale=0.1, size=(16, 16))
    den = tv_denoise(noisy, 0.1)
    tv = lambda u: np.abs(np.diff(u, axis=0)).sum() + np.abs(np.diff(u, axis=1)).sum()  # noqa: E731
    assert tv(den) < tv(noisy)
    np.testing.assert_allclose(tv_denoise(noisy, 0.0), noisy)
    A, theta, _ = sample_graphon("u*v", 300, random_state=0)
    assert theta_mse(theta, sas_estimate(A)) < 0.5 * theta_mse(theta, np.full_like(theta, A.mean()))


def test_sampler_protocol():
    A, theta, z = sample_sbm(*SBMS["3-block"], 100, random_state=0)
    assert np.all(A == A.T) and np.all(np.diag(A) == 0) and np.all(np.diag(theta) == 0)
    assert set(np.unique(A)) <= {0.0, 1.0}
    A2, _, _ = sample_sbm(*SBMS["3-block"], 100, random_state=0)
    np.testing.assert_array_equal(A, A2)


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "A, match",
    [
        (np.zeros((3, 4)), "square"),
        (np.array([[0.0, 1.0], [0.0, 0.0]]), "symmetric"),
        (np.array([[0.0, 2.0], [2.0, 0.0]]), r"\[0, 1\]"),
        (np.array([[0.0, -0.5], [-0.5, 0.0]]), r"\[0, 1\]"),
        (np.array([[0.0, np.nan], [np.nan, 0.0]]), "NaN"),
        (np.zeros((1, 1)), "at least 2"),
        (np.zeros(5), "square"),
    ],
)
def test_bad_adjacency_raises(A, match):
    with pytest.raises(ValueError, match=match):
        SRGWGraphonEstimator(1).fit(A)
    with pytest.raises(ValueError, match=match):
        usvt_estimate(A)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_blocks": 0}, "n_blocks"),
        ({"n_blocks": 11}, "n_blocks"),
        ({"n_blocks": "log"}, "n_blocks"),
        ({"n_blocks": 2.5}, "n_blocks"),
        ({"n_blocks": 2, "init": "fluid"}, "init"),
        ({"n_blocks": 2, "init": np.ones((10, 3))}, "init"),
        ({"n_blocks": 2, "init": np.ones((10, 2))}, "init"),
        ({"n_blocks": 2, "max_iter": 0}, "max_iter"),
        ({"n_blocks": 2, "max_iter_fw": -1}, "max_iter_fw"),
        ({"n_blocks": 2, "tol": -1.0}, "tol"),
        ({"n_blocks": 2, "tol_fw": float("nan")}, "tol_fw"),
        ({"n_blocks": 2, "n_init": 0}, "n_init"),
        ({"n_blocks": 2, "n_init": -2}, "n_init"),
        ({"n_blocks": 2, "n_init": 1.5}, "n_init"),
        ({"n_blocks": 2, "n_init": True}, "n_init"),
        ({"n_blocks": 2, "n_init": None}, "n_init"),
        ({"n_blocks": 2, "n_init": "many"}, "n_init"),
    ],
)
def test_bad_estimator_parameters_raise(kwargs, match):
    A, _, _ = sample_sbm(*SBMS["2-block assortative"], 10, random_state=0)
    with pytest.raises(ValueError, match=match):
        SRGWGraphonEstimator(**kwargs).fit(A)


def test_bad_calls_on_the_fitted_estimator():
    with pytest.raises(NotFittedError):
        SRGWGraphonEstimator(2).graphon(0.1, 0.2)
    A, _, _ = sample_sbm(*SBMS["2-block assortative"], 20, random_state=0)
    est = SRGWGraphonEstimator(2, random_state=0).fit(A)
    with pytest.raises(ValueError, match="u"):
        est.graphon(1.5, 0.2)
    with pytest.raises(ValueError, match="v"):
        est.graphon(0.5, np.nan)


def test_bad_solver_inputs_raise():
    A, C, T = _random_problem(8, 3, 0)
    with pytest.raises(ValueError, match="T0"):
        srgw_conditional_gradient(A, C, 2 * T)
    with pytest.raises(ValueError, match="T0"):
        srgw_conditional_gradient(A, C, T[:, :2])
    with pytest.raises(ValueError, match="C"):
        srgw_conditional_gradient(A, C + np.triu(np.ones((3, 3)), 1), T)
    with pytest.raises(ValueError, match="max_iter"):
        srgw_conditional_gradient(A, C, T, max_iter=-1)
    with pytest.raises(ValueError, match="tol"):
        srgw_conditional_gradient(A, C, T, tol=-1.0)
    with pytest.raises(ValueError, match="p"):
        srgw_conditional_gradient(A, C, T, p=np.ones(8))
    with pytest.raises(ValueError, match="T"):
        srgw_loss(A, T[:5], C)
    with pytest.raises(ValueError, match="T0"):
        srgw_block_coordinate_descent(A, -T)
    with pytest.raises(ValueError, match="C0"):
        srgw_block_coordinate_descent(A, T, np.ones((2, 2)))


def test_bad_baseline_and_sampler_inputs_raise():
    A, _, _ = sample_sbm(*SBMS["2-block assortative"], 20, random_state=0)
    with pytest.raises(ValueError, match="eta"):
        usvt_estimate(A, eta=0.0)
    with pytest.raises(ValueError, match="h"):
        sas_estimate(A, h=0)
    with pytest.raises(ValueError, match="tv_weight"):
        sas_estimate(A, tv_weight=-1.0)
    with pytest.raises(ValueError, match="n_blocks"):
        spectral_sbm_estimate(A, 0)
    with pytest.raises(ValueError, match="init"):
        initial_coupling(A, 2, "nope")
    with pytest.raises(ValueError, match="B"):
        sample_sbm(np.array([[0.5, 1.5], [1.5, 0.5]]), [0.5, 0.5], 10)
    with pytest.raises(ValueError, match="pi"):
        sample_sbm(np.eye(2), [0.2, 0.2], 10)
    with pytest.raises(ValueError, match="n"):
        sample_graphon("u*v", 1)
    with pytest.raises(ValueError, match="W"):
        sample_graphon("no such graphon", 10)
    with pytest.raises(ValueError, match="theta"):
        theta_mse(np.zeros((3, 3)), np.zeros((2, 2)))


# --- node weights ------------------------------------------------------------------------------


def _weighted_problem(seed: int = 0):
    """A weighted graph with self-loops and its copy in which node 0 is split into two identical nodes."""
    rng = np.random.default_rng(seed)
    B = np.array([[0.9, 0.2, 0.4], [0.2, 0.7, 0.1], [0.4, 0.1, 0.6]])
    z = rng.permutation(np.repeat([0, 1, 2], [7, 9, 8]))
    A = np.clip(B[np.ix_(z, z)] + rng.uniform(-0.05, 0.05, (24, 24)), 0, 1)
    A = (A + A.T) / 2
    dup = np.concatenate([[0], np.arange(24)])  # node 0 twice: its copies are joined with weight A_00
    return A, A[np.ix_(dup, dup)], z


def test_node_weight_two_equals_a_duplicated_node():
    # oracle from the definition: a node of weight 2/(n+1) is two identical nodes of weight 1/(n+1)
    A, A_dup, _ = _weighted_problem()
    n = A.shape[0]
    p = np.full(n, 1.0 / (n + 1))
    p[0] *= 2
    T0 = initial_coupling(A, 3, "random", random_state=1, p=p)
    T0_dup = np.vstack([T0[:1] / 2, T0[:1] / 2, T0[1:]])
    T, C = srgw_block_coordinate_descent(A, T0, p=p)
    T_dup, C_dup = srgw_block_coordinate_descent(A_dup, T0_dup)
    assert srgw_loss(A, T, C, p) == pytest.approx(srgw_loss(A_dup, T_dup, C_dup), rel=1e-9)
    np.testing.assert_allclose(T_dup[2:], T[1:], atol=1e-10)
    np.testing.assert_allclose(C_dup, C, atol=1e-10)
    est = SRGWGraphonEstimator(3, init="kmeans", random_state=0).fit(A, node_weights=p * 7.0)  # normalised
    np.testing.assert_allclose(est.node_weights_, p)
    np.testing.assert_allclose(est.coupling_.sum(axis=1), p, atol=1e-12)
    assert est.loss_ == pytest.approx(srgw_loss(A, _hard(est), est.block_matrix_, p), rel=1e-10)


def _hard(est):
    T = np.zeros((est.n_nodes_, est.n_blocks_))
    T[np.arange(est.n_nodes_), est.labels_] = est.node_weights_
    return T


def test_weighted_block_coordinate_descent_matches_pot_alternation():
    ot = pytest.importorskip("ot")
    A, _, z = _weighted_problem(3)
    n = A.shape[0]
    p = np.random.default_rng(0).uniform(0.5, 2.0, n)
    p /= p.sum()
    T_true = np.zeros((n, 3))
    T_true[np.arange(n), z] = p
    # fractional, and no block empties on the way
    T = 0.6 * T_true + 0.4 * initial_coupling(A, 3, "random", random_state=2, p=p)
    T_ours, C_ours = srgw_block_coordinate_descent(A, T, p=p, max_iter=4, tol=0.0, tol_fw=1e-13)
    C, _ = update_block_matrix(A, T)
    for _ in range(4):  # POT: T-step (semi-relaxed GW from the previous plan), then the closed-form C-step
        T = ot.gromov.semirelaxed_gromov_wasserstein(
            A, C, p, symmetric=True, G0=T, max_iter=1000, tol_rel=1e-13, tol_abs=0.0
        )
        C = ot.gromov.update_barycenter_structure([T], [A], np.ones(1), p=T.sum(0))
    np.testing.assert_allclose(T_ours, T, atol=1e-8)
    np.testing.assert_allclose(C_ours, C, atol=1e-8)


def test_relaxed_probability_matrix_uses_the_node_weights():
    A, _, _ = _weighted_problem(1)
    p = np.linspace(1, 3, A.shape[0])
    est = SRGWGraphonEstimator(3, random_state=0).fit(A, node_weights=p)
    T, C, w = est.coupling_, est.relaxed_block_matrix_, est.node_weights_
    expected = np.einsum("ij,jl,kl->ik", T, C, T) / np.outer(w, w)
    np.testing.assert_allclose(est.probability_matrix(relaxed=True), expected, atol=1e-12)
    if est.fractional_rows_ == 0.0:  # a hard coupling: relaxed and rounded estimates coincide
        np.testing.assert_allclose(est.probability_matrix(relaxed=True), est.probability_matrix(), atol=1e-10)


@pytest.mark.parametrize("w", [np.ones(5), -np.ones(24), np.full(24, np.nan), np.zeros(24)])
def test_bad_node_weights_raise(w):
    A, _, _ = _weighted_problem()
    with pytest.raises(ValueError, match="node_weights"):
        SRGWGraphonEstimator(3, random_state=0).fit(A, node_weights=w)
    with pytest.raises(ValueError, match="p must"):
        srgw_block_coordinate_descent(A, initial_coupling(A, 3, "random", random_state=0), p=w)


# --- what the reproduction's checks measure ----------------------------------------------------


def test_zero_diagonal_alone_gives_an_all_pairs_rate_of_one_over_n():
    # an exact block estimate: the off-diagonal error is 0, the all-pairs MSE is the diagonal term sum C_zz^2/n^2
    from neurips26.transport.srgw_graphon.experiment import _offdiag_mse

    B, pi = SBMS["3-block"]
    for n in (200, 800):
        _, theta, z = sample_sbm(B, pi, n, random_state=0)
        exact = B[np.ix_(z, z)]
        assert _offdiag_mse(theta, exact) == 0.0
        assert theta_mse(theta, exact) == pytest.approx(np.sum(B[z, z] ** 2) / n**2, rel=1e-12)


def test_product_start_collapses_while_the_mixed_start_keeps_every_block():
    from neurips26.transport.srgw_graphon.experiment import _mixed_start

    B, pi = SBMS["3-block"]
    A, _, z = sample_sbm(B, pi, 400, random_state=0)
    T0 = _mixed_start(A, 3, 0)
    assert np.all(T0.max(axis=1) * 400 < 0.99)  # every row fractional
    mixed = SRGWGraphonEstimator(3, init=T0).fit(A)
    assert mixed.n_blocks_ == 3 and adjusted_rand_score(z, mixed.labels_) == 1.0
    product = SRGWGraphonEstimator(3, init="product", n_init=1, random_state=0).fit(
        A
    )  # one start, as the digest
    assert product.n_blocks_ < 3  # the digest's start: one step to a vertex with an empty block


def test_fractional_rows_are_reported_when_the_solution_is_fractional():
    # fractional by construction: two 5-cliques and a bridge node b joined to all ten nodes; swapping the
    # cliques and the blocks maps the plan "each clique hard in its block, b split evenly" to itself, so the
    # C-step gives C11 = C22 and b's gradient row ties; along b's row the T-step loss is strictly convex
    # (curvature (C11^2 + C22^2 - 2 C12^2) p_b^2 / 4 > 0, b has no self-loop), so the tie is its strict minimum
    # and a Frank-Wolfe step from this plan can move b's row by round-off only, whatever the kernels
    m, n = 5, 11
    A = np.zeros((n, n))
    A[:m, :m] = A[m : 2 * m, m : 2 * m] = 1.0
    A[-1, : 2 * m] = A[: 2 * m, -1] = 1.0
    np.fill_diagonal(A, 0.0)
    T0 = np.zeros((n, 2))
    T0[:m, 0] = T0[m : 2 * m, 1] = 1 / n
    T0[-1] = 0.5 / n
    C, _ = update_block_matrix(A, T0)
    np.testing.assert_allclose(C, np.array([[4 * m * m, 4 * m], [4 * m, 4 * m * m]]) / n**2, rtol=1e-12)
    for hard in ([1 / n, 0.0], [0.0, 1 / n]):  # either hard choice for b costs more, by a margin
        T_hard = T0.copy()
        T_hard[-1] = hard
        assert srgw_loss(A, T_hard, C) > srgw_loss(A, T0, C) + 1e-6
    est = SRGWGraphonEstimator(2, init=T0).fit(A)
    np.testing.assert_allclose(est.coupling_[-1] * n, [0.5, 0.5], atol=1e-9)
    assert est.fractional_rows_ == 1 / n  # the gap checks' "fractional rows" sees it (it can fail)


def test_usvt_matches_a_dense_eigendecomposition():
    for W in ("u*v", "1-|u-v|", "0.5+0.5sin(2pi u)sin(2pi v)"):
        A, _, _ = sample_graphon(W, 300, random_state=2)
        M = 2 * A - 1
        w, U = np.linalg.eigh(M)
        keep = np.abs(w) >= 2.01 * np.sqrt(300)
        expected = np.clip(0.5 * ((U[:, keep] * w[keep]) @ U[:, keep].T + 1), 0, 1)
        np.testing.assert_allclose(usvt_estimate(A), expected, atol=1e-10)


def test_fw_step_sizes_are_logged():
    B, pi = SBMS["2-block assortative"]
    A, _, _ = sample_sbm(B, pi, 100, random_state=0)
    est = SRGWGraphonEstimator(2, init="random", random_state=0).fit(A)
    assert est.fw_steps_.shape == (est.n_fw_iter_,)
    assert np.all((est.fw_steps_ > 0) & (est.fw_steps_ <= 1))


def test_bad_rounding_and_block_update_inputs_raise():
    A, _, T = _random_problem(8, 3, 0)
    with pytest.raises(ValueError, match="T must"):
        round_coupling(A, T[:5])
    with pytest.raises(ValueError, match="T must"):
        update_block_matrix(A, -T)
    with pytest.raises(ValueError, match="symmetric"):
        round_coupling(np.triu(A), T)
    with pytest.raises(ValueError, match="n_blocks"):
        initial_coupling(A, 9)
    with pytest.raises(ValueError, match="square"):
        initial_coupling(A[:3], 2)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("srgw-graphon", tmp_path)
