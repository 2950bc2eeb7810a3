"""CoFrGeNet continued fractions and blocks: continuant maths, log path, Proposition 1, the blocks, the schedule."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from neurips26.harness.testing import assert_quick_verdict
from neurips26.lm import GPT, GPTConfig, TokenStream, TrainConfig, train
from neurips26.lm.cofrgenet import (
    Cffn,
    DyadicSchedule,
    GatedCFFN,
    continuant,
    continuants,
    continued_fraction,
    fraction_gradient,
    nested_fraction,
)

well_conditioned = arrays(
    np.float64, st.tuples(st.integers(1, 5), st.integers(1, 12)), elements=st.floats(0.5, 3.0)
)


def literal_fraction(row):
    """1 / (a_1 + 1 / (a_2 + ...)) in plain Python floats: the oracle for everything below."""
    value = row[-1]
    for a in reversed(row[:-1]):
        value = a + 1.0 / value
    return 1.0 / value


@settings(max_examples=40)
@given(well_conditioned)
def test_continuant_ratio_equals_the_nested_fraction(a):
    t = torch.from_numpy(a)
    K = continuants(t)
    expected = np.array([literal_fraction(list(r)) for r in a])
    np.testing.assert_allclose((K[-2] / K[-1]).numpy(), expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(continued_fraction(t).numpy(), expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(nested_fraction(t).numpy(), expected, rtol=0, atol=1e-10)


def test_continuant_closed_forms():
    a = torch.tensor([[2.0, 3.0, 5.0, 7.0]], dtype=torch.float64)
    a1, a2, a3, a4 = 2.0, 3.0, 5.0, 7.0
    assert continuant(a[:, :1]).item() == a1
    assert continuant(a[:, :2]).item() == a1 * a2 + 1
    assert continuant(a[:, :3]).item() == a1 * a2 * a3 + a1 + a3
    assert continuant(a).item() == a1 * a2 * a3 * a4 + a1 * a2 + a1 * a4 + a3 * a4 + 1
    assert continuant(a.T, dim=0).item() == continuant(a).item()


@settings(max_examples=40)
@given(well_conditioned)
def test_log_paths_equal_the_direct_path_on_well_conditioned_inputs(a):
    t = torch.from_numpy(a)
    direct = continued_fraction(t, "direct")
    for mode in ("log", "log_ratio"):
        torch.testing.assert_close(continued_fraction(t, mode), direct, rtol=0, atol=1e-8)
    torch.testing.assert_close(continued_fraction(t, "log", grad="identity"), direct, rtol=0, atol=1e-8)
    # depth-first layout gives the same values
    torch.testing.assert_close(continued_fraction(t.T.contiguous(), "log", dim=0), direct, rtol=0, atol=1e-8)


def test_signed_inputs_and_the_pole_guard():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2000, 6, generator=g, dtype=torch.float64) * 2
    K_d = continuant(a)
    far = K_d.abs() > 0.05
    expected = torch.tensor([literal_fraction(r.tolist()) for r in a], dtype=torch.float64)
    for mode in ("direct", "log", "log_ratio"):
        out = continued_fraction(a, mode, eps=0.01)
        torch.testing.assert_close(out[far], expected[far], rtol=1e-8, atol=1e-8)
        # near a pole |f| is capped by the guard |K_{d-1}| / eps
        assert (out.abs() <= continuants(a)[-2].abs() / 0.01 + 1e-9).all()


def test_proposition_1_equals_autograd_of_the_literal_fraction():
    g = torch.Generator().manual_seed(1)
    a = (torch.rand(300, 7, generator=g, dtype=torch.float64) * 2.5 + 0.5).requires_grad_(True)
    (grad,) = torch.autograd.grad(nested_fraction(a).sum(), a)
    torch.testing.assert_close(fraction_gradient(a.detach()), grad, rtol=1e-10, atol=1e-12)
    for mode in ("direct", "log"):
        (g_id,) = torch.autograd.grad(continued_fraction(a, mode, grad="identity").sum(), a)
        torch.testing.assert_close(g_id, grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("mode,grad", [("direct", "identity"), ("log", "identity"), ("log", "autograd")])
def test_custom_backwards_pass_gradcheck(mode, grad):
    a = (torch.rand(4, 3, 5, dtype=torch.float64) * 2 + 0.5).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: continued_fraction(t, mode, grad=grad), (a,))
    a0 = (torch.rand(5, 4, 3, dtype=torch.float64) * 2 + 0.5).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: continued_fraction(t, mode, grad=grad, dim=0), (a0,))


@pytest.mark.parametrize(
    "mode,grad",
    [
        ("direct", "identity"),
        ("direct", "autograd"),
        ("log", "identity"),
        ("log", "autograd"),
        ("log_ratio", "autograd"),
    ],
)
def test_no_nan_at_depth_12_with_random_inputs(mode, grad):
    g = torch.Generator().manual_seed(2)
    a = torch.randn(20000, 12, generator=g).requires_grad_(True)
    out = continued_fraction(a, mode, grad=grad)
    (da,) = torch.autograd.grad(out.sum(), a)
    assert torch.isfinite(out).all() and torch.isfinite(da).all()


def test_log_path_survives_continuants_that_overflow():
    a = torch.full((4, 12), 1e10)  # K_12 ~ 1e120 overflows float32
    assert not torch.isfinite(continued_fraction(a, "direct")).all()
    out = continued_fraction(a, "log")
    torch.testing.assert_close(out, torch.full((4,), 1e-10), rtol=1e-4, atol=0)


def test_odd_depth_has_its_pole_at_the_origin():
    """K_d(0, ..., 0) is 0 for odd d and 1 for even d: with small ladder weights an odd-depth fraction sits on
    the pole guard (|f| = |K_{d-1}| / eps), an even-depth one near 0. Why Cffn at d = 5 trains badly from the
    re-implementation's small init (the experiment records it)."""
    for mode in ("direct", "log"):
        assert continued_fraction(torch.zeros(1, 5), mode, eps=0.01).item() == pytest.approx(100.0)
        assert (
            abs(continued_fraction(torch.zeros(1, 4), mode, eps=0.01).item()) < 1e-12
        )  # float32 floor 1.4e-14


def test_continued_fraction_bad_input():
    with pytest.raises(ValueError, match="depth >= 1"):
        continued_fraction(torch.zeros(3, 0))
    with pytest.raises(TypeError, match="floating-point"):
        continued_fraction(torch.ones(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="mode"):
        continued_fraction(torch.ones(3, 2), mode="exp")
    with pytest.raises(ValueError, match="eps"):
        continued_fraction(torch.ones(3, 2), eps=0.0)
    with pytest.raises(ValueError, match="grad"):
        continued_fraction(torch.ones(3, 2), grad="numeric")
    with pytest.raises(ValueError, match="identity"):
        continued_fraction(torch.ones(3, 2), mode="log_ratio", grad="identity")
    with pytest.raises(ValueError, match="dim"):
        continued_fraction(torch.ones(3, 2), dim=2)


# --- blocks -------------------------------------------------------------------------------------------------
def _positive_block(block, p):
    """Weights and inputs that keep every fraction away from its pole, so the literal fraction is an oracle."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        block.ladders.weight.copy_(torch.rand(block.ladders.weight.shape, generator=g) + 1.0)
        block.gate.weight.copy_(torch.rand(block.gate.weight.shape, generator=g) * 0.4 + 0.1)  # gate > 0
    return torch.rand(2, 3, p, dtype=torch.float64, generator=g) + 0.5


def test_cffn_matches_its_formula():
    p, L, d = 6, 2, 4
    block = Cffn(p, num_ladders=L, depth=d).double()
    x = _positive_block(block, p)
    xhat = torch.sigmoid(x @ block.gate.weight.T) * x
    W = block.ladders.weight  # (d, L, p)
    z = torch.zeros(2, 3, L, p, dtype=torch.float64)
    for b in range(2):
        for t in range(3):
            for j in range(L):
                for i in range(p):
                    z[b, t, j, i] = literal_fraction((xhat[b, t, i] * W[:, j, i]).tolist())
    expected = x @ block.linear.weight.T + (z * block.ladders.combine).sum(-2)
    torch.testing.assert_close(block(x), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("gate", ["output", "input", "both"])
@pytest.mark.parametrize("activation", ["silu", "sigmoid"])
def test_gated_cffn_wiring_matches_its_formula(gate, activation):
    p, L, d = 5, 3, 3
    block = GatedCFFN(p, num_ladders=L, depth=d, gate=gate, activation=activation, skip=True).double()
    x = _positive_block(block, p)
    pre = x @ block.gate.weight.T
    g = torch.nn.functional.silu(pre) if activation == "silu" else torch.sigmoid(pre)
    u = g * x if gate in ("input", "both") else x
    W = block.ladders.weight
    c = torch.zeros_like(x)
    for idx in np.ndindex(2, 3):
        for j in range(L):
            for i in range(p):
                c[idx][i] += block.ladders.combine[j, i] * literal_fraction((u[idx][i] * W[:, j, i]).tolist())
    inner = g * c if gate in ("output", "both") else c
    expected = inner @ block.out.weight.T + x @ block.linear.weight.T
    torch.testing.assert_close(block(x), expected, rtol=1e-9, atol=1e-10)


def test_parameter_budgets():
    p, L, d = 32, 3, 5
    assert sum(t.numel() for t in Cffn(p, L, d).parameters()) == 2 * p * p + L * p * d + L * p
    assert sum(t.numel() for t in GatedCFFN(p, L, d).parameters()) == 2 * p * p + L * p * d + L * p
    assert sum(t.numel() for t in GatedCFFN(p, L, d, skip=True).parameters()) == 3 * p * p + L * p * d + L * p


def test_blocks_bad_input():
    with pytest.raises(ValueError, match="depth"):
        Cffn(8, depth=0)
    with pytest.raises(ValueError, match="num_ladders"):
        GatedCFFN(8, num_ladders=0)
    with pytest.raises(ValueError, match="gate"):
        GatedCFFN(8, gate="middle")
    with pytest.raises(ValueError, match="division"):
        GatedCFFN(8, division="exp")
    with pytest.raises(ValueError, match="eps"):
        Cffn(8, eps=-1.0)
    with pytest.raises(ValueError, match="log_ratio"):
        GatedCFFN(8, division="log_ratio")
    with pytest.raises(ValueError, match="dim=8"):
        Cffn(8)(torch.zeros(2, 3, 7))
    with pytest.raises(ValueError, match="dim=8"):
        GatedCFFN(8)(torch.zeros(2, 7))
    with pytest.raises(ValueError, match="total_steps"):
        DyadicSchedule(0)


def test_dyadic_schedule_thresholds():
    s = DyadicSchedule(160)
    # column i joins at 160 (1 - 2^-i): 80, 120, 140, 150, 155
    assert [s.active_depth(t, 5) for t in (0, 79, 80, 119, 120, 140, 150, 154, 155, 159)] == [
        0,
        0,
        1,
        1,
        2,
        3,
        4,
        4,
        5,
        5,
    ]


def test_dyadic_schedule_freezes_columns_even_under_weight_decay():
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(
            vocab_size=11, context=8, d_model=8, n_head=2, n_layer=1, ffn="cffn", ffn_kwargs={"depth": 3}
        )
    )
    ladder = model.blocks[0].ffn.ladders
    start = ladder.weight.detach().clone()
    steps = 16  # column 1 joins at step 8, column 2 at 12, column 3 at 14
    schedule = DyadicSchedule(steps)
    snapshots, step0 = {}, {}

    class Step0:  # listed before the schedule: sees the depth that step 0 ran with
        def on_backward(self, step, model):
            if step == 0:
                step0["depth"] = int(ladder.trainable_depth)
                step0["grad"] = ladder.weight.grad.detach().clone()

    class Snap:  # listed after it: sees the weights once frozen columns are restored
        def on_step_end(self, step, model):
            snapshots[step] = ladder.weight.detach().clone()

    data = TokenStream(torch.arange(400) % 11)
    # train() calls the schedule's start (freeze for step 0) and finish (unfreeze) itself
    train(
        model,
        data,
        TrainConfig(steps=steps, batch_size=4, weight_decay=0.5, lr=1e-2),
        callbacks=[Step0(), schedule, Snap()],
    )
    assert step0["depth"] == 0 and not step0["grad"].any()  # step 0 already ran with every column frozen
    assert torch.equal(snapshots[7], start)  # every column frozen for the first half
    assert not torch.equal(snapshots[8][0], start[0]) and torch.equal(snapshots[11][1:], start[1:])
    assert not torch.equal(snapshots[12][1], start[1]) and torch.equal(snapshots[13][2], start[2])
    assert not torch.equal(snapshots[15][2], start[2])
    # other parameters train from the start; after training every column is trainable again
    assert int(ladder.trainable_depth) == 3


@pytest.mark.parametrize(
    "ffn,kwargs", [("cffn", {"depth": 4}), ("gated_cf", {}), ("gated_cf", {"division": "direct"})]
)
def test_blocks_train_in_the_stack_and_stay_causal(ffn, kwargs):
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(vocab_size=11, context=16, d_model=16, n_head=2, n_layer=1, ffn=ffn, ffn_kwargs=kwargs)
    )
    x = torch.randint(0, 11, (2, 16), generator=torch.Generator().manual_seed(1))
    base = model.eval()(x)
    x2 = x.clone()
    x2[:, 9] = (x2[:, 9] + 1) % 11
    assert torch.equal(model(x2)[:, :9], base[:, :9])
    data = TokenStream(torch.arange(600) % 11)
    res = train(model, data, TrainConfig(steps=60, batch_size=8, lr=1e-2), val=data)
    assert res.finite and res.val_loss < 1.0  # a period-11 sequence is learnable


# --- any leading dimensions ------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda: Cffn(8, depth=5), lambda: GatedCFFN(8, depth=4, skip=True)])
@pytest.mark.parametrize(
    "shape", [(8,), (5, 8), (0, 8), (1, 2, 6, 8), (5, 2, 6, 8), (3, 2, 6, 8), (2, 1, 3, 2, 8)]
)
def test_blocks_accept_any_leading_dimensions(make, shape):
    """Each row of (..., p) is mapped on its own: the result equals the block on the rows as one (1, N, p) batch."""
    torch.manual_seed(0)
    block = make()
    x = torch.randn(*shape)
    y = block(x)
    assert y.shape == x.shape
    expected = block(x.reshape(1, -1, 8)).reshape(shape)
    torch.testing.assert_close(y, expected, rtol=1e-6, atol=1e-7)
    if x.shape[0]:
        row = block(x.reshape(-1, 8)[-1:].reshape(1, 1, 8)).reshape(8)
        torch.testing.assert_close(y.reshape(-1, 8)[-1], row, rtol=1e-6, atol=1e-7)


def test_blocks_input_validation_names_x():
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        Cffn(8)(torch.zeros(2, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="x must be"):
        GatedCFFN(8)([0.0] * 8)
    with pytest.raises(ValueError, match="dim=8"):
        Cffn(8)(torch.tensor(1.0))
    with pytest.raises(ValueError, match="tail_offset"):
        Cffn(8, tail_offset=float("nan"))
    with pytest.raises(ValueError, match="tail_offset"):
        GatedCFFN(8, tail_offset="1")


# --- the last-denominator offset ---------------------------------------------------------------------------------
def test_tail_offset_moves_the_odd_depth_pole_off_the_origin():
    """a_d = u W_d + b: at u = 0 every fraction is [0, ..., 0, b] -> 1/b (odd depth) or b (even), off the guard;
    the offset costs L p parameters."""
    p, L = 8, 3
    for d in (1, 4, 5):
        block = Cffn(p, L, d, tail_offset=2.0)
        out = block(torch.zeros(3, p))
        f = 0.5 if d % 2 else 2.0
        torch.testing.assert_close(out, (f * block.ladders.combine).sum(0).expand(3, p))
        assert sum(t.numel() for t in block.parameters()) == 2 * p * p + L * p * d + 2 * L * p
    plain = Cffn(p, L, 5)
    assert torch.all(plain(torch.zeros(1, p)).abs() > 0)  # no offset: on the guard, |f| = 1 / eps = 100
    torch.testing.assert_close(plain(torch.zeros(1, p)), (100.0 * plain.ladders.combine).sum(0)[None])


def test_tail_offset_is_a_learnable_offset_of_the_last_denominator():
    torch.manual_seed(1)
    block = Cffn(4, 2, 3, tail_offset=1.0, grad="autograd")
    with torch.no_grad():
        block.ladders.tail.normal_()
    x = torch.randn(5, 4, dtype=torch.float32)
    u = torch.sigmoid(block.gate(x)) * x
    w, b, v = block.ladders.weight, block.ladders.tail, block.ladders.combine
    expected = block.linear(x)
    for j in range(2):
        for i in range(4):
            rows = [
                [float(u[n, i] * w[k, j, i]) + (float(b[j, i]) if k == 2 else 0.0) for k in range(3)]
                for n in range(5)
            ]
            f = torch.tensor(
                [
                    literal_fraction(r)
                    if abs(float(continuant(torch.tensor(r, dtype=torch.float64)))) >= 0.01
                    else float("nan")
                    for r in rows
                ]
            )
            expected[:, i] = expected[:, i] + v[j, i] * f
    got = block(x)
    ok = torch.isfinite(expected)
    torch.testing.assert_close(got[ok], expected[ok].to(got.dtype), rtol=1e-4, atol=1e-5)
    (g,) = torch.autograd.grad(got.sum(), b)
    assert torch.isfinite(g).all() and g.abs().sum() > 0


# --- the log path's autograd gradient at a zero denominator -------------------------------------------------------
def _exact_gradient(row):
    """df/da_k = (-1)^k (K_{d-k} / K_d)^2 with continuants in exact rational arithmetic (fractions.Fraction)."""
    from fractions import Fraction

    a = [Fraction(x) for x in row]
    d = len(a)
    K = [Fraction(1), a[d - 1]]
    for k in range(2, d + 1):
        K.append(a[d - k] * K[k - 1] + K[k - 2])
    return [float((-1) ** k * (K[d - k] / K[d]) ** 2) for k in range(1, d + 1)]


def _exact_value(row):
    """K_{d-1} / K_d in exact rational arithmetic (defined where a nested 1/0 is not)."""
    from fractions import Fraction

    a = [Fraction(x) for x in row]
    d = len(a)
    K = [Fraction(1), a[d - 1]]
    for k in range(2, d + 1):
        K.append(a[d - k] * K[k - 1] + K[k - 2])
    return float(K[d - 1] / K[d])


@pytest.mark.parametrize("mode", ["direct", "log", "log_ratio"])
def test_autograd_gradient_at_a_zero_denominator_matches_the_closed_form(mode):
    rows = [
        [1.5, 2.0, -0.7, 0.0],  # last denominator exactly 0
        [0.8, -1.3, 0.0, 2.2, 0.0],
        [2.0, 0.0],
        [1.1, 0.0, 1.7],  # an interior zero
        [-0.6, 1.9, 1e-40, 1.2],  # below the log path's floor
    ]
    for row in rows:
        a = torch.tensor([row], dtype=torch.float64, requires_grad=True)
        (g,) = torch.autograd.grad(continued_fraction(a, mode, eps=1e-3, grad="autograd").sum(), a)
        np.testing.assert_allclose(g[0].numpy(), _exact_gradient(row), rtol=1e-9, atol=1e-12)


def test_log_autograd_gradient_matches_finite_differences_near_zero():
    """Central differences of the exact fraction around a last denominator of 0 (float64, h = 1e-6)."""
    row = [1.5, 2.0, -0.7, 0.0]
    a = torch.tensor([row], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(continued_fraction(a, "log", eps=1e-3, grad="autograd").sum(), a)
    h = 1e-6
    for k in range(4):
        up, down = list(row), list(row)
        up[k] += h
        down[k] -= h
        fd = (_exact_value(up) - _exact_value(down)) / (2 * h)
        assert g[0, k].item() == pytest.approx(fd, rel=1e-5, abs=1e-8)


def test_log_autograd_gradient_at_zero_in_float32():
    a = torch.tensor([[1.5, 2.0, -0.7, 0.0]], requires_grad=True)
    (g,) = torch.autograd.grad(continued_fraction(a, "log", grad="autograd").sum(), a)
    np.testing.assert_allclose(g[0].numpy(), _exact_gradient([1.5, 2.0, -0.7, 0.0]), rtol=1e-5, atol=1e-6)


# --- the experiment's references --------------------------------------------------------------------------------
def test_unigram_reference_and_ffn_ratios():
    from neurips26.lm.cofrgenet.experiment import _ffn_ratios, _NoFFN, _unigram_loss

    train_tokens = torch.tensor([0, 0, 0, 1])  # add-one counts: 4, 2, 1 over vocab 3
    val = TokenStream(torch.tensor([0, 1, 2, 0, 1]))
    got = _unigram_loss(train_tokens, val, vocab=3, context=2, max_tokens=4)
    # targets of the two windows: [1, 2], [0, 1]
    expected = -(np.log(2 / 7) + np.log(1 / 7) + np.log(4 / 7) + np.log(2 / 7)) / 4
    assert got == pytest.approx(expected, rel=1e-12)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=5, context=8, n_layer=2, n_head=2, d_model=8), ffn=lambda c, i: _NoFFN())
    assert _ffn_ratios(model, torch.randint(0, 5, (2, 8))) == [0.0, 0.0]


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("cofrgenet", tmp_path)
