"""NextLat: latent dynamics, the losses' gradient flow, roll-outs, speculative decoding, worlds and metrics."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.harness.testing import assert_quick_verdict
from neurips26.lm import GPTConfig, SequenceDataset, TrainConfig, train
from neurips26.lm.nextlat import (
    LatentDynamics,
    MultiTokenModel,
    NextLatModel,
    effective_rank,
    greedy_decode,
    grid_walk,
    linear_probe_accuracy,
    path_star,
    self_speculative_decode,
)


def small(horizon=1, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=13, context=32, n_layer=2, n_head=2, d_model=16, **kw)
    return NextLatModel(cfg, horizon=horizon)


def test_dynamics_is_residual_and_starts_at_identity():
    dyn = LatentDynamics(8, hidden=12, layers=3)
    h, e = torch.randn(3, 5, 8), torch.randn(3, 5, 8)
    assert torch.equal(dyn(h, e), h)  # zero-initialised last layer
    with torch.no_grad():
        dyn.mlp[-1].weight.normal_()
    expected = h + dyn.mlp(F.layer_norm(torch.cat([h, e], -1), (16,), dyn.norm.weight, dyn.norm.bias))
    torch.testing.assert_close(dyn(h, e), expected)
    assert sum(isinstance(m, torch.nn.Linear) for m in dyn.mlp) == 3
    with pytest.raises(ValueError, match="same shape"):
        dyn(h, e[..., :4])


@pytest.mark.parametrize("horizon", [1, 4])
def test_rollout_shapes_and_teacher_forcing(horizon):
    model = small(horizon)
    with torch.no_grad():
        model.dynamics.mlp[-1].weight.normal_(std=0.1)
    x = torch.randint(0, 13, (2, 10))
    h = model.hidden_states(x)
    preds = model.rollout(h, x)
    assert len(preds) == horizon
    for k, pred in enumerate(preds, start=1):
        assert pred.shape == (2, 10 - k, 16)
    # step k from source t uses tokens x_{t+1..t+k}: recompute by hand for source t = 2
    t, pred = 2, h[:, 2]
    for k in range(1, horizon + 1):
        pred = model.dynamics(pred, model.gpt.tok_emb(x[:, t + k]))
        torch.testing.assert_close(preds[k - 1][:, t], pred)


def test_losses_match_their_definitions():
    model = small(horizon=2)
    with torch.no_grad():
        model.dynamics.mlp[-1].weight.normal_(std=0.1)
    x = torch.randint(0, 13, (3, 9))
    y = torch.randint(0, 13, (3, 9))
    h = model.hidden_states(x)
    W = model.gpt.head.weight
    lh, lkl = 0.0, 0.0
    pred = h
    for k in (1, 2):
        pred = model.dynamics(pred[:, : 9 - k], model.gpt.tok_emb(x[:, k:]))
        tgt = h[:, k:]
        lh += F.smooth_l1_loss(pred, tgt)
        p = torch.softmax(tgt @ W.T, -1)
        lkl += F.kl_div(torch.log_softmax(pred @ W.T, -1), p, reduction="none").sum(-1).mean()
    loss_h, loss_kl = model.latent_losses(h, x)
    torch.testing.assert_close(loss_h, lh / 2)
    torch.testing.assert_close(loss_kl, lkl / 2)
    total, logs = model.training_loss(x, y)
    ntp = F.cross_entropy((h @ W.T).reshape(-1, 13), y.reshape(-1))
    torch.testing.assert_close(total, ntp + 1.0 * lh / 2 + 0.5 * lkl / 2)
    assert set(logs) == {"ntp", "latent", "kl", "latent_var"}


def test_targets_are_stop_gradient():
    """The dynamics loss sends no gradient into the target latent, and the KL uses detached head weights."""
    model = small()
    x = torch.randint(0, 13, (2, 8))
    h = model.hidden_states(x).detach().requires_grad_(True)
    loss_h, loss_kl = model.latent_losses(h, x)
    (g_h,) = torch.autograd.grad(loss_h, h, retain_graph=True)
    # position 0 is only ever a source, the last position only a target: its gradient must be exactly zero
    assert g_h[:, -1].abs().max() == 0 and g_h[:, 0].abs().max() > 0
    (g_kl,) = torch.autograd.grad(loss_kl, h)
    assert g_kl[:, -1].abs().max() == 0 and g_kl[:, 0].abs().max() > 0


def test_kl_gradient_reaches_prediction_not_weights():
    model = small()
    x = torch.randint(0, 13, (2, 8))
    with torch.no_grad():
        h = model.hidden_states(x)
    W = model.gpt.head.weight
    pred = h[:, :-1].clone().requires_grad_(True)
    q = F.log_softmax(F.linear(pred, W.detach()), -1)
    p = F.softmax(F.linear(h[:, 1:], W), -1).detach()
    (p * (p.log() - q)).sum(-1).mean().backward()
    assert pred.grad is not None and W.grad is None


def test_nextlat_trains_and_deploys_the_plain_transformer():
    walk = grid_walk(64, 17, size=3, n_colours=2, rng=0)
    model = NextLatModel(GPTConfig(vocab_size=walk.tokenizer.vocab_size, context=16, d_model=16, n_head=2))
    data = SequenceDataset(walk.tokens)
    res = train(model, data, TrainConfig(steps=20, batch_size=8), val=data)
    assert res.finite and {"latent", "kl"} <= set(res.history[0])
    x = torch.as_tensor(walk.tokens[:2, :-1])
    assert torch.equal(model(x), model.gpt(x))
    assert model.num_parameters("deployed") == model.gpt.num_parameters()
    assert model.num_parameters("all") == model.num_parameters("deployed") + model.num_parameters("dynamics")


def test_mtp_baseline_loss():
    torch.manual_seed(0)
    m = MultiTokenModel(GPTConfig(vocab_size=13, context=16, d_model=16, n_head=2), heads=2)
    x, y = torch.randint(0, 13, (2, 10)), torch.randint(0, 13, (2, 10))
    loss, logs = m.training_loss(x, y)
    h = m.hidden_states(x)
    expected_extra = (
        F.cross_entropy(m.extra[0](h[:, :-1]).reshape(-1, 13), y[:, 1:].reshape(-1))
        + F.cross_entropy(m.extra[1](h[:, :-2]).reshape(-1, 13), y[:, 2:].reshape(-1))
    ) / 2
    torch.testing.assert_close(torch.tensor(logs["mtp"]), expected_extra.detach())


def test_nextlat_bad_input():
    cfg = GPTConfig(vocab_size=5, context=8, d_model=8, n_head=2)
    with pytest.raises(ValueError, match="horizon"):
        NextLatModel(cfg, horizon=0)
    with pytest.raises(ValueError, match="lambda_h"):
        NextLatModel(cfg, lambda_h=-1.0)
    with pytest.raises(TypeError, match="gpt"):
        NextLatModel("gpt2")
    m = NextLatModel(cfg, horizon=3)
    x = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="horizon"):
        m.rollout(m.hidden_states(x), x)
    with pytest.raises(ValueError, match="part"):
        m.num_parameters("head")
    with pytest.raises(ValueError, match="heads"):
        MultiTokenModel(cfg, heads=0)
    with pytest.raises(ValueError, match="weight"):
        MultiTokenModel(cfg, weight=-0.5)
    with pytest.raises(TypeError, match="gpt"):
        MultiTokenModel(cfg.to_dict())
    with pytest.raises(ValueError, match="layers"):
        LatentDynamics(8, layers=0)


# --- speculative decoding -----------------------------------------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000), prompt_len=st.integers(1, 6), new=st.integers(1, 20), draft=st.integers(0, 5)
)
def test_speculative_decoding_equals_greedy_on_random_models(seed, prompt_len, new, draft):
    model = small(seed=seed)
    with torch.no_grad():  # a non-trivial drafter
        model.dynamics.mlp[-1].weight.normal_(std=0.3)
    prompt = torch.randint(0, 13, (prompt_len,), generator=torch.Generator().manual_seed(seed))
    res = self_speculative_decode(model, prompt, new, draft=draft)
    assert torch.equal(res.tokens, greedy_decode(model, prompt, new))
    assert res.tokens.shape == (prompt_len + new,)
    assert 1 <= res.forward_passes <= new and res.greedy_passes == new
    assert res.saved == new - res.forward_passes


def test_speculative_decoding_equals_the_stack_generate_in_float64():
    model = small(seed=3).double()
    prompt = torch.tensor([1, 2, 3])
    res = self_speculative_decode(model, prompt, 20, draft=4)
    assert torch.equal(res.tokens, model.gpt.generate(prompt[None], 20)[0])


def test_a_perfect_drafter_saves_passes():
    """A model that repeats one token, with a drafter that keeps the latent: every draft is accepted."""
    model = small(seed=1)
    with torch.no_grad():
        model.gpt.head.weight.zero_()
        model.gpt.head.weight[4] = 1.0  # tied embedding: argmax of W h is 4 whenever sum(h) > 0
        for block in model.gpt.blocks:
            for p in block.parameters():
                p.zero_()
        model.gpt.norm_out.bias.fill_(1.0)
        model.gpt.norm_out.weight.zero_()
    res = self_speculative_decode(model, torch.tensor([4]), 20, draft=4)
    assert (res.tokens[1:] == 4).all()
    # passes yield 1, 5, 5, 5, 4 tokens (the last draft fills the remaining room exactly)
    assert res.forward_passes == 5 and res.mean_accepted == 4.0
    assert res.saved == 15


def test_confidence_threshold_shortens_drafts():
    model = small(seed=2)
    res = self_speculative_decode(model, torch.tensor([1, 2]), 10, draft=4, min_confidence=1.0)
    assert all(d == 0 for d in res.drafted) and res.forward_passes == 10


def test_speculative_bad_input():
    model = small()
    with pytest.raises(ValueError, match="exceeds the context"):
        self_speculative_decode(model, torch.tensor([1, 2]), 31)
    with pytest.raises(ValueError, match="max_new_tokens"):
        self_speculative_decode(model, torch.tensor([1]), 0)
    with pytest.raises(ValueError, match="draft"):
        self_speculative_decode(model, torch.tensor([1]), 4, draft=-1)
    with pytest.raises(TypeError, match="NextLatModel"):
        self_speculative_decode(model.gpt, torch.tensor([1]), 4)
    with pytest.raises(ValueError, match="prompt"):
        greedy_decode(model, torch.tensor([99]), 4)
    with pytest.raises(ValueError, match="prompt"):
        greedy_decode(model, torch.zeros((2, 3), dtype=torch.long), 4)
    with pytest.raises(TypeError, match="prompt"):
        greedy_decode(model, torch.tensor([1.0]), 4)
    with pytest.raises(ValueError, match="min_confidence"):
        self_speculative_decode(model, torch.tensor([1]), 4, min_confidence=1.5)
    with pytest.raises(TypeError, match="model"):
        greedy_decode(torch.nn.Linear(2, 2), torch.tensor([1]), 4)


# --- worlds and metrics -------------------------------------------------------------------------------------
def test_grid_walk_follows_its_rules():
    walk = grid_walk(200, 40, size=4, n_colours=2, p_obs=0.3, rng=1)
    tok = walk.tokenizer
    moves = {tok.encode(m)[0]: d for m, d in {"N": (-1, 0), "E": (0, 1), "S": (1, 0), "W": (0, -1)}.items()}
    colours = {tok.encode(f"colour{k}")[0]: k for k in range(2)}
    n_obs = 0
    for seq, cells in zip(walk.tokens, walk.cells, strict=True):
        r, c = divmod(int(seq[0]), 4)
        assert cells[0] == r * 4 + c
        prev_obs = False
        for t in range(1, 40):
            token = int(seq[t])
            if token in moves:
                dr, dc = moves[token]
                r, c = r + dr, c + dc
                assert 0 <= r < 4 and 0 <= c < 4  # never leaves the grid
                prev_obs = False
            else:
                assert colours[token] == r % 2 and not prev_obs  # aliased row colour, never twice in a row
                prev_obs = True
                n_obs += 1
            assert cells[t] == r * 4 + c
    assert 0.15 < n_obs / (200 * 39) < 0.3


def test_path_star_structure():
    ps = path_star(50, degree=3, arm_length=4, n_nodes=20, rng=2)
    EDGE, QUERY, ANS = 20, 21, 22
    for seq in ps.tokens:
        edges = seq[: 3 * 12].reshape(12, 3)
        assert (edges[:, 2] == EDGE).all()
        q = 3 * 12
        assert seq[q] == QUERY and seq[q + 3] == ANS
        centre, goal = seq[q + 1], seq[q + 2]
        path = seq[q + 4 :]
        assert path[0] == centre and path[-1] == goal and len(path) == 5
        adj = {}
        for u, v, _ in edges:
            adj.setdefault(int(u), set()).add(int(v))
        assert len(adj[int(centre)]) == 3
        for a, b in zip(path[:-1], path[1:], strict=True):
            assert int(b) in adj[int(a)]
    assert ps.answer_mask[:, ps.first_step].all() and not ps.answer_mask[:, ps.first_step - 1].any()


def test_effective_rank_closed_forms():
    rng = np.random.default_rng(0)
    U = np.linalg.qr(rng.standard_normal((200, 5)))[0]
    assert effective_rank(U * np.sqrt(200), center=False) == pytest.approx(5.0)  # flat spectrum of rank 5
    s = np.array([3.0, 1.0])
    H = U[:, :2] * s
    p = s / s.sum()
    assert effective_rank(H, center=False) == pytest.approx(np.exp(-(p * np.log(p)).sum()))
    assert effective_rank(np.outer(rng.standard_normal(50), rng.standard_normal(4))) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="variance"):
        effective_rank(np.ones((10, 3)))
    with pytest.raises(ValueError, match="2-D"):
        effective_rank(np.ones(3))


def test_linear_probe_accuracy():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 5))
    y = (X[:, 0] > 0).astype(int)
    assert linear_probe_accuracy(X[:300], y[:300], X[300:], y[300:]) > 0.95
    # a label that no linear map of the features carries scores at chance
    noise = rng.integers(0, 2, 400)
    assert abs(linear_probe_accuracy(X[:300], noise[:300], X[300:], noise[300:]) - 0.5) < 0.15
    with pytest.raises(ValueError, match="same columns"):
        linear_probe_accuracy(X[:300], y[:300], X[300:, :3], y[300:])
    with pytest.raises(ValueError, match="one label per row"):
        linear_probe_accuracy(X[:300], y[:200], X[300:], y[300:])
    with pytest.raises(ValueError, match="two classes"):
        linear_probe_accuracy(X[:300], np.zeros(300), X[300:], y[300:])
    with pytest.raises(ValueError, match="C must"):
        linear_probe_accuracy(X[:300], y[:300], X[300:], y[300:], C=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        linear_probe_accuracy(X[:300], y[:300], X[300:], y[300:], max_iter=0)


def test_worlds_bad_input():
    with pytest.raises(ValueError, match="n_colours"):
        grid_walk(3, 10, size=3, n_colours=4)
    with pytest.raises(ValueError, match="p_obs"):
        grid_walk(3, 10, p_obs=1.0)
    with pytest.raises(ValueError, match="n_nodes"):
        path_star(3, degree=3, arm_length=5, n_nodes=10)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("nextlat", tmp_path)


def test_defaults_on_real_text_byte_level():
    """The documented usage on data the experiment never sees: bytes of a stdlib module's source."""
    import inspect
    import json

    from neurips26.lm import ByteTokenizer, TokenStream

    tok = ByteTokenizer()
    ids = tok.encode(inspect.getsource(json)[:4000])
    torch.manual_seed(0)
    model = NextLatModel(GPTConfig(vocab_size=tok.vocab_size, context=48, n_layer=1, d_model=32, n_head=2))
    res = train(model, TokenStream(ids), TrainConfig(steps=15, batch_size=4), progress=False)
    assert res.finite and res.history[-1]["latent"] >= 0
    prompt = torch.as_tensor(ids[:8])
    out = self_speculative_decode(model, prompt, 24)
    assert torch.equal(out.tokens, greedy_decode(model, prompt, 24))
    assert out.saved == 24 - out.forward_passes >= 0
