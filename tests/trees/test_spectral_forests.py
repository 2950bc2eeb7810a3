"""Tests for spectral distillation of tree ensembles (arXiv 2605.11841)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_friedman1
from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor
from sklearn.metrics import r2_score

from neurips26.harness.testing import assert_quick_verdict
from neurips26.trees import (
    PrunedForest,
    SpectralForestDistiller,
    TreeSmoother,
    count_nodes,
    eigen_decay_exponent,
    forest_kernel,
    leaf_membership,
    minimax_rate_exponent,
    mlp_parameter_count,
    refit_leaf_values,
    smoother_spectrum,
)


@pytest.fixture(scope="module")
def data():
    X, y = make_friedman1(160, noise=0.5, random_state=0)
    return X[:120], y[:120], X[120:], y[120:]


@pytest.fixture(scope="module")
def rf(data):
    X, y, _, _ = data
    return RandomForestRegressor(n_estimators=15, min_samples_leaf=3, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def gbm(data):
    X, y, _, _ = data
    return GradientBoostingRegressor(n_estimators=40, max_depth=2, learning_rate=0.2, random_state=0).fit(
        X, y
    )


def _brute_force_kernel(forest, X_train, X):
    """k(x, x') = (1/B) sum_b 1{x' in leaf_b(x)} / |leaf_b(x)| by explicit loops."""
    B = len(forest.estimators_)
    lt, lx = forest.apply(X_train), forest.apply(X)
    K = np.zeros((len(X), len(X_train)))
    for i in range(len(X)):
        for j in range(len(X_train)):
            for b in range(B):
                if lt[j, b] == lx[i, b]:
                    K[i, j] += 1.0 / (B * np.sum(lt[:, b] == lx[i, b]))
    return K


# --- the random-forest kernel -------------------------------------------------------------------------------
def test_forest_kernel_equals_leaf_comembership_definition(data, rf):
    X, _, Xt, _ = data
    np.testing.assert_allclose(forest_kernel(rf, X).toarray(), _brute_force_kernel(rf, X, X), atol=1e-12)
    np.testing.assert_allclose(forest_kernel(rf, X, Xt).toarray(), _brute_force_kernel(rf, X, Xt), atol=1e-12)


def test_forest_kernel_is_symmetric_psd_row_stochastic(data, rf):
    X = data[0]
    K = forest_kernel(rf, X).toarray()
    np.testing.assert_allclose(K, K.T, atol=1e-14)
    np.testing.assert_allclose(K.sum(axis=1), 1.0, atol=1e-12)
    assert np.linalg.eigvalsh(K).min() > -1e-10


def test_refit_forest_is_the_kernel_smoother(data, rf):
    X, y, Xt, _ = data
    refit = refit_leaf_values(rf, X, y)
    np.testing.assert_allclose(refit.predict(Xt), forest_kernel(rf, X, Xt) @ y, atol=1e-10)
    np.testing.assert_allclose(refit.predict(X), TreeSmoother(rf, X).matmat(y), atol=1e-10)
    assert not np.allclose(rf.predict(Xt), refit.predict(Xt))  # bootstrap: the original differs; rf untouched


def test_unbootstrapped_forest_prediction_is_K_y(data):
    X, y, Xt, _ = data
    f = RandomForestRegressor(10, bootstrap=False, max_features=0.5, min_samples_leaf=2, random_state=1).fit(
        X, y
    )
    np.testing.assert_allclose(f.predict(Xt), forest_kernel(f, X, Xt) @ y, atol=1e-10)


def test_leaf_membership_one_leaf_per_tree(data, rf):
    M = leaf_membership(rf, data[2])
    np.testing.assert_array_equal(np.asarray(M.sum(axis=1)).ravel(), len(rf.estimators_))
    assert M.shape[1] == count_nodes(rf)


# --- the boosting smoother ------------------------------------------------------------------------------
def test_gbm_smoother_reproduces_predictions_and_recursion(data, gbm):
    X, y, Xt, _ = data
    sm = TreeSmoother(gbm, X)
    S = sm.dense()
    np.testing.assert_allclose(S @ y, gbm.predict(X), atol=1e-10)
    # S_0 = 11^T/n, S_m = S_{m-1} + nu H_m (I - S_{m-1}) with dense leaf-averaging H_m
    n = len(y)
    Sr = np.full((n, n), 1.0 / n)
    for tree in gbm.estimators_[:, 0]:
        leaf = tree.apply(X)
        H = (leaf[:, None] == leaf[None, :]).astype(float)
        H /= H.sum(axis=1, keepdims=True)
        Sr = Sr + gbm.learning_rate * H @ (np.eye(n) - Sr)
    np.testing.assert_allclose(S, Sr, atol=1e-10)
    np.testing.assert_allclose(sm.rmatmat(np.eye(n)), S.T, atol=1e-10)
    bias, theta = sm.leaf_table(y)
    np.testing.assert_allclose(sm.apply_table(Xt, bias, theta)[:, 0], gbm.predict(Xt), atol=1e-10)


def test_spectrum_matches_dense_decompositions(data, rf, gbm):
    X = data[0]
    sm = TreeSmoother(rf, X)
    lam, V, W = smoother_spectrum(sm, 6, random_state=0)
    K = sm.dense()
    np.testing.assert_allclose(lam, np.sort(np.linalg.eigvalsh(K))[::-1][:6], atol=1e-8)
    np.testing.assert_allclose(K @ V, V * lam, atol=1e-8)
    assert lam[0] == pytest.approx(1.0, abs=1e-10)  # constant mode of a row-stochastic kernel, kept
    gs = TreeSmoother(gbm, X)
    s, U, Wg = smoother_spectrum(gs, 5, random_state=0)
    np.testing.assert_allclose(s, np.linalg.svd(gs.dense(), compute_uv=False)[:5], rtol=1e-7)
    np.testing.assert_allclose(gs.dense() @ Wg, U * s, atol=1e-8)


# --- distillation ---------------------------------------------------------------------------------------
def test_nystrom_eigenfunctions_on_training_points_are_the_eigenvectors(data, rf):
    X, y, _, _ = data
    d = SpectralForestDistiller(rf, prefit=True, n_components=8, max_epochs=1, random_state=0).fit(X, y)
    sm = TreeSmoother(rf, X)
    lam, V, _ = smoother_spectrum(sm, 8, random_state=0)
    np.testing.assert_allclose(d.teacher_transform(X), V, atol=1e-8)
    np.testing.assert_allclose(d.teacher_predict(X, rank=8), V @ (lam * (V.T @ y)), atol=1e-8)


def test_many_components_surrogate_and_student_match_teacher(data, rf, gbm):
    X, y, _, _ = data
    n = len(y)
    d = SpectralForestDistiller(
        rf,
        prefit=True,
        n_components=n - 2,
        hidden_layer_sizes=(64, 64),
        max_epochs=300,
        n_augment=2,
        batch_size=128,
        random_state=0,
    ).fit(X, y)
    teacher = d.teacher_predict(X)
    assert r2_score(teacher, d.teacher_predict(X, rank=n - 2)) > 0.999  # full-rank truncation = smoother
    assert r2_score(teacher, d.predict(X)) > 0.95  # distilled student on the training data
    g = SpectralForestDistiller(gbm, prefit=True, n_components=40, max_epochs=300, random_state=0).fit(X, y)
    assert r2_score(gbm.predict(X), g.teacher_predict(X, rank=40)) > 0.97
    assert r2_score(gbm.predict(X), g.predict(X)) > 0.9


def test_student_size_and_determinism(data, rf):
    X, y, Xt, _ = data
    d = SpectralForestDistiller(
        rf, prefit=True, n_components=5, hidden_layer_sizes=(8,), max_epochs=5, random_state=3
    ).fit(X, y)
    assert d.n_parameters_ == mlp_parameter_count(10, (8,), 5) + 5 + 1 + 20
    assert mlp_parameter_count(10, (8,), 5) == 10 * 8 + 8 + 8 * 5 + 5
    d2 = SpectralForestDistiller(**d.get_params(deep=False)).fit(
        X, y
    )  # clone() would unfit the prefit teacher
    np.testing.assert_allclose(d.predict(Xt), d2.predict(Xt))
    direct = SpectralForestDistiller(**{**d.get_params(deep=False), "target": "direct"}).fit(X, y)
    assert direct.n_parameters_ == mlp_parameter_count(10, (8,), 1) + 1 + 1 + 20


def test_student_without_refit_is_the_spectral_combination(data, gbm):
    X, y, Xt, _ = data
    d = SpectralForestDistiller(
        gbm, prefit=True, n_components=6, refit_coef=False, max_epochs=3, random_state=0
    ).fit(X, y)
    np.testing.assert_allclose(d.predict(Xt), d.transform(Xt) @ d.teacher_coef_, atol=1e-8)
    # the GBM surrogate f_r = sum_j sigma_j u_j(x) w_j^T y approaches S y on the training points
    assert d.spectrum_[0] >= d.spectrum_[-1] > 0


def test_unfitted_teacher_is_cloned_and_fitted(data):
    X, y, Xt, _ = data
    base = RandomForestRegressor(n_estimators=5, random_state=0)
    d = SpectralForestDistiller(base, n_components=4, max_epochs=2, random_state=0).fit(X, y)
    assert not hasattr(base, "estimators_") and hasattr(d.estimator_, "estimators_")
    assert d.predict(Xt).shape == (len(Xt),)
    d0 = SpectralForestDistiller(n_components=3, max_epochs=1, random_state=0).fit(X[:40], y[:40])
    assert d0.teacher_nodes_ > 0


# --- pruning baseline ------------------------------------------------------------------------------------
def test_pruned_forest_truncation_matches_brute_force(data, rf):
    X, y, Xt, yt = data
    p = PrunedForest(rf, max_nodes=60, depths=[2]).fit(Xt, yt)
    assert p.n_nodes_ <= 60 and p.depth_ == 2
    manual = np.zeros(len(X))
    for b in p.trees_:
        t = rf.estimators_[b].tree_
        for i, x in enumerate(X):  # walk each point down to depth 2
            node, depth = 0, 0
            while t.children_left[node] >= 0 and depth < 2:
                node = (
                    t.children_left[node]
                    if x[t.feature[node]] <= t.threshold[node]
                    else t.children_right[node]
                )
                depth += 1
            manual[i] += t.value[node, 0, 0]
    np.testing.assert_allclose(p.predict(X), manual / len(p.trees_), atol=1e-10)


def test_pruned_forest_respects_budget_and_beats_single_trees(data, rf):
    X, y, Xt, yt = data
    p = PrunedForest(rf, max_nodes=200).fit(Xt, yt)
    assert p.n_nodes_ <= 200 and count_nodes(p) == p.n_nodes_
    single = min(np.mean((t.predict(Xt) - yt) ** 2) for t in rf.estimators_ if t.tree_.node_count <= 200)
    assert p.val_mse_ <= single + 1e-12


# --- diagnostics ------------------------------------------------------------------------------------------
def test_eigen_decay_exponent_recovers_power_law():
    j = np.arange(1, 41)
    assert eigen_decay_exponent(j**-1.7, start=1) == pytest.approx(1.7)
    assert minimax_rate_exponent(2.0) == pytest.approx(2 / 3)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(8, 40), leaf=st.integers(1, 4))
def test_kernel_invariants_property(seed, n, leaf):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = rng.normal(size=n)
    f = RandomForestRegressor(4, min_samples_leaf=leaf, random_state=seed).fit(X, y)
    K = forest_kernel(f, X).toarray()
    np.testing.assert_allclose(K.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(K, K.T, atol=1e-14)
    assert np.linalg.eigvalsh(K).min() > -1e-10
    np.testing.assert_allclose(refit_leaf_values(f, X, y).predict(X), K @ y, atol=1e-10)


@settings(max_examples=20, deadline=None)
@given(a=st.floats(1e-3, 50.0), b=st.floats(1e-3, 50.0))
def test_minimax_exponent_monotone_in_unit_interval(a, b):
    ra, rb = minimax_rate_exponent(a), minimax_rate_exponent(b)
    assert 0 < ra < 1 and ((a <= b) == (ra <= rb) or a == b)


# --- bad input ------------------------------------------------------------------------------------------
def test_bad_teacher(data):
    X, y, _, _ = data
    clf = RandomForestClassifier(3, random_state=0).fit(X, (y > y.mean()).astype(int))
    with pytest.raises(TypeError, match="estimator"):
        SpectralForestDistiller(clf, prefit=True).fit(X, y)
    with pytest.raises(ValueError, match="fitted"):
        SpectralForestDistiller(RandomForestRegressor(), prefit=True).fit(X, y)
    lad = GradientBoostingRegressor(n_estimators=3, loss="absolute_error").fit(X, y)
    with pytest.raises(ValueError, match="loss"):
        TreeSmoother(lad, X)
    sub = GradientBoostingRegressor(n_estimators=3, subsample=0.5, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="subsample"):
        TreeSmoother(sub, X)
    zero = GradientBoostingRegressor(n_estimators=3, init="zero").fit(X, y)
    with pytest.raises(ValueError, match="init"):
        SpectralForestDistiller(zero, prefit=True).fit(X, y)
    with pytest.raises(TypeError, match="forest"):
        PrunedForest(GradientBoostingRegressor(n_estimators=2).fit(X, y)).fit(X, y)
    with pytest.raises(TypeError, match="forest"):
        forest_kernel(GradientBoostingRegressor(n_estimators=2).fit(X, y), X)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": 119}, "n_components"),
        ({"n_components": 2.5}, "n_components"),
        ({"hidden_layer_sizes": (0,)}, "hidden_layer_sizes"),
        ({"activation": "gelu"}, "activation"),
        ({"target": "labels"}, "target"),
        ({"n_augment": -1}, "n_augment"),
        ({"jitter": -0.1}, "jitter"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"max_epochs": 0}, "max_epochs"),
        ({"batch_size": 0}, "batch_size"),
        ({"component_weights": "equal"}, "component_weights"),
        ({"prefit": "yes", "max_epochs": 1}, "prefit"),
    ],
)
def test_bad_distiller_params(data, rf, params, match):
    X, y, _, _ = data
    with pytest.raises(ValueError, match=match):
        SpectralForestDistiller(rf, **{"prefit": True, **params}).fit(X, y)


def test_bad_arrays(data, rf):
    X, y, _, _ = data
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SpectralForestDistiller(rf, prefit=True).fit(Xn, y)
    with pytest.raises(ValueError, match="features"):
        SpectralForestDistiller(rf, prefit=True).fit(X[:, :3], y)
    d = SpectralForestDistiller(rf, prefit=True, n_components=3, max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        d.predict(X[:, :4])
    with pytest.raises(ValueError, match="rank"):
        d.teacher_predict(X, rank=4)
    with pytest.raises(ValueError, match="features"):
        leaf_membership(rf, X[:, :2])
    with pytest.raises(ValueError, match="y"):
        refit_leaf_values(rf, X, y[:-1])
    sm = TreeSmoother(rf, X)
    with pytest.raises(ValueError, match="Z"):
        sm.matmat(np.ones(5))
    with pytest.raises(ValueError, match="n_components"):
        smoother_spectrum(sm, len(y))
    with pytest.raises(ValueError, match="start"):
        eigen_decay_exponent(np.ones(5), start=0)
    with pytest.raises(ValueError, match="decay_exponent"):
        minimax_rate_exponent(-1.0)
    with pytest.raises(ValueError, match="max_nodes"):
        PrunedForest(rf, max_nodes=0).fit(X, y)
    with pytest.raises(ValueError, match="depths"):
        PrunedForest(rf, max_nodes=10, depths=[-1]).fit(X, y)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    result = assert_quick_verdict("spectral-forests", tmp_path)
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["distilled RF size / RF node count (Friedman1)"]["passed"]
