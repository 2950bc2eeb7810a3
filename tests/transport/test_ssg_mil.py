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
    MILData,
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
@given(st.integers(0, 10_000), st.sampled_from([0.05, 0.2, 1.0]), st.sampled_from([0.1, 0.5, 2.0]))
def test_retained_mass_is_exp_of_minus_f_over_rho(seed, eps, rho):
    # at the fixed point of the KL-relaxed problem, (P 1)_i / a_i = exp(-f_i / rho) (first-order condition in f)
    rng = np.random.default_rng(seed)
    n, s = rng.integers(1, 9), rng.integers(1, 9)
    a = torch.tensor(rng.random(n) + 1e-3)
    b = torch.tensor(rng.random(s) + 1e-3)
    C = torch.tensor(rng.random((n, s)) * 2)
    P, log = unbalanced_sinkhorn_log(a, b, C, eps, rho, n_iter=20000, tol=1e-14, log=True)
    r = retained_mass(P, a)
    assert torch.isfinite(P).all() and (P >= 0).all()
    np.testing.assert_allclose(r.numpy(), np.exp(-log["f"].numpy() / rho), rtol=1e-6)
    clipped = retained_mass(P, a, clip=True)
    np.testing.assert_allclose(clipped.numpy(), np.minimum(r.numpy(), 1.0))


def test_retained_mass_exceeds_one_where_the_target_wants_the_point():
    # one source point in a tiny source measure, a heavy target right on it: the relaxed target marginal pulls
    # more mass than the point has (checked against POT's plan, an independent solver)
    a, b = np.array([0.1, 0.9]), np.array([2.0])
    C = np.array([[0.0], [1.5]])
    Q = ot.unbalanced.sinkhorn_unbalanced(a, b, C, 0.05, 0.5, numItermax=100000, stopThr=1e-15)
    r = retained_mass(unbalanced_sinkhorn_log(a, b, C, 0.05, 0.5, n_iter=20000, tol=1e-14), a)
    np.testing.assert_allclose(r.numpy(), Q.sum(1) / a, rtol=1e-8)
    assert r[0] > 1.5 and r[1] < 0.5


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
    w_plus = grounding_weights(r_plus, None, mask, contrast="none")
    assert abs(float(w_plus.sum()) - 1) < 1e-9 and w_plus[0, 1] > 0
    empty = support_retained_mass(h, mask, e[[0]], torch.zeros(1, 1, dtype=torch.bool))
    assert float(empty.abs().max()) == 0.0
    assert float(grounding_weights(empty, empty, mask).abs().max()) == 0.0
    with pytest.raises(ValueError, match="support"):
        support_retained_mass(h, mask, e[:, :3], torch.ones(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask"):
        support_retained_mass(h, mask[:, :2], e[[0]], torch.ones(1, 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="support"):
        support_retained_mass(h, mask, e[None, [0]].expand(2, 1, 4), torch.ones(1, 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="rho"):
        support_retained_mass(h, mask, e[[0]], torch.ones(1, 1, dtype=torch.bool), rho=0.0)


def _planted(seed=0, d=16, n_nuis=21):
    """An easy grounding problem: label-consistent memory = noisy copies of the evidence plus shared nuisance,
    label-inconsistent memory = shared nuisance plus decoys (cosine 0.8 to the evidence, in both classes)."""
    g = torch.Generator().manual_seed(seed)
    unit = lambda x: x / x.norm(dim=-1, keepdim=True)  # noqa: E731
    ev = unit(torch.randn(1, d, generator=g, dtype=torch.float64))
    ortho = torch.randn(1, d, generator=g, dtype=torch.float64)
    ortho = unit(ortho - (ortho @ ev.T) * ev)
    decoy = 0.8 * ev + 0.6 * ortho
    nuisance = unit(torch.randn(6, d, generator=g, dtype=torch.float64))

    def noisy(c, k):
        rows = c.repeat(k, 1)
        return rows + 0.1 * torch.randn(rows.shape, generator=g, dtype=torch.float64) / d**0.5

    pos_mem = torch.cat([noisy(ev, 24), noisy(decoy, 4), noisy(nuisance[:3], 3)])
    neg_mem = torch.cat([noisy(decoy, 20), noisy(nuisance, 2)])
    nuis = noisy(nuisance[:3], n_nuis // 3)
    bag = torch.cat([noisy(ev, 2), noisy(decoy, 3), nuis])
    kind = np.array([1] * 2 + [2] * 3 + [0] * len(nuis))  # 1 witness, 2 decoy, 0 nuisance
    return bag[None], pos_mem, neg_mem, kind


def test_grounding_weights_favour_planted_witnesses():
    h, pos_mem, neg_mem, kind = _planted()
    mask = torch.ones(1, h.shape[1], dtype=torch.bool)
    r_plus = support_retained_mass(
        h, mask, pos_mem, torch.ones(1, len(pos_mem), dtype=torch.bool), 0.05, 0.5, 500
    )
    r_minus = support_retained_mass(
        h, mask, neg_mem, torch.ones(1, len(neg_mem), dtype=torch.bool), 0.05, 0.5, 500
    )
    for contrast in ("difference", "log_ratio", "softmax"):
        w = grounding_weights(r_plus, r_minus, mask, contrast)[0].numpy()
        assert w[kind == 1].min() > 2.5 * w[kind != 1].max(), contrast
        assert abs(w.sum() - 1) < 1e-9
    # the witnesses are wanted by both memories (r > 1 on both sides): clipping at 1 would erase their contrast
    assert float(r_plus[0, kind == 1].min()) > 1 and float(r_minus[0, kind == 1].min()) > 1
    clipped = grounding_weights(r_plus.clamp(max=1), r_minus.clamp(max=1), mask)[0].numpy()
    assert clipped[kind == 1].max() == 0.0
    # the r+-only ablation spreads weight over everything the positive memory matches, decoys included
    w_plus = grounding_weights(r_plus, None, mask, "none")[0].numpy()
    assert w_plus[kind == 2].mean() > w_plus[kind == 0].mean()


def test_trained_ssg_grounds_planted_witnesses_on_an_easy_case():
    from sklearn.metrics import roc_auc_score

    model = SparseSupportGroundingMIL(epochs=10, warmup_epochs=3, memory_size=16, random_state=0)
    model.fit(*_xy(_easy_bags(60, 0)))
    pos = _easy_bags(60, 1).subset(np.arange(1, 60, 2))  # held-out positive bags
    w = np.concatenate(model.grounding(pos.bags, pos.y))
    witness, decoy = np.concatenate(pos.witness), np.concatenate(pos.decoy)
    assert roc_auc_score(witness, w) > 0.95
    assert w[witness].mean() > w[decoy].mean() > w[~witness & ~decoy].mean()


def _xy(data):
    return data.bags, data.y


def test_per_bag_supports_equal_shared_supports():
    h, pos_mem, neg_mem, _ = _planted(1)
    h2 = torch.cat([h, h])
    mask = torch.ones(2, h.shape[1], dtype=torch.bool)
    S = max(len(pos_mem), len(neg_mem))
    sup = torch.zeros(2, S, h.shape[2], dtype=h.dtype)
    smask = torch.zeros(2, S, dtype=torch.bool)
    sup[0, : len(pos_mem)], smask[0, : len(pos_mem)] = pos_mem, True
    sup[1, : len(neg_mem)], smask[1, : len(neg_mem)] = neg_mem, True
    both = support_retained_mass(h2, mask, sup, smask, 0.05, 0.5, 300)
    one = support_retained_mass(
        h, mask[:1], pos_mem, torch.ones(1, len(pos_mem), dtype=torch.bool), 0.05, 0.5, 300
    )
    two = support_retained_mass(
        h, mask[:1], neg_mem, torch.ones(1, len(neg_mem), dtype=torch.bool), 0.05, 0.5, 300
    )
    np.testing.assert_allclose(both[0].numpy(), one[0].numpy(), rtol=1e-10)
    np.testing.assert_allclose(both[1].numpy(), two[0].numpy(), rtol=1e-10)


def test_float32_scaling_matches_float64():
    a, b, C = _problem(5, 40, 30)
    P64 = unbalanced_sinkhorn_log(
        torch.tensor(a), torch.tensor(b), torch.tensor(C), 0.05, 0.5, 300, method="scaling"
    )
    P32 = unbalanced_sinkhorn_log(
        torch.tensor(a, dtype=torch.float32),
        torch.tensor(b, dtype=torch.float32),
        torch.tensor(C, dtype=torch.float32),
        0.05,
        0.5,
        300,
        method="scaling",
    )
    assert P32.dtype == torch.float32
    np.testing.assert_allclose(P32.double().sum(-1).numpy(), P64.sum(-1).numpy(), rtol=1e-4)


def test_contrast_forms():
    r_plus = torch.tensor([[2.0, 1.5, 0.2, 0.0]], dtype=torch.float64)
    r_minus = torch.tensor([[0.5, 1.8, 0.1, 0.3]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False]])
    diff = grounding_weights(r_plus, r_minus, mask, "difference")[0].numpy()
    np.testing.assert_allclose(diff, [1.5 / 1.6, 0.0, 0.1 / 1.6, 0.0])
    lr = grounding_weights(r_plus, r_minus, mask, "log_ratio")[0].numpy()
    np.testing.assert_allclose(lr, np.array([np.log(4), 0, np.log(2), 0]) / np.log(8))
    soft = grounding_weights(r_plus, r_minus, mask, "softmax", temperature=0.5)[0].numpy()
    logits = np.log(np.array([4.0, 1.5 / 1.8, 2.0])) / 0.5
    np.testing.assert_allclose(soft[:3], np.exp(logits) / np.exp(logits).sum())
    assert soft[3] == 0.0
    none = grounding_weights(r_plus, None, mask, "none")[0].numpy()
    np.testing.assert_allclose(none, [2.0 / 3.7, 1.5 / 3.7, 0.2 / 3.7, 0.0])
    with pytest.raises(ValueError, match="contrast"):
        grounding_weights(r_plus, r_minus, mask, "ratio")
    with pytest.raises(ValueError, match="r_minus"):
        grounding_weights(r_plus, None, mask, "difference")
    with pytest.raises(ValueError, match="temperature"):
        grounding_weights(r_plus, r_minus, mask, "softmax", temperature=0.0)


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
    return synthetic_bags(n, "sparse", n_features=16, noise=0.3, random_state=seed, centres_seed=0)


def _easy_bags(n_bags, seed, d=8, m=12):
    """Small bags a few epochs can learn: positives hold 2 witnesses (one evidence cluster), every bag 2 decoys
    (cosine 0.8 to the evidence) and nuisance from 4 clusters; the cluster centres are fixed."""
    crng = np.random.default_rng(100)
    unit = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)  # noqa: E731
    ev = unit(crng.normal(size=d))
    o = crng.normal(size=d)
    o = unit(o - o @ ev * ev)
    dec, nuis = 0.8 * ev + 0.6 * o, unit(crng.normal(size=(4, d)))
    rng = np.random.default_rng(seed)
    bags, wit, decs = [], [], []
    y = np.arange(n_bags) % 2
    for label in y:
        kinds = np.array([1] * (2 * label) + [2] * 2 + [0] * (m - 2 - 2 * label))
        centres = np.where(
            (kinds == 1)[:, None], ev, np.where((kinds == 2)[:, None], dec, nuis[rng.integers(0, 4, m)])
        )
        X = centres + 0.15 * rng.normal(size=(m, d)) / np.sqrt(d)
        perm = rng.permutation(m)
        bags.append(X[perm])
        wit.append(kinds[perm] == 1)
        decs.append(kinds[perm] == 2)
    return MILData(bags, y, wit, decs)


def test_estimators_fit_predict_and_localise():
    data = _easy_bags(60, 0)
    test = _easy_bags(60, 7)
    from sklearn.metrics import roc_auc_score

    for model in (
        AttentionMIL("gated", epochs=15, random_state=0),
        SparseSupportGroundingMIL(epochs=15, warmup_epochs=3, memory_size=8, random_state=0),
    ):
        model.fit(data.bags, data.y)
        proba = model.predict_proba(test.bags)
        assert proba.shape == (60, 2) and np.allclose(proba.sum(1), 1)
        assert set(np.unique(model.predict(test.bags))) <= {0, 1}
        assert roc_auc_score(test.y, model.decision_function(test.bags)) > 0.95  # held-out bags
        assert _inst_auc(model.instance_scores(test.bags), test) > 0.9
        scores = model.instance_scores(test.bags)
        assert [len(s) for s in scores] == [len(b) for b in test.bags]
    w = model.grounding(data.bags, data.y)
    assert all(np.all(wi >= 0) and (wi.sum() == 0 or abs(wi.sum() - 1) < 1e-5) for wi in w)
    assert model.classes_.tolist() == [0, 1] and 0 <= model.score(test.bags, test.y) <= 1
    assert model.memory_valid_[0].any() and model.memory_valid_[1].any()
    # determinism
    again = SparseSupportGroundingMIL(epochs=15, warmup_epochs=3, memory_size=8, random_state=0).fit(
        data.bags, data.y
    )
    np.testing.assert_allclose(again.decision_function(data.bags), model.decision_function(data.bags))


def _inst_auc(scores, data):
    from neurips26.transport.ssg_mil.experiment import instance_auc

    return instance_auc(scores, data)


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
        (SparseSupportGroundingMIL, {"ramp_epochs": -1}, "ramp_epochs"),
        (SparseSupportGroundingMIL, {"temperature": 0.0}, "temperature"),
        (SparseSupportGroundingMIL, {"align_weight": -1.0}, "align_weight"),
        (SparseSupportGroundingMIL, {"n_sinkhorn": 0}, "n_sinkhorn"),
        (SparseSupportGroundingMIL, {"instance_score": "gradcam"}, "instance_score"),
        (SparseSupportGroundingMIL, {"warmup_instance_head": "yes"}, "warmup_instance_head"),
        (SparseSupportGroundingMIL, {"contrast": True}, "contrast"),
        (AttentionMIL, {"hidden": 0}, "hidden"),
        (AttentionMIL, {"weight_decay": -1.0}, "weight_decay"),
    ],
)
def test_bad_parameters_raise(cls, kwargs, name):
    with pytest.raises(ValueError, match=name):
        cls(**kwargs).fit([np.zeros((3, 4)), np.ones((2, 4))], [0, 1])


def test_max_pooling_has_no_attention_scores():
    model = AttentionMIL("max", epochs=1, random_state=0).fit([np.zeros((3, 4)), np.ones((2, 4))], [0, 1])
    with pytest.raises(ValueError, match="attention"):
        model.instance_scores([np.zeros((3, 4))], score="attention")


def test_instance_auc_matches_sklearn_per_bag():
    from sklearn.metrics import roc_auc_score

    from neurips26.transport.ssg_mil.experiment import instance_auc

    data = synthetic_bags(30, "sparse", random_state=4)
    rng = np.random.default_rng(0)
    scores = [
        np.round(rng.normal(size=len(b)) + 2 * w, 1) for b, w in zip(data.bags, data.witness)
    ]  # with ties
    expected = np.mean([roc_auc_score(w, s) for s, w, y in zip(scores, data.witness, data.y) if y == 1])
    assert instance_auc(scores, data) == pytest.approx(expected, rel=1e-12)


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


@pytest.mark.parametrize("cosine", [0.8, 0.9, 0.3])
def test_synthetic_bags_decoys_sit_at_the_requested_cosine(cosine):
    # noise 0: every instance is its cluster centre, so a decoy's best cosine to the bag's evidence set is the
    # decoy-evidence cosine exactly (nuisance centres are random, far from it in 32-d)
    data = synthetic_bags(60, "sparse", noise=0.0, random_state=2, decoy_cosine=cosine)
    ev = np.unique(np.concatenate([b[w] for b, w in zip(data.bags, data.witness) if w.any()]), axis=0)
    dec = np.unique(np.concatenate([b[d] for b, d in zip(data.bags, data.decoy)]), axis=0)
    assert len(ev) == 4 and len(dec) == 4
    cos = (dec / np.linalg.norm(dec, axis=1, keepdims=True)) @ (
        ev / np.linalg.norm(ev, axis=1, keepdims=True)
    ).T
    np.testing.assert_allclose(np.sort(cos.max(1)), np.full(4, cosine), atol=1e-12)
    # only the decoys move: the same draws otherwise
    base = synthetic_bags(60, "sparse", noise=0.0, random_state=2)
    for b0, b1, d in zip(base.bags, data.bags, data.decoy):
        np.testing.assert_array_equal(b0[~d], b1[~d])
    for bad in (1.0, -1.0, np.nan, True):
        with pytest.raises(ValueError, match="decoy_cosine"):
            synthetic_bags(10, decoy_cosine=bad)


def test_digits_bags():
    tr = digits_bags(40, split="train", random_state=0)
    te = digits_bags(40, split="test", random_state=0)
    assert all(b.shape == (40, 64) for b in tr.bags)
    assert all((w.sum() in (1, 2)) == (y == 1) for w, y in zip(tr.witness, tr.y))
    train_rows = {r.tobytes() for b in tr.bags for r in b}
    assert not any(r.tobytes() in train_rows for b in te.bags for r in b)
    with pytest.raises(ValueError, match="split"):
        digits_bags(10, split="val")
    with pytest.raises(ValueError, match="bag_size"):
        digits_bags(10, bag_size=3)
    with pytest.raises(ValueError, match="n_bags"):
        digits_bags(1)


def test_sklearn_estimator_protocol():
    from sklearn.base import clone
    from sklearn.model_selection import cross_val_score

    for est in (
        AttentionMIL("max", epochs=2, lr=1e-3, random_state=3),
        SparseSupportGroundingMIL(
            k=2, rho=2.0, contrast="softmax", epochs=2, warmup_epochs=1, random_state=3
        ),
    ):
        params = est.get_params()
        twin = clone(est)
        assert twin.get_params() == params and twin is not est
        twin.set_params(epochs=3)
        assert twin.epochs == 3 and est.epochs == 2
    data = _toy(24)
    scores = cross_val_score(AttentionMIL(epochs=2, random_state=0), data.bags, data.y, cv=2)
    assert scores.shape == (2,) and np.all((scores >= 0) & (scores <= 1))


def test_fit_leaves_the_global_random_state_alone():
    data = _toy(20)
    torch.manual_seed(123)
    np.random.seed(5)  # noqa: NPY002 (the legacy global state is what must stay untouched)
    torch_state, np_state = torch.get_rng_state(), np.random.get_state()[1].copy()  # noqa: NPY002
    a = SparseSupportGroundingMIL(epochs=3, warmup_epochs=1, memory_size=4, random_state=4).fit(
        data.bags, data.y
    )
    assert torch.equal(torch.get_rng_state(), torch_state)
    np.testing.assert_array_equal(np.random.get_state()[1], np_state)  # noqa: NPY002
    b = SparseSupportGroundingMIL(epochs=3, warmup_epochs=1, memory_size=4, random_state=4).fit(
        data.bags, data.y
    )
    np.testing.assert_array_equal(a.decision_function(data.bags), b.decision_function(data.bags))
    c = AttentionMIL(epochs=2, random_state=np.random.RandomState(4)).fit(data.bags, data.y)
    assert c.decision_function(data.bags).shape == (20,)
    with pytest.raises(ValueError, match="random_state"):
        AttentionMIL(epochs=1, random_state="x").fit(data.bags, data.y)


def test_lambda_ramp_schedule():
    model = SparseSupportGroundingMIL(grounding_weight=0.5, warmup_epochs=2, ramp_epochs=4)
    assert [model._lambda(e) for e in range(8)] == [0.0, 0.0, 0.125, 0.25, 0.375, 0.5, 0.5, 0.5]
    model.ramp_epochs = 0
    assert model._lambda(1) == 0.0 and model._lambda(2) == 0.5


def test_grounding_and_masses_bad_inputs():
    data = _toy(20)
    model = SparseSupportGroundingMIL(epochs=2, warmup_epochs=1, memory_size=4, random_state=0)
    with pytest.raises(RuntimeError, match="not fitted"):
        model.grounding(data.bags, data.y)
    model.fit(data.bags, data.y)
    with pytest.raises(ValueError, match="contrast"):
        model.grounding(data.bags, data.y, contrast=True)
    with pytest.raises(ValueError, match="y must"):
        model.grounding(data.bags, data.y[:-1])
    with pytest.raises(ValueError, match="y must"):
        model.retained_masses(data.bags, np.full(len(data.bags), 3))
    r_plus, r_minus = model.retained_masses(data.bags, data.y)
    assert [len(r) for r in r_plus] == [len(b) for b in data.bags] and all(np.all(r >= 0) for r in r_minus)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("ssg-mil", tmp_path)
