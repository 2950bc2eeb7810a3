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
    student_layers_for_budget,
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
    d = SpectralForestDistiller(
        rf, prefit=True, n_components=8, component_selection="top", max_epochs=1, random_state=0
    ).fit(X, y)
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


def test_contribution_selection_matches_dense_oracle(data, rf, gbm):
    """The r pairs with the largest c_j^2 among the leading n_candidates, from a dense eigendecomposition."""
    X, y, Xt, _ = data
    K = forest_kernel(rf, X).toarray()
    lam, V = np.linalg.eigh(K)
    lam, V = lam[::-1][:30], V[:, ::-1][:, :30]
    c = lam * (V.T @ y)
    want = np.argsort(-(c**2), kind="stable")[:6]
    d = SpectralForestDistiller(
        rf, prefit=True, n_components=6, n_candidates=30, max_epochs=1, random_state=0
    )
    d.fit(X, y)
    assert d.component_selection == "contribution"  # the default
    np.testing.assert_array_equal(d.components_, want)
    np.testing.assert_allclose(d.spectrum_, lam[want], atol=1e-8)
    np.testing.assert_allclose(np.abs(d.teacher_coef_), np.abs(c[want]), atol=1e-8)
    # f_r on training points is sum_j c_j v_j over the chosen pairs (sign-free: c_j v_j is sign invariant)
    np.testing.assert_allclose(d.teacher_predict(X, rank=6), V[:, want] @ c[want], atol=1e-8)
    # it keeps at least as much of the smoother's training fit as the top-6 pairs
    top = V[:, :6] @ c[:6]
    assert np.linalg.norm(V[:, want] @ c[want]) >= np.linalg.norm(top) - 1e-12
    g = SpectralForestDistiller(
        gbm, prefit=True, n_components=4, n_candidates=12, max_epochs=1, random_state=0
    )
    g.fit(X, y)
    U, s, Wt = np.linalg.svd(TreeSmoother(gbm, X).dense())
    cg = s[:12] * (Wt[:12] @ y)
    np.testing.assert_array_equal(g.components_, np.argsort(-(cg**2), kind="stable")[:4])


def test_student_is_sklearn_mlp_and_predict_is_its_forward_pass(data, rf):
    """The student is scikit-learn's MLPRegressor; predict is an affine map of its forward pass on scaled X."""
    from sklearn.neural_network import MLPRegressor

    X, y, Xt, _ = data
    d = SpectralForestDistiller(
        rf, prefit=True, n_components=5, hidden_layer_sizes=(7, 6), max_epochs=20, random_state=0
    ).fit(X, y)
    assert isinstance(d.student_, MLPRegressor)
    assert [w.shape for w in d.student_.coefs_] == [(10, 7), (7, 6), (6, 5)]
    h = (Xt - d._x_mean) / d._x_scale  # an independent forward pass from the stored weights
    for i, (W, b) in enumerate(zip(d.student_.coefs_, d.student_.intercepts_)):
        h = h @ W + b
        if i < 2:
            h = np.maximum(h, 0.0)
    np.testing.assert_allclose(d.predict(Xt), h @ d.coef_ + d.intercept_, rtol=1e-10, atol=1e-10)
    assert (
        d.n_parameters_
        == sum(w.size for w in d.student_.coefs_)
        + sum(b.size for b in d.student_.intercepts_)
        + 5
        + 1
        + 2 * 10
    )


def test_student_learns_the_eigenfunctions(data, rf):
    """With enough epochs the student's transform tracks the teacher's Nystrom eigenfunctions on train."""
    X, y, _, _ = data
    d = SpectralForestDistiller(
        rf,
        prefit=True,
        n_components=3,
        component_selection="top",
        component_weights="uniform",
        hidden_layer_sizes=(64, 64),
        max_epochs=400,
        batch_size=64,
        n_augment=0,
        random_state=0,
    ).fit(X, y)
    G, P = d.transform(X), d.teacher_transform(X)
    for j in range(1, 3):  # j = 0 is the constant mode
        assert np.corrcoef(G[:, j], P[:, j])[0, 1] > 0.9


def test_n_init_keeps_the_student_closest_to_the_teacher(data, rf):
    X, y, _, _ = data
    kw = dict(prefit=True, n_components=5, hidden_layer_sizes=(8, 8), max_epochs=15, random_state=4)
    one = SpectralForestDistiller(rf, **kw).fit(X, y)
    three = SpectralForestDistiller(rf, n_init=3, **kw).fit(X, y)
    # the first initialisation is the same in both, so the best of three is at least as close to the teacher
    assert three.distillation_mse_ <= one.distillation_mse_
    assert three.distillation_mse_ > 0


def test_student_layers_for_budget_is_the_widest_fitting_width():
    for p, r, budget in [(10, 20, 2260), (10, 20, 246), (8, 20, 3000), (3, 5, 40)]:
        layers = student_layers_for_budget(p, r, budget)
        w = layers[0]
        size = mlp_parameter_count(p, layers, r) + r + 1 + 2 * p
        assert layers == (w, w) and size <= budget and w <= 32
        if w < 32:
            assert mlp_parameter_count(p, (w + 1, w + 1), r) + r + 1 + 2 * p > budget
    assert student_layers_for_budget(10, 20, 10**6) == (32, 32)
    with pytest.raises(ValueError, match="max_parameters"):
        student_layers_for_budget(10, 20, 50)
    with pytest.raises(ValueError, match="n_components"):
        student_layers_for_budget(10, 0, 500)


def test_fair_data_set_is_statsmodels_affairs():
    pytest.importorskip("statsmodels")
    from neurips26.trees.spectral_forests.experiment import load_dataset

    X, y = load_dataset("fair", 10**6, seed=0)
    assert X.shape == (6366, 8) and y.shape == (6366,)
    assert y.min() == 0.0 and np.isfinite(X).all()
    Xs, ys = load_dataset("fair", 500, seed=1)
    assert Xs.shape == (500, 8)
    with pytest.raises(ValueError, match="data set"):
        load_dataset("adult", 100, 0)


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


def _greedy_reference(rf, X, y, max_nodes, depths):
    """Per-node, per-tree loops: truncated tree predictions, node counts and the greedy forward selection."""
    preds_by_depth, sizes_by_depth = {}, {}
    for d in depths:
        P, S = [], []
        for t in rf.estimators_:
            tr = t.tree_
            depth = {0: 0}
            for node in range(tr.node_count):  # preorder: parents first
                for child in (tr.children_left[node], tr.children_right[node]):
                    if child >= 0:
                        depth[child] = depth[node] + 1
            S.append(sum(1 for v in depth.values() if v <= d))
            out = []
            for x in X:
                node = 0
                while tr.children_left[node] >= 0 and depth[node] < d:
                    go_left = x[tr.feature[node]] <= tr.threshold[node]
                    node = tr.children_left[node] if go_left else tr.children_right[node]
                out.append(tr.value[node, 0, 0])
            P.append(out)
        preds_by_depth[d], sizes_by_depth[d] = np.array(P).T, np.array(S)
    best = (np.inf, None, None)
    for d in depths:
        P, S = preds_by_depth[d], sizes_by_depth[d]
        chosen, total = [], 0
        while True:
            cands = [b for b in range(P.shape[1]) if b not in chosen and total + S[b] <= max_nodes]
            if not cands:
                break
            mses = {b: np.mean((P[:, chosen + [b]].mean(axis=1) - y) ** 2) for b in cands}
            b = min(cands, key=lambda c: (mses[c], c))
            chosen.append(b)
            total += S[b]
            if mses[b] < best[0]:
                best = (mses[b], d, list(chosen))
    return best


def test_pruned_forest_greedy_matches_loop_reference(data, rf):
    X, y, Xt, yt = data
    for budget in (40, 150):
        p = PrunedForest(rf, max_nodes=budget, depths=[1, 2, 3, 5]).fit(Xt, yt)
        mse, depth, trees = _greedy_reference(rf, Xt, yt, budget, [1, 2, 3, 5])
        assert (p.depth_, p.trees_) == (depth, trees)
        assert p.val_mse_ == pytest.approx(mse, rel=1e-9)


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

    class NeverFit(RandomForestClassifier):  # records a fit: the type check must come first
        def fit(self, *args, **kwargs):
            raise AssertionError("fitted before the type check")

    with pytest.raises(TypeError, match="estimator"):
        SpectralForestDistiller(NeverFit()).fit(X, y)
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


def _stored_student_numbers(d, n_inputs: int) -> int:
    """Numbers the distilled student keeps, counted from the fitted arrays (not from a formula)."""
    mlp = sum(w.size for w in d.student_.coefs_) + sum(b.size for b in d.student_.intercepts_)
    return mlp + d.coef_.size + 1 + 2 * n_inputs  # output coefficients, intercept, input scaler


@pytest.mark.parametrize("target", ["spectral", "direct"])
def test_default_student_meets_the_one_percent_budget(target):
    # the digest's budget: the student stores at most 1/100 of the forest's node count
    X, y = make_friedman1(600, noise=1.0, random_state=1)
    d = SpectralForestDistiller(target=target, max_epochs=5, random_state=0).fit(X, y)
    stored = _stored_student_numbers(d, X.shape[1])
    assert stored == d.n_parameters_ <= 0.01 * d.teacher_nodes_
    width = d.hidden_layer_sizes_[0]
    assert d.hidden_layer_sizes_ == (width, width) and 1 <= width <= 32
    if width < 32:  # the widest: one unit more per layer would break the budget
        r = d.coef_.size
        wider = (
            (X.shape[1] + 1) * (width + 1)
            + (width + 2) * (width + 1)
            + (width + 2) * r
            + r
            + 1
            + 2 * X.shape[1]
        )
        assert wider > 0.01 * d.teacher_nodes_


def test_a_teacher_too_small_for_the_budget_warns_and_takes_the_2x32_student(data, gbm):
    X, y, _, _ = data
    with pytest.warns(UserWarning, match="max_size_ratio"):
        d = SpectralForestDistiller(gbm, prefit=True, n_components=5, max_epochs=3, random_state=0).fit(X, y)
    assert d.hidden_layer_sizes_ == (32, 32)
    assert d.n_parameters_ > 0.01 * d.teacher_nodes_
    roomy = SpectralForestDistiller(gbm, prefit=True, n_components=5, max_size_ratio=2.0, max_epochs=3).fit(
        X, y
    )
    assert roomy.n_parameters_ <= 2.0 * roomy.teacher_nodes_


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
        ({"component_selection": "largest"}, "component_selection"),
        ({"n_components": 10, "n_candidates": 5}, "n_candidates"),
        ({"n_candidates": 200}, "n_candidates"),
        ({"alpha": -1.0}, "alpha"),
        ({"n_init": 0}, "n_init"),
        ({"prefit": "yes", "max_epochs": 1}, "prefit"),
        ({"hidden_layer_sizes": "big"}, "hidden_layer_sizes"),
        ({"max_size_ratio": 0.0}, "max_size_ratio"),
        ({"max_size_ratio": float("nan")}, "max_size_ratio"),
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
    with pytest.raises(ValueError, match="depths"):
        PrunedForest(rf, max_nodes=10, depths=["a"]).fit(X, y)
    pf = PrunedForest(rf, max_nodes=100).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        pf.predict(X[:, :4])
    with pytest.raises(ValueError, match="NaN"):
        pf.predict(Xn)
    with pytest.raises(ValueError, match="features"):
        d.transform(X[:, :4])
    with pytest.raises(ValueError, match="features"):
        d.teacher_transform(X[:, :4])
    with pytest.raises(ValueError, match="NaN"):
        d.teacher_predict(Xn)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        PrunedForest(rf).predict(X)
    with pytest.raises(NotFittedError):
        SpectralForestDistiller(rf, prefit=True).transform(X)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    result = assert_quick_verdict("spectral-forests", tmp_path)
    checks = {c["id"]: c for c in result["checks"]}
    assert checks["size_ratio_max"]["measured"] <= 0.01
