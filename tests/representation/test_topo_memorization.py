"""Tests for the topological memorization diagnostics (digest: topo-memorization)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import pdist, squareform

from neurips26.harness.testing import assert_quick_verdict
from neurips26.representation.topo_memorization import (
    NoiseSeverityCalibrator,
    TopologicalMemorizationTracker,
    TopologyMonitor,
    activation_variance,
    cohens_d,
    corrupt_labels,
    crossover_epoch,
    diagram_summary,
    grokking_trajectory,
    h1_falls_during_grokking,
    h1_total_persistence,
    leave_one_rate_out_r2,
    modular_addition_data,
    normalize_cloud,
    partial_correlation,
    penultimate_features,
    per_class_h1,
    persistence_diagrams,
    persistence_trajectory,
    stratified_probe_index,
    topological_summary,
    twonn_dimension,
)


def _circle(n, radius=1.0, centre=(0.0, 0.0), noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, n)
    return np.column_stack([np.cos(t), np.sin(t)]) * radius + np.array(centre) + rng.normal(0, noise, (n, 2))


def _long_bars(dgm, min_life):
    return int(((dgm[:, 1] - dgm[:, 0]) > min_life).sum())


# --- persistence -------------------------------------------------------------------------------------------
def test_noisy_circle_has_one_long_h1_bar():
    dgms = persistence_diagrams(_circle(120), maxdim=1, normalize="none")
    assert _long_bars(dgms[1], 0.8) == 1
    life = np.sort(dgms[1][:, 1] - dgms[1][:, 0])[::-1]
    assert life[0] > 1.2 and life[1] < 0.3  # one loop of radius 1 (dies near sqrt(3)), the rest is noise


def test_two_circles_have_two_long_h1_bars():
    X = np.vstack([_circle(100, seed=1), _circle(100, radius=0.7, centre=(4.0, 0.0), seed=2)])
    dgms = persistence_diagrams(X, maxdim=1, normalize="none")
    assert _long_bars(dgms[1], 0.6) == 2
    assert _long_bars(dgms[0][np.isfinite(dgms[0][:, 1])], 1.0) == 1  # and two components


def test_blob_has_no_long_h1_bar():
    X = np.random.default_rng(3).normal(size=(120, 2))
    assert _long_bars(persistence_diagrams(X, normalize="none")[1], 0.8) == 0


_RAND = np.random.default_rng(0).random((10, 2))


def _mst_length(X):
    return float(minimum_spanning_tree(squareform(pdist(X))).sum())


@settings(max_examples=15, deadline=None)
@given(st.integers(5, 40), st.integers(2, 6), st.integers(0, 10_000))
def test_h0_total_persistence_is_mst_length(n, d, seed):
    X = np.random.default_rng(seed).normal(size=(n, d))
    s = topological_summary(X, maxdim=1, normalize="none")
    assert s["h0_total"] == pytest.approx(_mst_length(X), rel=1e-5)
    assert s["h0_count"] == n - 1  # the infinite bar is dropped


@settings(max_examples=10, deadline=None)
@given(st.floats(0.01, 100.0), st.integers(0, 10_000))
def test_l2_normalised_signal_is_scale_invariant(scale, seed):
    X = np.random.default_rng(seed).normal(size=(30, 5))
    a, b = topological_summary(X, normalize="l2"), topological_summary(scale * X, normalize="l2")
    assert a["h1_total"] == pytest.approx(b["h1_total"], rel=1e-5, abs=1e-7)
    assert a["h0_total"] == pytest.approx(b["h0_total"], rel=1e-5)


def test_normalize_cloud_modes():
    X = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(normalize_cloud(X, "l2"), [[0.6, 0.8], [0, 0], [1, 0]])
    assert np.median(pdist(normalize_cloud(X, "median"))) == pytest.approx(1.0)
    np.testing.assert_array_equal(normalize_cloud(X, "none"), X)


def test_diagram_summary_closed_form():
    dgm = np.array([[0.0, 1.0], [0.5, 2.0], [0.2, np.inf]])
    assert diagram_summary(dgm) == {"total": 2.5, "count": 2.0, "max": 1.5}
    assert diagram_summary(np.empty((0, 2))) == {"total": 0.0, "count": 0.0, "max": 0.0}


def test_h1_total_and_per_class():
    X = np.vstack([_circle(60, seed=4), _circle(60, seed=5) + 5])
    labels = np.repeat([0, 1], 60)
    pc = per_class_h1(X, labels, normalize="none")
    single = [h1_total_persistence(X[labels == c], normalize="none") for c in (0, 1)]
    assert pc == pytest.approx(np.mean(single))
    assert pc > 1.0


def test_twonn_recovers_dimension():
    rng = np.random.default_rng(0)
    for d in (2, 5):
        X = np.zeros((1500, 10))
        X[:, :d] = rng.uniform(size=(1500, d))
        assert twonn_dimension(X) == pytest.approx(d, rel=0.15)


def test_partial_correlation_matches_closed_form():
    rng = np.random.default_rng(1)
    z = rng.normal(size=200)
    x, y = z + rng.normal(size=200), 2 * z + rng.normal(size=200)
    r = np.corrcoef([x, y, z])
    expected = (r[0, 1] - r[0, 2] * r[1, 2]) / np.sqrt((1 - r[0, 2] ** 2) * (1 - r[1, 2] ** 2))
    assert partial_correlation(x, y, z) == pytest.approx(expected)


def test_activation_variance_and_cohens_d():
    X = np.array([[0.0, 1.0], [2.0, 1.0]])
    assert activation_variance(X) == pytest.approx(0.5)
    assert cohens_d([1, 2, 3], [1, 2, 3]) == 0.0
    assert cohens_d([3, 4, 5], [1, 2, 3]) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: persistence_diagrams(np.zeros((5, 2)), maxdim=3), "maxdim"),
        (lambda: persistence_diagrams(np.array([[0.0, np.nan], [1, 1]])), "X"),
        (lambda: persistence_diagrams(np.zeros((1, 2))), "at least 2"),
        (lambda: normalize_cloud(np.zeros((4, 2)), "max"), "normalize"),
        (lambda: diagram_summary(np.zeros((3, 3))), "diagram"),
        (lambda: diagram_summary(np.array([[1.0, 0.0]])), "death < birth"),
        (lambda: per_class_h1(np.zeros((6, 2)), np.zeros(5)), "labels"),
        (lambda: per_class_h1(_RAND[:6], np.arange(6)), "min_points"),
        (lambda: twonn_dimension(_RAND, discard_fraction=1.0), "discard_fraction"),
        (lambda: twonn_dimension(np.zeros((10, 2))), "distinct"),
        (lambda: partial_correlation([1, 2, 3, 4], [1, 2, 3], [1, 2, 3, 4]), "equal length"),
        (lambda: partial_correlation([1, 2, 3], [1, 2, 3], [1, 2, 3]), "at least 4"),
        (lambda: activation_variance(np.zeros((0, 3))), "X"),
        (lambda: cohens_d([], [1.0]), "non-empty"),
    ],
)
def test_persistence_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_ripser_options_pass_through():
    X = _circle(80, seed=6)
    full = persistence_diagrams(X, normalize="none")
    diam = pdist(X).max()
    # a threshold beyond the diameter and a "subsample" of every point change nothing
    for d_full, d_thr in zip(full, persistence_diagrams(X, normalize="none", thresh=diam + 1.0)):
        np.testing.assert_allclose(np.sort(d_full, axis=0), np.sort(d_thr, axis=0))
    for d_full, d_perm in zip(full, persistence_diagrams(X, normalize="none", n_perm=80)):
        np.testing.assert_allclose(np.sort(d_full, axis=0), np.sort(d_perm, axis=0))
    # a threshold below the loop's death leaves its bar unfinished (death = inf), so the finite total drops
    life = full[1][:, 1] - full[1][:, 0]
    death = full[1][np.argmax(life), 1]
    cut = persistence_diagrams(X, normalize="none", thresh=0.9 * death)[1]
    assert np.isinf(cut[:, 1]).sum() == 1
    assert topological_summary(X, normalize="none", thresh=0.9 * death)["h1_max"] < life.max()
    # a greedy subsample of 30 points still sees the one loop; H0 then has 30 bars
    sub = persistence_diagrams(X, normalize="none", n_perm=30)
    assert _long_bars(sub[1], 0.8) == 1 and len(sub[0]) == 30
    assert h1_total_persistence(X, normalize="none", n_perm=30) > 1.0


@pytest.mark.parametrize("n_perm", [2, 12, 60, 149])
def test_n_perm_matches_ripser_on_the_full_matrix(n_perm):
    # the oracle is the previous implementation: ripser's own greedy permutation on the full distance matrix
    from ripser import ripser

    X = np.random.default_rng(n_perm).normal(size=(150, 5))
    ours = persistence_diagrams(X, normalize="none", n_perm=n_perm)
    theirs = ripser(squareform(pdist(X)), maxdim=1, distance_matrix=True, n_perm=n_perm)["dgms"]
    # ripser filters in float32: one rounding of distances up to the diameter
    atol = 4 * np.finfo(np.float32).eps * pdist(X).max()
    for d_ours, d_theirs in zip(ours, theirs):
        assert d_ours.shape == d_theirs.shape
        np.testing.assert_allclose(np.sort(d_ours, axis=0), np.sort(d_theirs, axis=0), rtol=0, atol=atol)


def test_n_perm_never_builds_the_full_distance_matrix():
    import tracemalloc

    n, d, k = 4000, 8, 40
    X = np.random.default_rng(0).normal(size=(n, d))
    full_matrix_bytes = 8 * n * n  # 128 MB
    tracemalloc.start()
    try:
        summary = topological_summary(X, normalize="l2", n_perm=k)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert summary["h0_count"] == k - 1
    assert peak < full_matrix_bytes / 20


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"thresh": 0.0}, "thresh"),
        ({"n_perm": 1}, "n_perm"),
        ({"n_perm": 500}, "n_perm"),
        ({"coeff": 4}, "coeff"),
    ],
)
def test_ripser_options_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        persistence_diagrams(_RAND, **kw)


# --- any torch model, hooks and precomputed embeddings ---------------------------------------------------------
def _user_model(n_in=6, n_classes=4):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(n_in, 12),
        torch.nn.Tanh(),
        torch.nn.Linear(12, 5),
        torch.nn.ReLU(),
        torch.nn.Linear(5, n_classes),
    )


def test_penultimate_features_hook_matches_manual_forward():
    model = _user_model()
    X = torch.randn(30, 6)
    want = model[:4](X).detach().numpy()  # the input of the last Linear
    np.testing.assert_allclose(penultimate_features(model, X, batch_size=7), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        penultimate_features(model, X, layer="1"), model[:2](X).detach().numpy(), rtol=1e-5, atol=1e-6
    )
    model.train()
    penultimate_features(model, X)
    assert model.training  # mode restored
    with pytest.raises(ValueError, match="layer"):
        penultimate_features(model, X, layer="head")
    with pytest.raises(ValueError, match="nn.Linear"):
        penultimate_features(torch.nn.Sequential(torch.nn.ReLU()), X)
    with pytest.raises(TypeError, match="model"):
        penultimate_features(lambda x: x, X)


def test_tracker_trains_a_user_model_and_hooks_its_penultimate_layer():
    X, y = _small_data()
    user = _user_model()
    before = [p.detach().clone() for p in user.parameters()]
    tr = _small_tracker(module=user).fit(X, y)
    assert all(torch.equal(a, b) for a, b in zip(before, user.parameters()))  # a copy is trained
    feats = tr.transform(X[tr.probe_index_])
    assert feats.shape == (40, 5)
    np.testing.assert_allclose(
        feats,
        tr.model_[:4](torch.as_tensor(X[tr.probe_index_], dtype=torch.float32)).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
    assert tr.h1_total_[-1] == pytest.approx(h1_total_persistence(feats), rel=1e-5, abs=1e-7)
    assert tr.score(X, y) > 0.5
    named = _small_tracker(module=user, layer="1", n_perm=20).fit(X, y)
    assert named.transform(X[:3]).shape == (3, 12) and named.history_[-1]["n_points"] == 40
    with pytest.raises(ValueError, match="logits"):
        _small_tracker(module=_user_model(n_classes=3)).fit(X, y)
    with pytest.raises(TypeError, match="module"):
        _small_tracker(module="mlp").fit(X, y)
    with pytest.raises(ValueError, match="n_perm"):
        _small_tracker(n_perm=1000).fit(X, y)


def test_precomputed_embeddings_and_monitor_in_a_user_loop():
    rng = np.random.default_rng(2)
    clouds = {e: rng.normal(size=(25, 4)) * (1 + e) for e in (1, 2, 4)}
    hist = persistence_trajectory(clouds, compute_id=False)
    assert [h["epoch"] for h in hist] == [1, 2, 4]
    for h, (_, cloud) in zip(hist, sorted(clouds.items())):
        want = topological_summary(cloud)
        assert h["h1_total"] == pytest.approx(want["h1_total"]) and h["h0_total"] == pytest.approx(
            want["h0_total"]
        )
    seq = persistence_trajectory(list(clouds.values()), epochs=[1, 2, 4], compute_id=False, n_perm=10)
    assert seq[0]["h0_count"] == 9  # greedy subsample of 10 points
    with pytest.raises(ValueError, match="probe size"):
        persistence_trajectory([rng.normal(size=(25, 4)), rng.normal(size=(20, 4))])
    with pytest.raises(ValueError, match="epochs"):
        persistence_trajectory([rng.normal(size=(25, 4))], epochs=[1, 2])
    # a monitor attached to a user's own loop
    model, Xp = _user_model(), torch.randn(30, 6)
    mon = TopologyMonitor(Xp, thresh=10.0)
    for epoch in (1, 2):
        mon.record(epoch, model=model, val_loss=0.5 / epoch)
    assert mon.column("val_loss").tolist() == [0.5, 0.25] and mon.history_[0]["n_points"] == 30
    assert mon.history_[0]["h1_total"] == pytest.approx(h1_total_persistence(penultimate_features(model, Xp)))
    with pytest.raises(ValueError, match="exactly one"):
        mon.record(3)
    with pytest.raises(ValueError, match="probe"):
        TopologyMonitor().record(1, model=model)
    with pytest.raises(ValueError, match="normalize"):
        TopologyMonitor(normalize="max")


# --- noise -------------------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(st.floats(0.0, 1.0), st.sampled_from(["symmetric", "asymmetric"]), st.integers(0, 1000))
def test_corrupt_labels_flips_exact_fraction(rate, kind, seed):
    y = np.random.default_rng(seed).integers(0, 5, 300)
    y_noisy, flipped = corrupt_labels(y, rate, kind, n_classes=5, random_state=seed)
    assert flipped.sum() == round(rate * 300)
    np.testing.assert_array_equal(y_noisy[~flipped], y[~flipped])
    assert (y_noisy[flipped] != y[flipped]).all() and ((0 <= y_noisy) & (y_noisy < 5)).all()
    if kind == "asymmetric":
        np.testing.assert_array_equal(y_noisy[flipped], (y[flipped] + 1) % 5)


def test_symmetric_noise_spreads_over_other_classes():
    y = np.zeros(20000, dtype=int)
    y_noisy, _ = corrupt_labels(y, 0.9, "symmetric", n_classes=10, random_state=0)
    counts = np.bincount(y_noisy, minlength=10)[1:]
    assert counts.min() > 0.85 * counts.mean()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"y": np.array([0, 1]), "noise_rate": 1.5}, "noise_rate"),
        ({"y": np.array([0, 1]), "noise_rate": 0.1, "kind": "pairwise"}, "kind"),
        ({"y": np.array([0, 3]), "noise_rate": 0.1, "n_classes": 3}, "n_classes"),
        ({"y": np.array([]), "noise_rate": 0.1}, "y"),
        ({"y": np.array([0.5, 1.0]), "noise_rate": 0.1}, "y"),
        ({"y": np.array([-1, 1]), "noise_rate": 0.1}, "y"),
    ],
)
def test_corrupt_labels_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        corrupt_labels(**kwargs)


# --- calibration -------------------------------------------------------------------------------------------
def test_calibrator_recovers_exact_log_linear_map():
    eta = np.repeat([0.0, 0.1, 0.2, 0.3, 0.4], 2)
    s = np.exp((eta - 0.05) / 0.3)
    cal = NoiseSeverityCalibrator().fit(s, eta)
    np.testing.assert_allclose(cal.coef_, [0.05, 0.3], atol=1e-12)
    r2, pred = leave_one_rate_out_r2(s, eta)
    assert r2 == pytest.approx(1.0) and np.allclose(pred, eta)


def test_calibrator_isotonic_and_uninformative_signal():
    eta = np.repeat([0.0, 0.2, 0.4], 3)
    assert np.all(
        np.diff(NoiseSeverityCalibrator("isotonic").fit(np.arange(1, 10), eta).predict([1, 5, 9])) >= 0
    )
    r2, _ = leave_one_rate_out_r2(np.ones(9), eta)  # a flat signal cannot predict held-out rates
    assert r2 < 0.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: NoiseSeverityCalibrator("cubic").fit([1.0, 2.0], [0, 1]), "method"),
        (lambda: NoiseSeverityCalibrator().fit([-1.0, 2.0], [0, 1]), "positive"),
        (lambda: NoiseSeverityCalibrator().fit([1.0, 2.0], [0, 1, 2]), "y must have shape"),
        (lambda: NoiseSeverityCalibrator().fit(np.ones((3, 2)), [0, 1, 2]), "one signal column"),
        (lambda: NoiseSeverityCalibrator().fit([1.0], [0.0]), "at least 2"),
        (lambda: NoiseSeverityCalibrator().fit([1.0, np.nan], [0, 1]), "NaN"),
        (lambda: leave_one_rate_out_r2([1.0, 2.0, 3.0], [0.0, 0.1]), "equal length"),
        (lambda: leave_one_rate_out_r2([1.0, 2.0], [0.0, 0.1]), "3 distinct"),
    ],
)
def test_calibration_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- tracker -----------------------------------------------------------------------------------------------
def _small_data(seed=0, n=240):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(4), n // 4)
    X = rng.normal(size=(n, 6)) + 4.0 * np.eye(4, 6)[y]
    return X, y


def _small_tracker(**kw):
    params = dict(
        hidden_sizes=(16, 8),
        epochs=4,
        checkpoints=(1, 4),
        n_probe=40,
        batch_size=32,
        learning_rate=1e-2,
        random_state=0,
    )
    params.update(kw)
    return TopologicalMemorizationTracker(**params)


def test_tracker_records_checkpoints_and_is_deterministic():
    X, y = _small_data()
    y_noisy, flipped = corrupt_labels(y, 0.3, random_state=0)
    state = torch.random.get_rng_state()
    a = _small_tracker().fit(X, y_noisy, X[:50], y[:50], noisy_mask=flipped)
    assert torch.equal(state, torch.random.get_rng_state())  # the global torch RNG is left alone
    b = _small_tracker().fit(X, y_noisy, X[:50], y[:50], noisy_mask=flipped)
    assert list(a.checkpoint_epochs_) == [1, 4] and a.val_loss_curve_.shape == (4,)
    np.testing.assert_array_equal(a.h1_total_, b.h1_total_)
    row = a.history_[-1]
    for key in (
        "h1_total",
        "h0_total",
        "activation_variance",
        "twonn_id",
        "train_acc",
        "val_loss",
        "memorized",
    ):
        assert np.isfinite(row[key])
    feats = a.transform(X[a.probe_index_])
    assert feats.shape == (40, 8)
    assert row["h1_total"] == pytest.approx(h1_total_persistence(feats), rel=1e-5, abs=1e-7)
    assert a.score(X, y) > 0.5  # learns the separable classes despite 30% noise
    assert np.bincount(y_noisy[a.probe_index_]).tolist() == [10, 10, 10, 10]  # stratified on given labels


def test_stratified_probe_index_is_balanced():
    y = np.repeat(np.arange(5), [10, 20, 30, 40, 50])
    idx = stratified_probe_index(y, 23, random_state=1)
    counts = np.bincount(y[idx], minlength=5)
    assert counts.sum() == 23 and counts.max() - counts.min() <= 1 and len(set(idx)) == 23


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"hidden_sizes": ()}, "hidden_sizes"),
        ({"epochs": 0}, "epochs"),
        ({"checkpoints": (5,)}, "checkpoints"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"batch_size": 0}, "batch_size"),
        ({"n_probe": 2}, "n_probe"),
        ({"n_probe": 1000}, "n_probe"),
        ({"normalize": "max"}, "normalize"),
    ],
)
def test_tracker_bad_params(kw, match):
    X, y = _small_data()
    with pytest.raises(ValueError, match=match):
        _small_tracker(**kw).fit(X, y)


def test_tracker_bad_data():
    X, y = _small_data()
    with pytest.raises(ValueError, match="probe_index"):
        _small_tracker().fit(X, y, probe_index=np.array([0, 1, 10_000]))
    with pytest.raises(ValueError, match="noisy_mask"):
        _small_tracker().fit(X, y, noisy_mask=np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match="y_val"):
        _small_tracker().fit(X, y, X_val=X[:5])
    with pytest.raises(ValueError):
        _small_tracker().fit(np.where(np.eye(240, 6) > 0, np.nan, X), y)
    with pytest.raises(ValueError, match="2 classes"):
        _small_tracker().fit(X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="n_probe"):
        stratified_probe_index(y, 1)


def test_crossover_epoch():
    e = [1, 2, 4, 8]
    assert crossover_epoch(e, [5, 4, 2, 1], [3, 3, 3, 3]) == 4.0
    assert np.isnan(crossover_epoch(e, [1, 1, 1, 1], [3, 3, 3, 3]))  # never above: no crossover
    assert np.isnan(crossover_epoch(e, [5, 5, 5, 5], [3, 3, 3, 3]))  # never drops below
    with pytest.raises(ValueError, match="equal length"):
        crossover_epoch(e, [1, 2], [1, 2, 3, 4])


# --- grokking ----------------------------------------------------------------------------------------------
def test_modular_addition_data_and_tiny_run():
    Xtr, ytr, Xte, yte = modular_addition_data(7, 0.4, random_state=0)
    assert len(Xtr) + len(Xte) == 49 and len(Xtr) == round(0.4 * 49)
    np.testing.assert_array_equal(ytr, Xtr.sum(1) % 7)
    assert len({tuple(p) for p in np.vstack([Xtr, Xte])}) == 49
    tr = grokking_trajectory(7, 0.5, steps=4, eval_every=2, n_probe=10, random_state=0)
    assert list(tr["step"]) == [1, 2, 4] and np.isfinite(tr["h1_total"]).all()


def test_h1_falls_during_grokking():
    acc = np.array([0.0, 0.1, 0.5, 0.95])
    assert h1_falls_during_grokking({"test_acc": acc, "h1_total": np.array([5, 5, 3, 2.0])}) is True
    assert h1_falls_during_grokking({"test_acc": acc, "h1_total": np.array([5, 5, 6, 7.0])}) is False
    assert h1_falls_during_grokking({"test_acc": acc * 0.5, "h1_total": np.ones(4)}) is None


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: modular_addition_data(1), "p"),
        (lambda: modular_addition_data(7, 1.0), "train_fraction"),
        (lambda: grokking_trajectory(7, steps=0), "steps"),
        (lambda: grokking_trajectory(7, weight_decay=-1.0), "weight_decay"),
        (lambda: grokking_trajectory(7, learning_rate=0.0), "learning_rate"),
        (lambda: grokking_trajectory(7, 0.4, n_probe=1000), "n_probe"),
    ],
)
def test_grokking_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("topo-memorization", tmp_path)
