"""ObsAlign: sketches are sufficient (brute-force oracles), o_r follows its closed form, lies in [0, 1] and falls
as planted evidence is removed, the federated loop runs on user sources, bad input, and the quick verdict."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.harness.testing import assert_quick_verdict
from neurips26.multimodal import (
    ObsAlign,
    Source,
    compute_sketch,
    make_bundled_sources,
    make_planted_sources,
    observability,
)


def _random(n=90, K=3, C=4, d=5, seed=0):
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, K, d))
    obs = rng.random((n, K)) < 0.6
    obs[:, 0] |= ~obs.any(1)
    return emb, obs, rng.integers(0, C, n)


def test_sketch_matches_brute_force_statistics():
    emb, obs, y = _random()
    sk = compute_sketch(emb, obs, y, 4)
    for m in range(3):
        for c in range(4):
            rows = obs[:, m] & (y == c)
            assert sk.counts[m, c] == rows.sum()
            if rows.any():
                np.testing.assert_allclose(sk.prototypes[m, c], emb[rows, m].mean(0), atol=1e-12)
            for j in range(3):
                both = obs[:, m] & obs[:, j] & (y == c)
                cos = [
                    a @ b / np.linalg.norm(a) / np.linalg.norm(b) for a, b in zip(emb[both, m], emb[both, j])
                ]
                assert sk.pair_counts[m, j, c] == both.sum()
                assert sk.pair_cos[m, j, c] == pytest.approx(sum(cos), abs=1e-10)


def test_server_aggregates_of_sketches_equal_pooled_data():
    emb, obs, y = _random(n=120, seed=1)
    parts = np.array_split(np.random.default_rng(2).permutation(120), 4)
    sketches = [compute_sketch(emb[p], obs[p], y[p], 4) for p in parts]
    total = sketches[0] + sketches[1] + sketches[2] + sketches[3]
    pooled = compute_sketch(emb, obs, y, 4)
    for f in ("counts", "sums", "sq_norms", "pair_counts", "pair_cos"):
        np.testing.assert_allclose(getattr(total, f), getattr(pooled, f), atol=1e-10)
    # the pooled statistics the server uses do not depend on how rows are split over sources
    a = observability(sketches, lam=1.0)
    b = observability([pooled], lam=1.0)
    np.testing.assert_allclose(a.bridge, b.bridge)
    np.testing.assert_allclose(a.side, b.side)
    assert sketches[0].n_bytes < emb[parts[0]].nbytes * 10  # O(K^2 C d), not O(n)


def test_observability_closed_form_on_one_consistent_source():
    # one source, 2 modalities, every row observes both and has f_0 = f_1 (cosine 1, no between-source spread)
    rng = np.random.default_rng(0)
    n, d = 30, 4
    f = rng.normal(size=(n, d))
    emb = np.stack([f, f], 1)
    y = np.zeros(n, int)
    rep = observability([compute_sketch(emb, np.ones((n, 2), bool), y, 1)], lam=0.5, rho_side=0.3)
    b = n / (n + 20)
    a = n / (n + 20)
    within = (f**2).sum(1).mean() / d - (f.mean(0) ** 2).sum() / d  # per-dimension variance
    U = within / n
    expected = (b + (1 - b) * 0.3 * a) * 1.0 * np.exp(-(2 * U) / (2 * 0.5))
    assert rep.o[0, 1, 0] == pytest.approx(expected, rel=1e-9)
    assert rep.consistency[0, 1, 0] == pytest.approx(1.0)


def test_o_falls_as_planted_bridge_evidence_is_removed():
    rng = np.random.default_rng(3)
    n, d = 200, 6
    proto = rng.normal(size=(2, d))
    y = np.repeat([0, 1], n // 2)
    emb = np.stack([proto[y] + 0.1 * rng.normal(size=(n, d)), proto[y] + 0.1 * rng.normal(size=(n, d))], 1)
    values = []
    for keep in (100, 50, 20, 5, 0):
        obs = np.ones((n, 2), bool)
        obs[np.flatnonzero(y == 1)[keep:], 1] = False  # class 1 loses its co-observations of modality 1
        rep = observability([compute_sketch(emb, obs, y, 2)], lam=1.0)
        values.append(rep.o[0, 1, 1])
        assert rep.o[0, 1, 0] == pytest.approx(
            observability([compute_sketch(emb, np.ones((n, 2), bool), y, 2)], lam=1.0).o[0, 1, 0]
        )
    assert all(a > b for a, b in zip(values, values[1:]))
    # no bridge at all: consistency is unobserved (k = 1/2), only the weak side-support term rho * a remains
    rep = observability([compute_sketch(emb, obs, y, 2)], lam=1.0)
    assert rep.bridge[0, 1, 1] == 0.0 and rep.consistency[0, 1, 1] == 0.5
    n1 = 100  # class 1 still observes both modalities, apart
    assert values[-1] == pytest.approx(0.3 * n1 / (n1 + 20) * 0.5 * rep.certainty[0, 1, 1], rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 4), st.integers(1, 4))
def test_o_lies_in_the_unit_interval_and_is_symmetric(seed, K, C):
    emb, obs, y = _random(n=40, K=K, C=C, seed=seed)
    rep = observability(
        [compute_sketch(emb[:20], obs[:20], y[:20], C), compute_sketch(emb[20:], obs[20:], y[20:], C)]
    )
    assert np.all((rep.o >= 0) & (rep.o <= 1))
    np.testing.assert_allclose(rep.o, rep.o.transpose(1, 0, 2))


@pytest.fixture(scope="module")
def planted():
    return make_planted_sources(12, seed=0)


def test_federated_loop_fits_and_predicts_every_source(planted):
    train, test = planted
    model = ObsAlign(rounds=3, random_state=0).fit(train)
    assert model.modalities_ == ["m0", "m1", "m2"] and model.n_classes_ == 10
    for i, s in enumerate(test):
        p = model.predict_proba(s.views, i)
        np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-5)
    acc = np.mean([np.mean(model.predict(s.views, i) == s.y) for i, s in enumerate(test)])
    assert acc > 0.3  # 10 classes: chance is 0.1
    assert model.sketches_[0].counts.sum() == 3 * len(train[0].y)  # source 0 observes all 3 modalities


def _tiny_federation(seed=0):
    """Three sources, two modalities, two classes: A and C observe m0 and m1, B observes m0 only."""
    rng = np.random.default_rng(seed)
    out = []
    for name, shift, both in (("A", 0.0, True), ("B", 0.3, False), ("C", 1.5, True)):
        y = np.repeat([0, 1], 12)
        views = {"m0": (rng.normal(size=(24, 3)) + y[:, None] + shift).astype(np.float32)}
        if both:
            views["m1"] = (rng.normal(size=(24, 2)) - y[:, None] + shift).astype(np.float32)
        out.append(Source(views, y, name=name))
    return out


def _by_hand(model, sources):
    """Per-source embeddings of the fitted encoders, and the global / per-source (m1, c) prototypes."""
    import torch

    emb = {}
    with torch.no_grad():
        for s in sources:
            emb[s.name] = {
                m: model.net_.encoders[i](torch.as_tensor(s.views[m])).numpy()
                for i, m in enumerate(model.modalities_)
                if m in s.views
            }
    own = {s.name: [emb[s.name]["m1"][s.y == c].mean(0) for c in (0, 1)] for s in sources if "m1" in s.views}
    glob = [
        np.concatenate([emb[s.name]["m1"][s.y == c] for s in sources if "m1" in s.views]).mean(0)
        for c in (0, 1)
    ]
    return emb, own, glob


@pytest.mark.parametrize("theta", [0.0, 1.0])
def test_consolidation_by_hand_on_a_tiny_federation(theta):
    sources = _tiny_federation()
    model = ObsAlign(theta=theta, rounds=2, d=4, hidden=8, random_state=0).fit(sources)
    o = model.observability_.o
    assert 0 < o[0, 1].min() and o[0, 1].max() < 1  # off-diagonal observability is never 1
    emb, own, glob = _by_hand(model, sources)
    TB = model.transfer_[1].numpy()  # source B never observes m1
    if theta == 1.0:
        # nothing reaches theta = 1: B receives no transfer into m1, A and C impute from their own prototypes
        assert not model.consolidated_.any()
        assert np.all(TB[:, 1] == 0)
        for i, name in ((0, "A"), (2, "C")):
            for c in (0, 1):
                np.testing.assert_allclose(model.protos_[i][0, 1, c].numpy(), own[name][c], atol=1e-5)
    else:
        # everything is consolidated: B imputes m1 from the pooled (A and C) prototype, weighted by o
        assert model.consolidated_[0, 1].all() and model.consolidated_[1, 0].all()
        np.testing.assert_allclose(TB[0, 1], o[0, 1], rtol=1e-6)
        for c in (0, 1):
            np.testing.assert_allclose(model.protos_[1][0, 1, c].numpy(), glob[c], atol=1e-5)
    assert np.all(TB[[0, 1], [0, 1]] == 0)  # never a transfer on the diagonal
    # B's prediction by hand: observed mean plus the gated, posterior-weighted prototype of m1
    import torch

    with torch.no_grad():
        f0 = emb["B"]["m0"]
        clf = model.net_.classifier
        logits = clf(torch.as_tensor(f0)).numpy()
        post = np.exp(logits - logits.max(1, keepdims=True))
        post /= post.sum(1, keepdims=True)
        w = post @ TB[0, 1]  # (n,)
        imputed = sum(post[:, [c]] * TB[0, 1, c] * model.protos_[1][0, 1, c].numpy() for c in (0, 1))
        z = (f0 + imputed) / (1 + w[:, None])
        expected = torch.softmax(clf(torch.as_tensor(z, dtype=torch.float32)), 1).numpy()
    np.testing.assert_allclose(model.predict_proba(sources[1].views, 1), expected, atol=1e-5)


def test_theta_changes_what_is_transferred(planted):
    train, test = planted
    kw = dict(rounds=2, random_state=0)
    low, high = ObsAlign(theta=0.0, **kw).fit(train), ObsAlign(theta=1.0, **kw).fit(train)
    assert low.consolidated_.sum() > 0 and high.consolidated_.sum() == 0
    # source 4 observes m0 only: at theta = 1 it receives nothing into m1 and m2, at theta = 0 it does
    assert float(high.transfer_[4][:, 1:].abs().max()) == 0.0
    assert float(low.transfer_[4][0, 1:].abs().sum()) > 0
    p_low, p_high = low.predict_proba(test[4].views, 4), high.predict_proba(test[4].views, 4)
    assert np.abs(p_low - p_high).max() > 1e-3


def test_uniform_and_no_alignment_baselines_gate_as_defined(planted):
    train, _ = planted
    uni = ObsAlign("uniform", rounds=1).fit(train)
    none = ObsAlign("none", rounds=1).fit(train)
    assert float(uni.align_.min()) == 1.0 and float(none.align_.abs().max()) == 0.0
    assert float(none.transfer_[2].abs().max()) == 0.0
    # source 2 misses modality 2: under uniform transfer it imputes it from the global prototypes
    assert float(uni.transfer_[2][0, 2].max()) == 1.0
    assert uni.consolidated_.sum() == 3 * 2 * 10  # every off-diagonal relation uses the global prototype


def test_partially_missing_rows_and_bundled_views():
    train, test = make_bundled_sources("breast_cancer", seed=0)
    views = dict(train[0].views)
    views["m1"] = views["m1"].copy()
    views["m1"][:5] = np.nan  # five rows miss modality 1
    train[0] = Source(views, train[0].y, name="with holes")
    model = ObsAlign(rounds=2).fit(train)
    assert model.n_classes_ == 2
    assert model.predict(test[0].views, 0).shape == test[0].y.shape


def test_bad_input_is_rejected(planted):
    train, test = planted
    with pytest.raises(ValueError, match="gate"):
        ObsAlign("mean").fit(train)
    with pytest.raises(ValueError, match="rounds"):
        ObsAlign(rounds=0).fit(train)
    with pytest.raises(ValueError, match="theta"):
        ObsAlign(theta=1.5).fit(train)
    with pytest.raises(ValueError, match="non-empty"):
        ObsAlign().fit([])
    with pytest.raises(ValueError, match="mismatched modality sets"):
        bad = Source({"m0": np.zeros((4, 3), np.float32)}, np.zeros(4, int), name="narrow")
        ObsAlign(rounds=1).fit([train[0], bad])
    with pytest.raises(ValueError, match="empty"):
        ObsAlign(rounds=1).fit([train[0], Source({"m0": np.zeros((0, 12))}, np.zeros(0, int), name="void")])
    with pytest.raises(ValueError, match="y must hold non-negative"):
        ObsAlign(rounds=1).fit([Source(train[0].views, -np.ones(len(train[0].y), int))])
    with pytest.raises(RuntimeError, match="not fitted"):
        ObsAlign().predict(test[0].views)
    model = ObsAlign(rounds=1).fit(train)
    with pytest.raises(ValueError, match="source"):
        model.predict(test[0].views, source=9)
    with pytest.raises(ValueError, match="mismatched modality sets"):
        model.predict({"m7": np.zeros((2, 12))}, 0)
    inf_views = {k: v.copy() for k, v in train[0].views.items()}
    inf_views["m1"][:, 0] = np.inf
    with pytest.raises(ValueError, match="view 'm1' holds infinite"):
        ObsAlign(rounds=1).fit([Source(inf_views, train[0].y)])
    with pytest.raises(ValueError, match="theta"):
        ObsAlign(theta=float("nan")).fit(train)


def test_sketch_and_observability_reject_bad_input():
    emb, obs, y = _random()
    with pytest.raises(ValueError, match="embeddings"):
        compute_sketch(emb[0], obs, y, 4)
    with pytest.raises(ValueError, match="observed"):
        compute_sketch(emb, obs[:, :2], y, 4)
    with pytest.raises(ValueError, match="y must"):
        compute_sketch(emb, obs, y + 10, 4)
    with pytest.raises(ValueError, match="n_classes"):
        compute_sketch(emb, obs, y, 0)
    sk = compute_sketch(emb, obs, y, 4)
    with pytest.raises(ValueError, match="at least one"):
        observability([])
    with pytest.raises(ValueError, match="eta"):
        observability([sk], eta=0)
    with pytest.raises(ValueError, match="rho_side"):
        observability([sk], rho_side=2)
    neg = compute_sketch(emb, obs, y, 4)
    neg.counts[0, 0] = -3
    with pytest.raises(ValueError, match="negative counts"):
        observability([neg])
    with pytest.raises(ValueError, match="shapes differ"):
        _ = sk + compute_sketch(emb[:, :2], obs[:, :2], y, 4)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("obsalign", tmp_path)
