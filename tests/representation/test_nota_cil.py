"""NoTA / H-NoTA: tensor-train contraction against brute force, zero-initialised adapters, parameter counts,
the global-normalisation invariant, hand-over continuity, the class-incremental learner's contract."""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from neurips26.harness.testing import assert_quick_verdict
from neurips26.representation import (
    AdaptedLinear,
    ClassIncrementalLearner,
    LoRAAdapter,
    MPOAdapter,
    SimpleCIL,
    digits_stream,
    gaussian_class_data,
    gaussian_stream,
    run_stream,
)
from neurips26.representation.nota_cil import StreamResult, factorize, mlp_backbone, split_tasks


def randomize(adapter: MPOAdapter, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for c in adapter.cores:
            c.copy_(torch.randn(c.shape, generator=g))


def brute_force_dense(cores, in_shape, out_shape, mods=None):
    """dW[(i1..iK), (j1..jK)] = C1[:, i1, j1, :] M1 C2[:, i2, j2, :] ... as explicit matrix products."""
    m, n = math.prod(out_shape), math.prod(in_shape)
    W = np.zeros((m, n))
    cs = [c.detach().numpy() for c in cores]
    for i in itertools.product(*[range(s) for s in out_shape]):
        row = np.ravel_multi_index(i, out_shape)
        for j in itertools.product(*[range(s) for s in in_shape]):
            col = np.ravel_multi_index(j, in_shape)
            v = cs[0][:, i[0], j[0], :]
            for k in range(1, len(cs)):
                if mods is not None:
                    v = v @ mods[k - 1]
                v = v @ cs[k][:, i[k], j[k], :]
            W[row, col] = v[0, 0]
    return W


def test_tt_contraction_equals_brute_force():
    ad = MPOAdapter(12, 8, bond_dim=3, in_shape=(3, 2, 2), out_shape=(2, 2, 2))
    randomize(ad)
    np.testing.assert_allclose(
        ad.delta().detach().numpy(), brute_force_dense(ad.cores, (3, 2, 2), (2, 2, 2)), rtol=1e-5, atol=1e-5
    )


def test_modulated_contraction_equals_brute_force():
    ad = MPOAdapter(8, 8, bond_dim=2, in_shape=(2, 2, 2), out_shape=(2, 2, 2), modulation=True)
    randomize(ad, 1)
    plain = ad.delta().detach().numpy()
    np.testing.assert_allclose(plain, brute_force_dense(ad.cores, (2, 2, 2), (2, 2, 2)), rtol=1e-5, atol=1e-5)
    g = np.random.default_rng(0)
    mods = [g.normal(size=(2, 2)) for _ in range(2)]
    with torch.no_grad():
        for p, m in zip(ad.modulations, mods, strict=True):
            p.copy_(torch.from_numpy(m).float())
    np.testing.assert_allclose(
        ad.delta().detach().numpy(),
        brute_force_dense(ad.cores, (2, 2, 2), (2, 2, 2), mods),
        rtol=1e-4,
        atol=1e-4,
    )


def test_tt_contraction_against_tensorly():
    tl = pytest.importorskip("tensorly")
    from tensorly.tt_matrix import tt_matrix_to_matrix

    ad = MPOAdapter(16, 8, bond_dim=3, in_shape=(4, 2, 2), out_shape=(2, 2, 2))
    randomize(ad, 2)
    ref = tt_matrix_to_matrix([tl.tensor(c.detach().numpy()) for c in ad.cores])
    np.testing.assert_allclose(ad.delta().detach().numpy(), ref, rtol=1e-5, atol=1e-5)


def test_parameter_counts_match_the_formula():
    ad = MPOAdapter(128, 128, bond_dim=4)
    assert ad.in_shape == (8, 4, 4) and ad.out_shape == (8, 4, 4)
    # 1*8*8*4 + 4*4*4*4 + 4*4*4*1
    assert ad.n_parameters == 256 + 256 + 64 == sum(c.numel() for c in ad.cores)
    h = MPOAdapter(128, 64, bond_dim=4, modulation=True)
    assert h.n_parameters == sum(c.numel() for c in h.cores) + 2 * 16
    lo = LoRAAdapter(64, 128, rank=4)
    assert lo.n_parameters == 4 * (64 + 128) == sum(p.numel() for p in lo.parameters())


@settings(max_examples=30)
@given(st.integers(1, 5000), st.integers(1, 4))
def test_factorize_multiplies_back(n, k):
    f = factorize(n, k)
    assert len(f) == k and math.prod(f) == n and list(f) == sorted(f, reverse=True)


def test_factorize_examples():
    assert factorize(128) == (8, 4, 4) and factorize(64) == (4, 4, 4) and factorize(7) == (7, 1, 1)


@pytest.mark.parametrize(
    "adapter, norm", [("lora", "none"), ("lora", "task"), ("mpo", "global"), ("mpo", "task")]
)
def test_zero_initialised_adapters_leave_outputs_unchanged(adapter, norm):
    torch.manual_seed(0)
    base = nn.Linear(16, 8)
    layer = AdaptedLinear(base, adapter=adapter, normalization=norm, rank=2)
    x = torch.randn(5, 16)
    layer.start_task()
    torch.testing.assert_close(layer(x), base(x))
    learner = ClassIncrementalLearner(mlp_backbone(16, (16, 8)), adapter=adapter, normalization=norm, rank=2)
    bb = mlp_backbone(16, (16, 8))
    for a in learner.adapted:
        a.start_task()
    torch.testing.assert_close(learner.features(x.numpy()), bb(x))


def _train_layer(layer, steps=30, seed=0):
    g = torch.Generator().manual_seed(seed)
    x, target = (
        torch.randn(32, layer.in_features, generator=g),
        torch.randn(32, layer.out_features, generator=g),
    )
    opt = torch.optim.Adam([p for p in layer.parameters() if p.requires_grad], lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        ((layer(x) - target) ** 2).mean().backward()
        opt.step()


@pytest.mark.parametrize("adapter", ["lora", "mpo"])
def test_global_norm_is_gamma_after_every_task(adapter):
    layer = AdaptedLinear(nn.Linear(16, 16), adapter=adapter, normalization="global", rank=2)
    norms = []
    for t in range(4):
        layer.start_task()
        _train_layer(layer, seed=t)
        before = layer.merged_weight().detach().clone()
        layer.end_task()
        torch.testing.assert_close(layer.merged_weight().detach(), before)  # hand-over is continuous
        norms.append(float(torch.linalg.matrix_norm(layer.merged_weight().detach() - layer.weight0)))
    assert float(layer.gamma) > 0
    np.testing.assert_allclose(norms, float(layer.gamma), rtol=1e-6)


def test_task_wise_hand_over_is_continuous_and_old_cores_frozen():
    layer = AdaptedLinear(nn.Linear(16, 16), adapter="mpo", normalization="task", rank=2)
    layer.start_task()
    _train_layer(layer)
    before = layer.merged_weight().detach().clone()
    layer.end_task()
    torch.testing.assert_close(layer.merged_weight().detach(), before)
    first = [c.detach().clone() for c in layer.adapters[0].cores]
    layer.start_task()
    _train_layer(layer, seed=1)
    for c0, c in zip(first, layer.adapters[0].cores, strict=True):
        torch.testing.assert_close(c0, c.detach())
    assert layer.alphas[0].requires_grad  # SD-LoRA: magnitudes of old directions stay trainable


def test_task_norm_of_unit_direction():
    layer = AdaptedLinear(nn.Linear(8, 8), adapter="lora", normalization="task", rank=2)
    for t in range(2):
        layer.start_task()
        _train_layer(layer, seed=t)
        layer.end_task()
    with torch.no_grad():
        ref = sum(
            a * ad.delta() / torch.linalg.matrix_norm(ad.delta())
            for a, ad in zip(layer.alphas, layer.adapters)
        )
        torch.testing.assert_close(layer.update(), ref)


def test_h_nota_modulations_train_for_historical_adapters_only():
    layer = AdaptedLinear(nn.Linear(8, 8), adapter="mpo", normalization="global", rank=2, modulation=True)
    layer.start_task()
    assert not any(p.requires_grad for p in layer.adapters[0].modulations)
    _train_layer(layer)
    layer.end_task()
    layer.start_task()
    old = layer.adapters[0]
    assert all(p.requires_grad for p in old.modulations) and not any(c.requires_grad for c in old.cores)
    _train_layer(layer, seed=1)
    assert any(not torch.allclose(p, torch.eye(2)) for p in old.modulations)


def test_shared_adapter_is_one_adapter():
    layer = AdaptedLinear(nn.Linear(8, 8), adapter="lora", normalization="none", shared=True, rank=2)
    for _ in range(3):
        layer.start_task()
        layer.end_task()
    assert len(layer.adapters) == 1 and layer.stored_parameters() == 2 * 16


def test_learner_on_a_small_stream():
    X, y = gaussian_class_data(n_classes=6, n_per_class=40, seed=0)
    tasks, tests = gaussian_stream(3, X, y)
    learner = ClassIncrementalLearner(mlp_backbone(64, (32, 32)), epochs=5, seed=0)
    res = run_stream(learner, tasks, tests)
    assert res.acc.shape == (3, 3) and np.isnan(res.acc[0, 1]) and res.final_accuracy > 100 / 6
    assert set(learner.predict(tests[0][0])) <= set(learner.classes_)
    norms = np.asarray(res.update_norms)
    np.testing.assert_allclose(norms, norms[:1].repeat(3, 0), rtol=1e-5)
    assert res.stored_parameters == learner.stored_parameters() > 0


def test_forgetting_and_incremental_accuracy_by_hand():
    acc = np.array([[90.0, np.nan, np.nan], [70.0, 80.0, np.nan], [60.0, 85.0, 50.0]])
    r = StreamResult(acc, 0, final_all=65.0, incremental=[90.0, 75.0, 65.0])
    assert r.forgetting == pytest.approx(((90 - 60) + (80 - 85)) / 2)
    assert r.average_incremental_accuracy == pytest.approx(230 / 3)


@pytest.mark.slow
def test_simple_cil_is_nearest_cosine_prototype():
    torch.manual_seed(0)
    bb = mlp_backbone(64, (16,))
    tasks, tests = digits_stream(order_seed=1)
    s = SimpleCIL(bb)
    for X, y in tasks[:2]:
        s.fit_task(X, y)
    with torch.no_grad():
        H = {c: bb(torch.from_numpy(X[y == c])).numpy() for X, y in tasks[:2] for c in np.unique(y)}
        h = bb(torch.from_numpy(tests[0][0])).numpy()
    protos = {c: (v / np.linalg.norm(v, axis=1, keepdims=True)).mean(0) for c, v in H.items()}
    cls = list(protos)
    P = np.stack([protos[c] / np.linalg.norm(protos[c]) for c in cls])
    ref = np.asarray(cls)[np.argmax((h / np.linalg.norm(h, axis=1, keepdims=True)) @ P.T, axis=1)]
    np.testing.assert_array_equal(s.predict(tests[0][0]), ref)


def test_bad_input():
    lin = nn.Linear(8, 8)
    with pytest.raises(ValueError, match="rank"):
        LoRAAdapter(8, 8, rank=0)
    with pytest.raises(ValueError, match="in_shape"):
        MPOAdapter(8, 8, in_shape=(2, 3))
    with pytest.raises(TypeError, match="nn.Linear"):
        AdaptedLinear(nn.ReLU())
    with pytest.raises(ValueError, match="normalization"):
        AdaptedLinear(lin, normalization="layer")
    with pytest.raises(ValueError, match="modulation"):
        AdaptedLinear(lin, adapter="lora", modulation=True)
    with pytest.raises(ValueError, match="shared"):
        AdaptedLinear(lin, shared=True, normalization="global")
    with pytest.raises(RuntimeError, match="start_task"):
        AdaptedLinear(lin).end_task()
    with pytest.raises(TypeError, match="backbone"):
        ClassIncrementalLearner("mlp")
    with pytest.raises(ValueError, match="layers"):
        ClassIncrementalLearner(mlp_backbone(8, (8,)), layers=["nope"])
    with pytest.raises(ValueError, match="epochs"):
        ClassIncrementalLearner(mlp_backbone(8, (8,)), epochs=0)
    with pytest.raises(ValueError, match="head"):
        ClassIncrementalLearner(mlp_backbone(8, (8,)), head="mlp")
    learner = ClassIncrementalLearner(mlp_backbone(8, (8,)), epochs=1)
    with pytest.raises(RuntimeError, match="before any task"):
        learner.predict(np.zeros((2, 8)))
    X, y = np.random.default_rng(0).normal(size=(10, 8)), np.array([0, 1] * 5)
    learner.fit_task(X, y)
    with pytest.raises(ValueError, match="already learned"):
        learner.fit_task(X, y)
    with pytest.raises(ValueError, match="one label per row"):
        learner.fit_task(X, y[:3])
    with pytest.raises(ValueError, match="2-D"):
        learner.predict(np.zeros(8))
    with pytest.warns(UserWarning, match="one class"):
        learner.fit_task(X[:3], np.array([7, 7, 7]))
    with pytest.raises(ValueError, match="classes_per_task"):
        split_tasks(X, y, [0, 1], 0, 0.3, 0)
    with pytest.raises(ValueError, match="do not split"):
        split_tasks(X, y, [0, 1, 2], 2, 0.3, 0)
    with pytest.raises(ValueError, match="n_tasks"):
        gaussian_stream(30, *gaussian_class_data(n_classes=4, n_per_class=5))
    with pytest.raises(ValueError, match="already learned"):
        SimpleCIL(mlp_backbone(8, (8,))).fit_task(X, y).fit_task(X, y)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("nota-cil", tmp_path)


# --- the cached merged weight ----------------------------------------------------------------------------------
def _layer_with_tasks(n_tasks=4, norm="global", adapter="mpo", size=16, modulation=False):
    layer = AdaptedLinear(
        nn.Linear(size, size), adapter=adapter, normalization=norm, rank=2, modulation=modulation
    )
    for t in range(n_tasks):
        layer.start_task()
        _train_layer(layer, steps=5, seed=t)
        layer.end_task()
    return layer


@pytest.mark.parametrize(
    "adapter, norm, modulation",
    [("mpo", "global", False), ("mpo", "task", False), ("lora", "none", False), ("mpo", "global", True)],
)
def test_cached_forward_equals_rebuilt_weight_and_skips_contractions(adapter, norm, modulation, monkeypatch):
    layer = _layer_with_tasks(adapter=adapter, norm=norm, modulation=modulation)
    x = torch.randn(7, 16, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        cached = layer(x)
        # independent of the cache: W0 + the update rebuilt from every adapter's own delta()
        deltas = [ad.delta() for ad in layer.adapters]
        if norm == "global":
            S = sum(a * d for a, d in zip(layer.alphas, deltas)).double()
            W = layer.weight0.double() + layer.gamma.double() * S / torch.linalg.matrix_norm(S)
        elif norm == "task":
            W = layer.weight0 + sum(a * d / n for a, d, n in zip(layer.alphas, deltas, layer.frozen_norms))
        else:
            W = layer.weight0 + sum(deltas)
        ref = x.double() @ W.double().T + layer.bias0.double()
    torch.testing.assert_close(cached.double(), ref, rtol=1e-5, atol=1e-6)
    calls = []
    cls = type(layer.adapters[0])
    original = cls.delta
    monkeypatch.setattr(cls, "delta", lambda self: calls.append(1) or original(self))
    with torch.no_grad():
        again = layer(x)
    assert not calls  # a second inference forward contracts no tensor train
    torch.testing.assert_close(again, cached, rtol=0, atol=0)
    layer.cache = False
    with torch.no_grad():
        torch.testing.assert_close(layer(x), cached, rtol=1e-6, atol=1e-6)
    assert len(calls) == len(layer.adapters)


def test_cache_is_invalidated_by_training_and_new_tasks():
    layer = _layer_with_tasks(n_tasks=3)
    x = torch.randn(5, 16, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        before = layer(x)
    _train_layer(layer, steps=3, seed=9)  # the old alphas train: the merged weight changes
    with torch.no_grad():
        after, rebuilt = layer(x), layer.merged_weight(use_cache=False)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, x @ rebuilt.T + layer.bias0)
    layer.start_task()
    _train_layer(layer, steps=3, seed=10)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), x @ layer.merged_weight(use_cache=False).T + layer.bias0)
        with torch.no_grad():
            layer.gamma.copy_(layer.gamma * 2)  # an in-place edit of a parameter invalidates it too
        torch.testing.assert_close(layer(x), x @ layer.merged_weight(use_cache=False).T + layer.bias0)


def test_cached_inference_is_faster_after_ten_tasks():
    import time

    layer = AdaptedLinear(nn.Linear(128, 128), adapter="mpo", normalization="global", rank=4)
    for t in range(10):
        layer.start_task()
        randomize(layer.adapters[-1], t)
        layer.end_task()
    x = torch.randn(64, 128)

    def best(cache, n=30):
        layer.cache = cache
        out = []
        with torch.no_grad():
            for _ in range(n):
                t0 = time.perf_counter()
                layer(x)
                out.append(time.perf_counter() - t0)
        return min(out)

    assert best(False) > 3 * best(True)


def test_wrong_feature_count_is_a_value_error_naming_x():
    learner = ClassIncrementalLearner(mlp_backbone(8, (8,)), epochs=1)
    X, y = np.random.default_rng(0).normal(size=(10, 8)), np.array([0, 1] * 5)
    with pytest.raises(ValueError, match="X"):
        learner.fit_task(X[:, :5], y)
    assert not learner.heads and not learner.adapted[0].adapters  # a failed task leaves no trace
    learner.fit_task(X, y)
    with pytest.raises(ValueError, match="X must have 8 features"):
        learner.predict(X[:, :5])
    with pytest.raises(ValueError, match="X must have 8 features"):
        learner.fit_task(X[:, :5], y + 2)
    with pytest.raises(ValueError, match="task"):
        learner.predict(X, task=1)
    s = SimpleCIL(mlp_backbone(8, (8,)))
    with pytest.raises(ValueError, match="X"):
        s.fit_task(X[:, :3], y)
    s.fit_task(X, y)
    with pytest.raises(ValueError, match="X must have 8 features"):
        s.predict(X[:, :3])
    with pytest.raises(ValueError, match="x must have 8 features"):
        learner.adapted[0](torch.zeros(2, 3))


def test_task_aware_prediction_is_the_nearest_prototype_among_the_task_classes():
    bb = mlp_backbone(16, (8,))
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 16)).astype(np.float32)
    s = SimpleCIL(bb).fit_task(X[:20], np.repeat([3, 1], 10)).fit_task(X[20:], np.repeat([7, 5], 10))
    with torch.no_grad():
        H = bb(torch.from_numpy(X)).numpy()
    H = H / np.linalg.norm(H, axis=1, keepdims=True)
    protos = {c: H[i * 10 : (i + 1) * 10].mean(0) for i, c in enumerate([3, 1, 7, 5])}
    for task, cls in [(0, [1, 3]), (1, [5, 7])]:
        P = np.stack([protos[c] / np.linalg.norm(protos[c]) for c in cls])
        np.testing.assert_array_equal(s.predict(X, task=task), np.asarray(cls)[np.argmax(H @ P.T, axis=1)])


def test_learner_leaves_torch_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    bb = mlp_backbone(8, (8,), seed=5)
    learner = ClassIncrementalLearner(bb, epochs=1)
    learner.fit_task(np.random.default_rng(0).normal(size=(10, 8)), np.array([0, 1] * 5))
    torch.testing.assert_close(torch.rand(3), expected)


def test_plasticity_is_the_mean_task_aware_accuracy():
    r = StreamResult(np.zeros((2, 2)), 0, new_task_accuracy=[90.0, 70.0])
    assert r.plasticity == pytest.approx(80.0)
