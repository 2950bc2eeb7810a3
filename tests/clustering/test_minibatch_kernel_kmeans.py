"""Mini-batch kernel k-means: exactness against Lloyd, the implicit centre algebra, the estimator contract."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.estimator_checks import check_estimator

from neurips26.clustering import KernelKMeans, MiniBatchKernelKMeans
from neurips26.clustering.minibatch_kernel_kmeans import median_heuristic_gamma
from neurips26.harness.testing import assert_quick_verdict


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(600, centers=4, n_features=3, cluster_std=0.8, random_state=0)
    return X, y


def linear_kernel(A, B):
    return A @ B.T


def test_one_full_step_equals_one_lloyd_step(blobs):
    X, _ = blobs
    C0 = X[[0, 100, 200, 300]]
    mb = MiniBatchKernelKMeans(
        4, gamma=0.3, batch_size=len(X), tau=None, learning_rate=1.0, max_iter=1, init=C0
    ).fit(X)
    lloyd = KernelKMeans(4, gamma=0.3, max_iter=1, init=C0).fit(X)
    np.testing.assert_allclose(mb.transform(X), lloyd.transform(X), atol=1e-10)
    np.testing.assert_array_equal(mb.labels_, lloyd.labels_)


def test_implicit_distances_equal_explicit_under_linear_kernel(blobs):
    X, _ = blobs
    est = MiniBatchKernelKMeans(
        4, kernel=linear_kernel, batch_size=64, tau=3, max_iter=8, tol=0.0, random_state=0
    ).fit(X)
    # with k(x, y) = <x, y>, phi is the identity: centres are explicit vectors sum_s w_js x_s
    centres = np.zeros((4, X.shape[1]))
    np.add.at(centres, est.support_owner_, est.support_weights_[:, None] * est.support_vectors_)
    explicit = np.linalg.norm(X[:, None, :] - centres[None, :, :], axis=2)
    np.testing.assert_allclose(est.transform(X), explicit, atol=1e-8)


@pytest.mark.parametrize("truncation", ["drop", "renormalize"])
@pytest.mark.parametrize("learning_rate", ["sqrt", "sklearn", 0.5])
def test_centre_norms_stay_exact_through_truncation(blobs, truncation, learning_rate):
    X, _ = blobs
    est = MiniBatchKernelKMeans(
        4,
        gamma=0.3,
        batch_size=50,
        tau=2,
        truncation=truncation,
        learning_rate=learning_rate,
        max_iter=9,
        tol=0.0,
        recompute_every=1000,
        random_state=1,
    )
    est.fit(X)
    K = rbf_kernel(est.support_vectors_, gamma=0.3)
    for j in range(4):
        m = est.support_owner_ == j
        w = est.support_weights_[m]
        assert est.center_norms_[j] == pytest.approx(w @ K[np.ix_(m, m)] @ w, rel=1e-9, abs=1e-12)


def test_incremental_norm_matches_exact_recomputation(blobs):
    X, _ = blobs
    common = dict(gamma=0.3, batch_size=40, tau=2, max_iter=12, tol=0.0, random_state=3)
    a = MiniBatchKernelKMeans(4, recompute_every=1, **common).fit(X)  # exact every iteration
    b = MiniBatchKernelKMeans(4, recompute_every=10**6, **common).fit(X)  # incremental updates only
    np.testing.assert_allclose(a.batch_objective_, b.batch_objective_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(a.labels_, b.labels_)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), tau=st.integers(1, 4), b=st.integers(8, 80))
def test_weights_form_a_sub_convex_combination(seed, tau, b):
    X, _ = make_blobs(200, centers=3, n_features=2, random_state=seed % 50)
    for truncation in ("drop", "renormalize"):
        est = MiniBatchKernelKMeans(
            3, gamma=1.0, batch_size=b, tau=tau, truncation=truncation, max_iter=6, tol=0.0, random_state=seed
        ).fit(X)
        totals = np.bincount(est.support_owner_, weights=est.support_weights_, minlength=3)
        assert np.all(est.support_weights_ > 0)
        if truncation == "renormalize":
            np.testing.assert_allclose(totals, 1.0, rtol=1e-9)
        else:
            assert np.all(totals <= 1 + 1e-9)
        assert np.all(est.transform(X) >= 0)
        assert set(np.unique(est.labels_)) <= {0, 1, 2}


def test_recovers_blobs_and_is_deterministic(blobs):
    X, y = blobs
    a = MiniBatchKernelKMeans(4, batch_size=128, random_state=7).fit(X)
    b = MiniBatchKernelKMeans(4, batch_size=128, random_state=7).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert adjusted_rand_score(y, a.labels_) > 0.9
    np.testing.assert_array_equal(a.predict(X), a.labels_)
    assert a.score(X) == pytest.approx(-a.inertia_)


def test_early_stopping_and_support_bound(blobs):
    X, _ = blobs
    est = MiniBatchKernelKMeans(4, batch_size=32, tau=3, tol=10.0, random_state=0).fit(X)
    assert est.n_iter_ == 1  # any improvement is below tol = 10 (objective <= 2 for the RBF kernel)
    est = MiniBatchKernelKMeans(4, batch_size=32, tau=3, tol=0.0, max_iter=20, random_state=0).fit(X)
    assert est.n_iter_ == 20
    assert len(est.support_weights_) <= 3 * 32  # truncation: |S| <= tau * b in total


def test_median_heuristic(blobs):
    X, _ = blobs
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    expected = 1.0 / np.median(d2[np.triu_indices(len(X), 1)])
    assert median_heuristic_gamma(X, max_points=len(X)) == pytest.approx(expected)
    est = MiniBatchKernelKMeans(4, random_state=0).fit(X)
    assert 0 < est.gamma_ < np.inf


def test_laplacian_and_callable_kernels(blobs):
    X, y = blobs
    for kernel in ("laplacian", lambda A, B: rbf_kernel(A, B, gamma=0.3)):
        est = MiniBatchKernelKMeans(4, kernel=kernel, batch_size=128, random_state=0).fit(X)
        assert adjusted_rand_score(y, est.labels_) > 0.8


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_clusters": 0}, "n_clusters"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": -5}, "batch_size"),
        ({"kernel": "poly"}, "kernel"),
        ({"gamma": -1.0}, "gamma"),
        ({"tau": 0}, "tau"),
        ({"learning_rate": "adam"}, "learning_rate"),
        ({"learning_rate": 1.5}, "learning_rate"),
        ({"tol": -1.0}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"init": "farthest"}, "init"),
        ({"truncation": "none"}, "truncation"),
    ],
)
def test_bad_parameters_raise(blobs, params, match):
    X, _ = blobs
    with pytest.raises(ValueError, match=match):
        MiniBatchKernelKMeans(**{"n_clusters": 3, **params}).fit(X)


@pytest.mark.parametrize("cls", [MiniBatchKernelKMeans, KernelKMeans])
def test_bad_data_raises(cls):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="n_clusters"):
        cls(n_clusters=25).fit(X)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cls(n_clusters=2).fit(bad)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        cls(n_clusters=2).fit(bad)
    with pytest.raises(ValueError, match="2D array"):
        cls(n_clusters=2).fit(X[:, 0])
    with pytest.raises(ValueError, match="init"):
        cls(n_clusters=2, init=np.zeros((3, 2))).fit(X)
    fitted = cls(n_clusters=2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="features"):
        fitted.predict(np.zeros((4, 3)))


@pytest.mark.parametrize("est", [MiniBatchKernelKMeans(3, random_state=0), KernelKMeans(3, random_state=0)])
def test_sklearn_estimator_contract(est):
    check_estimator(est)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    result = assert_quick_verdict("minibatch-kernel-kmeans", tmp_path)
    by_name = {c["name"]: c for c in result["checks"]}
    assert by_name["speedup over full batch at n = 20000"]["passed"]
    assert by_name["ARI(ours) - ARI(full batch)"]["passed"]


def test_partial_fit_on_a_stream_of_batches(blobs):
    X, y = blobs
    est = MiniBatchKernelKMeans(4, tau=5, random_state=0)
    rng = np.random.default_rng(0)
    for _ in range(15):
        est.partial_fit(X[rng.integers(0, len(X), 128)])
    assert est.n_iter_ == 15
    assert adjusted_rand_score(y, est.predict(X)) > 0.9
    assert len(est.support_weights_) <= 5 * 128
    # one partial_fit on the whole data, alpha = 1, no truncation: one Lloyd step from the same seeds
    C0 = X[[0, 100, 200, 300]]
    pf = MiniBatchKernelKMeans(4, gamma=0.3, tau=None, learning_rate=1.0, init=C0).partial_fit(X)
    lloyd = KernelKMeans(4, gamma=0.3, max_iter=1, init=C0).fit(X)
    np.testing.assert_allclose(pf.transform(X), lloyd.transform(X), atol=1e-10)


def test_partial_fit_bad_input_leaves_state_intact(blobs):
    X, _ = blobs
    est = MiniBatchKernelKMeans(4, gamma=0.3, random_state=0).partial_fit(X[:100])
    before = est.support_weights_.copy()
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(np.zeros((10, 5)))
    bad = X[:10].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.partial_fit(bad)
    np.testing.assert_array_equal(est.support_weights_, before)
    with pytest.raises(ValueError, match="n_clusters"):
        MiniBatchKernelKMeans(4).partial_fit(X[:3])


def test_tol_zero_runs_max_iter_even_when_the_batch_objective_rises(blobs):
    X, _ = blobs
    est = MiniBatchKernelKMeans(
        4, batch_size=16, tau=2, learning_rate="sklearn", tol=0.0, max_iter=40, random_state=0
    ).fit(X)
    assert est.n_iter_ == 40
    assert (est.batch_improvement_ < 0).any()  # truncation drops mass: a "tol < 0"-style rule would fire
