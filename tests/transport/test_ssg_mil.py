"""Tests of Sparse Support Grounding MIL: UOT against POT, retained mass, grounding weights, estimators, data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.harness.testing import assert_quick_verdict
from neurips26.transport.ssg_mil import (
    AttentionMIL,
    MILNet,
    SparseSupportGroundingMIL,
    check_bags,
    digits_bags,
    grounding_weights,
    pad_bags,
    retained_mass,
    support_retained_mass,
    synthetic_bags,
    unbalanced_sinkhorn_log,
)

ot = pytest.importorskip("ot")


def _problem(seed, n=7, s=5, scale=2.0):
    rng = np.random.default_rng(seed)
    a = rng.random(n) + 0.1
    b = rng.random(s) + 0.1
    return a / a.sum(), b / b.sum() * rng.uniform(0.5, 1.5), rng.random((n, s)) * scale


@pytest.mark.parametrize("method", ["log", "scaling"])
@pytest.mark.parametrize("eps,rho", [(0.05, 0.5), (0.1, 2.0), (0.5, 0.1), (0.05, 0.1)])
def test_unbalanced_plan_equals_pot(method, eps, rho):
    a, b, C = _problem(int(eps * 100 + rho * 10))
    P = unbalanced_sinkhorn_log(
        torch.tensor(a), torch.tensor(b), torch.tensor(C), eps, rho, n_iter=20000, tol=1e-14, method=method
    ).numpy()
    Q = ot.unbalanced.sinkhorn_unbalanced(a, b, C, eps, rho, numItermax=200000, stopThr=1e-15)
    np.testing.assert_allclose(P, Q, atol=1e-10)


def test_balanced_limit_matches_pot_sinkhorn():
    a, b, C = _problem(3)
    b = b / b.sum()
    P = unbalanced_sinkhorn_log(
        torch.tensor(a), torch.tensor(b), torch.tensor(C), 0.1, math.inf, n_iter=20000, tol=1e-14
    ).numpy()
    Q = ot.sinkhorn(a, b, C, 0.1, numItermax=200000, stopThr=1e-14)
    np.testing.assert_allclose(P, Q, atol=1e-9)
    np.testing.assert_allclose(retained_mass(torch.tensor(P), torch.tensor(a)).numpy(), 1.0, atol=1e-6)


def test_batched_and_padded_plans_equal_single_problems():
    a1, b1, C1 = _problem(1, 6, 4)
    a2, b2, C2 = _problem(2, 6, 4)
    a2[4:] = 0.0  # padding rows
    b2[3:] = 0.0  # padding column
    A = torch.tensor(np.stack([a1, a2]))
    B = torch.tensor(np.stack([b1, b2]))
    C = torch.tensor(np.stack([C1, C2]))
    P = unbalanced_sinkhorn_log(A, B, C, 0.1, 0.5, n_iter=5000, tol=1e-13)
    Q1 = ot.unbalanced.sinkhorn_unbalanced(a1, b1, C1, 0.1, 0.5, numItermax=100000, stopThr=1e-15)
    Q2 = ot.unbalanced.sinkhorn_unbalanced(
        a2[:4], b2[:3], C2[:4, :3], 0.1, 0.5, numItermax=100000, stopThr=1e-15
    )
    np.testing.assert_allclose(P[0].numpy(), Q1, atol=1e-10)
    np.testing.assert_allclose(P[1, :4, :3].numpy(), Q2, atol=1e-10)
    assert float(P[1, 4:].abs().max()) == 0.0 and float(P[1, :, 3:].abs().max()) == 0.0


def test_mass_is_destroyed_where_cost_is_high():
    a = torch.full((2,), 0.5, dtype=torch.float64)
    b = torch.ones(1, dtype=torch.float64)
    C = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
    r = retained_mass(unbalanced_sinkhorn_log(a, b, C, 0.05, 0.1, n_iter=2000), a)
    assert r[0] > 0.9 and r[1] < 0.01


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.05, 0.2, 1.0]), st.sampled_from([0.1, 0.5, 2.0, math.inf]))
def test_retained_mass_in_unit_interval(seed, eps, rho):
    rng = np.random.default_rng(seed)
    n, s = rng.integers(1, 9), rng.integers(1, 9)
    a = torch.tensor(rng.random(n) + 1e-3)
    b = torch.tensor(rng.random(s) + 1e-3)
    C = torch.tensor(rng.random((n, s)) * 2)
    P = unbalanced_sinkhorn_log(a, b, C, eps, rho, n_iter=200)
    r = retained_mass(P, a)
    assert torch.isfinite(P).all() and (P >= 0).all()
    assert ((r >= 0) & (r <= 1)).all()
    raw = retained_mass(P, a, clip=False)
    np.testing.assert_allclose(r.numpy(), np.minimum(raw.numpy(), 1.0))


def test_uot_bad_inputs():
    a, b, C = (torch.tensor(x) for x in _problem(0))
    with pytest.raises(ValueError, match="eps"):
        unbalanced_sinkhorn_log(a, b, C, eps=0.0)
    with pytest.raises(ValueError, match="rho"):
        unbalanced_sinkhorn_log(a, b, C, rho=-1.0)
    with pytest.raises(ValueError, match="n_iter"):
        unbalanced_sinkhorn_log(a, b, C, n_iter=0)
    with pytest.raises(ValueError, match="method"):
        unbalanced_sinkhorn_log(a, b, C, method="newton")
    with pytest.raises(ValueError, match="shape"):
        unbalanced_sinkhorn_log(a[:-1], b, C)
    with pytest.raises(ValueError, match="non-negative"):
        unbalanced_sinkhorn_log(-a, b, C)
    with pytest.raises(ValueError, match="finite"):
        unbalanced_sinkhorn_log(a, b, C * float("nan"))
    with pytest.raises(ValueError, match="scaling"):
        unbalanced_sinkhorn_log(a, b, C * 100, eps=0.01, method="scaling")
    with pytest.raises(ValueError, match="a must have shape"):
        retained_mass(torch.ones(3, 2), torch.ones(2))


def test_support_retained_mass_and_grounding_weights():
    # bag: instance 0 equals a label-consistent support point, instance 1 a label-inconsistent one
    e = torch.eye(4, dtype=torch.float64)
    h = e[[0, 1, 2]].unsqueeze(0)
    mask = torch.tensor([[True, True, False]])
    r_plus = support_retained_mass(h, mask, e[[0]], torch.ones(1, 1, dtype=torch.bool), 0.05, 0.1)
    r_minus = support_retained_mass(h, mask, e[[1]], torch.ones(1, 1, dtype=torch.bool), 0.05, 0.1)
    assert r_plus[0, 0] > 0.9 and r_plus[0, 1] < 0.2 and r_plus[0, 2] == 0
    w = grounding_weights(r_plus, r_minus, mask)
    np.testing.assert_allclose(w.numpy(), [[1.0, 0.0, 0.0]], atol=1e-6)
    # r+ only: normalised retained mass; an empty support gives no grounding at all
    w_plus = grounding_weights(r_plus, None, mask)
    assert abs(float(w_plus.sum()) - 1) < 1e-9 and w_plus[0, 1] > 0
    empty = support_retained_mass(h, mask, e[[0]], torch.zeros(1, 1, dtype=torch.bool))
    assert float(empty.abs().max()) == 0.0
    assert float(grounding_weights(empty, empty, mask).abs().max()) == 0.0
    with pytest.raises(ValueError, match="support"):
        support_retained_mass(h, mask, e[:, :3], torch.ones(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask"):
        support_retained_mass(h, mask[:, :2], e[[0]], torch.ones(1, 1, dtype=torch.bool))


def test_milnet_ignores_padding():
    torch.manual_seed(0)
    bags = [np.random.default_rng(0).normal(size=(5, 3)), np.random.default_rng(1).normal(size=(2, 3))]
    X, mask = pad_bags(bags)
    for pooling in ("gated", "attention", "mean", "max"):
        net = MILNet(3, 8, 4, pooling)
        full = net(X, mask)["bag_logit"]
        alone = net(torch.as_tensor(bags[1], dtype=torch.float32)[None], torch.ones(1, 2, dtype=torch.bool))
        X2 = X.clone()
        X2[1, 2:] = 100.0  # garbage in padding must not matter
        np.testing.assert_allclose(net(X2, mask)["bag_logit"].detach(), full.detach(), atol=1e-6)
        np.testing.assert_allclose(alone["bag_logit"].detach()[0], full.detach()[1], atol=1e-5)
    with pytest.raises(ValueError, match="pooling"):
        MILNet(3, pooling="sum")


def _toy(n=40, seed=0):
    data = synthetic_bags(n, "sparse", n_features=16, noise=0.3, random_state=seed)
    return data


def test_estimators_fit_predict_and_localise():
    data = _toy(60)
    from sklearn.metrics import roc_auc_score

    for model in (
        AttentionMIL("gated", epochs=15, random_state=0),
        SparseSupportGroundingMIL(epochs=15, warmup_epochs=3, memory_size=8, random_state=0),
    ):
        model.fit(data.bags, data.y)
        proba = model.predict_proba(data.bags)
        assert proba.shape == (60, 2) and np.allclose(proba.sum(1), 1)
        assert set(np.unique(model.predict(data.bags))) <= {0, 1}
        assert roc_auc_score(data.y, model.decision_function(data.bags)) > 0.7
        scores = model.instance_scores(data.bags)
        assert [len(s) for s in scores] == [len(b) for b in data.bags]
    w = model.grounding(data.bags, data.y)
    assert all(np.all(wi >= 0) and (wi.sum() == 0 or abs(wi.sum() - 1) < 1e-5) for wi in w)
    assert model.memory_valid_[0].any() and model.memory_valid_[1].any()
    # determinism
    again = SparseSupportGroundingMIL(epochs=15, warmup_epochs=3, memory_size=8, random_state=0).fit(
        data.bags, data.y
    )
    np.testing.assert_allclose(again.decision_function(data.bags), model.decision_function(data.bags))


def test_balanced_ablation_gives_uniform_weights():
    data = _toy(30)
    model = SparseSupportGroundingMIL(
        transport="balanced", epochs=3, warmup_epochs=1, memory_size=8, random_state=0
    ).fit(data.bags, data.y)
    for wi in model.grounding(data.bags, data.y):
        np.testing.assert_allclose(wi, 1.0 / len(wi), rtol=1e-3)


def test_bad_bags_raise():
    good = [np.zeros((3, 4)), np.ones((2, 4))]
    with pytest.raises(ValueError, match="empty"):
        check_bags([np.zeros((0, 4)), np.ones((2, 4))], [0, 1])
    with pytest.raises(ValueError, match="n_features"):
        check_bags([np.zeros((3, 4)), np.ones((2, 5))], [0, 1])
    with pytest.raises(ValueError, match=r"\{0, 1\}"):
        check_bags(good, [0, 2])
    with pytest.raises(ValueError, match="y must be"):
        check_bags(good, [0])
    with pytest.raises(ValueError, match="NaN"):
        check_bags([np.full((2, 4), np.nan), np.ones((2, 4))])
    with pytest.raises(ValueError, match="non-empty list"):
        check_bags([])
    with pytest.raises(ValueError, match="2-D"):
        check_bags([np.zeros(4)])
    for model in (AttentionMIL(epochs=1), SparseSupportGroundingMIL(epochs=1)):
        with pytest.raises(ValueError, match="empty"):
            model.fit([np.zeros((0, 4)), np.ones((2, 4))], [0, 1])
        with pytest.raises(ValueError, match="n_features"):
            model.fit([np.zeros((3, 4)), np.ones((2, 5))], [0, 1])
        with pytest.raises(ValueError, match=r"\{0, 1\}"):
            model.fit(good, [1, -1])
        with pytest.raises(ValueError, match="both bag labels"):
            model.fit(good, [1, 1])
        with pytest.raises(RuntimeError, match="not fitted"):
            model.predict(good)
        model.fit(good, [0, 1])
        with pytest.raises(ValueError, match="n_features"):
            model.predict([np.zeros((3, 5))])
        with pytest.raises(ValueError, match="score"):
            model.instance_scores(good, score="gradcam")


@pytest.mark.parametrize(
    "cls,kwargs,name",
    [
        (AttentionMIL, {"pooling": "sum"}, "pooling"),
        (AttentionMIL, {"epochs": 0}, "epochs"),
        (AttentionMIL, {"lr": -1.0}, "lr"),
        (AttentionMIL, {"batch_size": 0}, "batch_size"),
        (SparseSupportGroundingMIL, {"k": 0}, "k"),
        (SparseSupportGroundingMIL, {"memory_size": 0}, "memory_size"),
        (SparseSupportGroundingMIL, {"eps": 0.0}, "eps"),
        (SparseSupportGroundingMIL, {"rho": 0.0}, "rho"),
        (SparseSupportGroundingMIL, {"grounding_weight": -0.5}, "grounding_weight"),
        (SparseSupportGroundingMIL, {"transport": "exact"}, "transport"),
        (SparseSupportGroundingMIL, {"contrast": "yes"}, "contrast"),
        (SparseSupportGroundingMIL, {"warmup_epochs": -1}, "warmup_epochs"),
    ],
)
def test_bad_parameters_raise(cls, kwargs, name):
    with pytest.raises(ValueError, match=name):
        cls(**kwargs).fit([np.zeros((3, 4)), np.ones((2, 4))], [0, 1])


def test_max_pooling_has_no_attention_scores():
    model = AttentionMIL("max", epochs=1, random_state=0).fit([np.zeros((3, 4)), np.ones((2, 4))], [0, 1])
    with pytest.raises(ValueError, match="attention"):
        model.instance_scores([np.zeros((3, 4))], score="attention")


def test_synthetic_bags_follow_the_digest():
    sparse = synthetic_bags(200, "sparse", random_state=1)
    dense = synthetic_bags(200, "dense", random_state=1)
    assert 0.01 <= sparse.witness_rate <= 0.05 and 0.22 <= dense.witness_rate <= 0.26
    for data in (sparse, dense):
        assert all(50 <= len(b) <= 100 and b.shape[1] == 32 for b in data.bags)
        assert all((w.sum() > 0) == (y == 1) for w, y in zip(data.witness, data.y))
        assert all(d.sum() >= 2 and not (d & w).any() for d, w in zip(data.decoy, data.witness))
    ev = [b[w] for b, w in zip(sparse.bags, sparse.witness) if w.any()]
    assert all(1 <= len(e) <= 3 for e in ev)
    with pytest.raises(ValueError, match="regime"):
        synthetic_bags(10, "medium")
    with pytest.raises(ValueError, match="n_bags"):
        synthetic_bags(1)


def test_digits_bags():
    tr = digits_bags(40, split="train", random_state=0)
    te = digits_bags(40, split="test", random_state=0)
    assert all(b.shape == (40, 64) for b in tr.bags)
    assert all((w.sum() in (1, 2)) == (y == 1) for w, y in zip(tr.witness, tr.y))
    train_rows = {r.tobytes() for b in tr.bags for r in b}
    assert not any(r.tobytes() in train_rows for b in te.bags for r in b)
    with pytest.raises(ValueError, match="split"):
        digits_bags(10, split="val")


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("ssg-mil", tmp_path)
