"""GRPO trainer: advantages and loss against hand computation, masking, variants, learning on a toy reward."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.lm import GPT, GPTConfig
from neurips26.lm.grpo import (
    GRPOConfig,
    GRPOTrainer,
    RolloutBatch,
    clipped_policy_loss,
    completion_logprobs,
    group_advantages,
    sample_completions,
    token_weights,
)


def tiny(vocab=8, context=16, seed=0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=vocab, context=context, n_layer=2, n_head=2, d_model=32))


def count_reward(target):
    def reward(contexts, completions):
        return [sum(t == target for t in c) / max(len(c), 1) for c in completions]

    return reward


# --- hand-computed advantages and loss on a 2-group batch ---------------------------------------------------
def test_advantages_hand_computed():
    r = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5]])
    a = group_advantages(r, scale=True, eps=0.0 + 1e-12)
    # group 1: mean 1/3, population std sqrt(2)/3 -> (2/3)/(sqrt2/3) = sqrt2, (-1/3)/(sqrt2/3) = -1/sqrt2
    assert a[0].tolist() == pytest.approx([math.sqrt(2), -1 / math.sqrt(2), -1 / math.sqrt(2)], rel=1e-6)
    assert a[1].tolist() == [0.0, 0.0, 0.0]  # equal rewards carry no signal
    dr = group_advantages(r, scale=False)
    assert dr[0].tolist() == pytest.approx([2 / 3, -1 / 3, -1 / 3])


def test_loss_hand_computed_two_groups():
    # 2 groups x G=2 sequences, L=2 token slots; sequence 3 has one token (second slot masked)
    adv = torch.tensor([1.0, -1.0, 2.0, -2.0])
    ratio = torch.tensor([[1.5, 1.0], [0.5, 1.1], [0.9, 1.3], [1.0, 1.0]])
    mask = torch.tensor([[1, 1], [1, 1], [1, 1], [1, 0]])
    old = torch.zeros(4, 2) - 1.0
    logp = old + ratio.log()
    eps = 0.2

    def per_token(r, a):  # -min(r a, clip(r) a), written out case by case
        c = min(max(r, 1 - eps), 1 + eps)
        return -min(r * a, c * a)

    # "grpo": mean over each sequence's tokens, then over the 4 sequences
    seq_means = []
    for i in range(4):
        toks = [per_token(float(ratio[i, t]), float(adv[i])) for t in range(2) if mask[i, t]]
        seq_means.append(sum(toks) / len(toks))
    expect_grpo = sum(seq_means) / 4
    # "token": sum over all 7 tokens / 7; "dr_grpo": sum / (N * L_max) with L_max = 2
    all_toks = [
        per_token(float(ratio[i, t]), float(adv[i])) for i in range(4) for t in range(2) if mask[i, t]
    ]
    for loss_type, expect in [
        ("grpo", expect_grpo),
        ("token", sum(all_toks) / 7),
        ("dr_grpo", sum(all_toks) / 8),
    ]:
        w = token_weights(mask, loss_type, max_len=2)
        loss, stats = clipped_policy_loss(logp, old, adv, w, clip_low=eps)
        assert float(loss) == pytest.approx(expect, rel=1e-6), loss_type
    # clipped tokens: (1.5, A>0) and (0.5, A<0) and (1.3, A>0) -> 3 of 7
    assert stats["clip_fraction"] == pytest.approx(3 / 7)
    # clip-higher: eps_high = 0.6 leaves 1.5 and 1.3 unclipped
    w = token_weights(mask, "token")
    loss_hi, st_hi = clipped_policy_loss(logp, old, adv, w, clip_low=eps, clip_high=0.6)
    assert st_hi["clip_fraction"] == pytest.approx(1 / 7)
    assert float(loss_hi) < float(clipped_policy_loss(logp, old, adv, w, clip_low=eps)[0])


def test_kl_term_is_k3_estimator():
    logp = torch.tensor([[-1.0, -2.0]])
    ref = torch.tensor([[-1.5, -1.0]])
    w = token_weights(torch.ones(1, 2, dtype=torch.long), "token")
    loss0, _ = clipped_policy_loss(logp, logp, torch.zeros(1), w)
    loss, st = clipped_policy_loss(logp, logp, torch.zeros(1), w, ref_logp=ref, beta_kl=0.5)
    k3 = [math.exp(d) - d - 1 for d in (-0.5, 1.0)]
    assert float(loss0) == 0.0
    assert float(loss) == pytest.approx(0.5 * sum(k3) / 2)
    assert st["kl"] == pytest.approx(sum(k3) / 2)


# --- masking: prompt tokens get no gradient -----------------------------------------------------------------
def test_masked_tokens_receive_no_gradient():
    model = tiny()
    torch.manual_seed(1)
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 0], [1, 2, 3, 7, 6, 0, 0]])
    prompt_len = torch.tensor([3, 3])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])  # row 2: 3 completion tokens then padding
    captured = {}

    def keep(module, inp, out):
        out.retain_grad()
        captured["logits"] = out

    handle = model.head.register_forward_hook(keep)
    logp = completion_logprobs(model, ids, prompt_len)
    handle.remove()
    loss, _ = clipped_policy_loss(logp, logp.detach(), torch.tensor([1.0, -0.5]), token_weights(mask, "grpo"))
    loss.backward()
    g = captured["logits"].grad.abs().sum(-1)  # (B, T): gradient reaching each position's logits
    # position t predicts ids[t+1]: completion starts at 3, so positions 0, 1 (prompt) and the last get nothing
    assert torch.all(g[:, :2] == 0)
    assert torch.all(g[0, 2:6] > 0)
    assert torch.all(g[1, 2:5] > 0) and torch.all(g[1, 5:] == 0)  # padding after the end token: none
    assert torch.all(g[:, -1] == 0)


def test_completion_logprobs_match_bruteforce_with_ragged_contexts():
    model = tiny()
    rows = [[1, 2, 3, 4, 5], [2, 3, 4, 5, 6]]
    pl = torch.tensor([2, 3])
    ids = torch.tensor(rows)
    got = completion_logprobs(model, ids, pl)
    for b, row in enumerate(rows):
        for j in range(len(row) - int(pl[b])):
            t = int(pl[b]) + j
            logits = model(torch.tensor([row[:t]]))[0, -1]
            ref = torch.log_softmax(logits, -1)[row[t]]
            assert float(got[b, j].detach()) == pytest.approx(float(ref.detach()), abs=1e-5)


# --- sampling and rollouts ----------------------------------------------------------------------------------
def test_sample_completions_masks_after_eos_and_is_seeded():
    model = tiny()
    ctx = torch.tensor([[1, 2]] * 16)
    t1, m1 = sample_completions(model, ctx, 6, eos_token_id=0, generator=torch.Generator().manual_seed(3))
    t2, m2 = sample_completions(model, ctx, 6, eos_token_id=0, generator=torch.Generator().manual_seed(3))
    assert torch.equal(t1, t2) and torch.equal(m1, m2)
    for row, m in zip(t1.tolist(), m1.tolist()):
        if 0 in row:
            end = row.index(0)
            assert m[: end + 1] == [1] * (end + 1) and sum(m) == end + 1
            assert all(t == 0 for t in row[end:])
        else:
            assert sum(m) == len(row)


def test_rollout_groups_contexts_and_rewards():
    model = tiny()
    trainer = GRPOTrainer(model, count_reward(3), GRPOConfig(group_size=4, max_new_tokens=3))
    batch = trainer.rollout([[1], [2, 5], [4]])
    assert isinstance(batch, RolloutBatch) and len(batch) == 12 and batch.n_groups == 3
    assert batch.prompt_len.tolist() == [1] * 4 + [2] * 4 + [1] * 4
    for i, comp in enumerate(batch.completions):
        ctx = batch.contexts[i // 4]
        assert batch.ids[i, : len(ctx)].tolist() == ctx
        assert batch.ids[i, len(ctx) : len(ctx) + len(comp)].tolist() == comp
        assert float(batch.rewards[i]) == pytest.approx(comp.count(3) / len(comp))
    adv = batch.advantages.view(3, 4)
    assert torch.allclose(adv.mean(1), torch.zeros(3), atol=1e-5)


def test_meta_reaches_the_reward():
    seen = []

    def reward(contexts, completions, meta):
        seen.extend(meta)
        return [0.0] * len(completions)

    trainer = GRPOTrainer(tiny(), reward, GRPOConfig(group_size=2, max_new_tokens=2))
    trainer.rollout([[1], [2]], meta=["a", "b"])
    assert seen == ["a", "a", "b", "b"]


def test_dynamic_sampling_drops_equal_reward_groups():
    # the reward is 1 only for context [5]: every other group has equal rewards and is dropped
    def reward(contexts, completions):
        return [float(c == [5]) * (comp[0] % 2) for c, comp in zip(contexts, completions)]

    torch.manual_seed(0)
    cfg = GRPOConfig.dapo(group_size=8, max_new_tokens=2)
    trainer = GRPOTrainer(tiny(), reward, cfg)
    batch = trainer.rollout([[1], [2], [5], [3], [4]], n_groups=1)
    assert batch.contexts == [[5]]
    assert batch.stats["groups_sampled"] == 3.0 and batch.stats["groups_kept"] == 1.0
    plain = GRPOTrainer(tiny(), reward, GRPOConfig(group_size=8, max_new_tokens=2))
    assert plain.rollout([[1], [2], [5]]).n_groups == 3


def test_presets():
    dr = GRPOConfig.dr_grpo()
    assert not dr.scale_rewards and dr.loss_type == "dr_grpo"
    dapo = GRPOConfig.dapo(lr=1e-3)
    assert dapo.clip_high == 0.28 and dapo.clip_eps == 0.2 and dapo.dynamic_sampling and dapo.lr == 1e-3
    assert dapo.loss_type == "token"


def test_micro_batches_give_the_same_update():
    # plain SGD, so the update is -lr * grad: AdamW's first step lr * g / (|g| + 1e-8) would turn a round-off
    # difference in a coordinate with |g| ~ 1e-8 into one of order lr, whatever the micro-batching
    grads, states = [], []
    for micro in (None, 3):
        model = tiny(seed=4)
        cfg = GRPOConfig(group_size=4, max_new_tokens=4, micro_batch=micro, lr=1e-2, seed=7, grad_clip=None)
        sgd = torch.optim.SGD(model.parameters(), lr=cfg.lr)
        trainer = GRPOTrainer(model, count_reward(2), cfg, optimizer=sgd)
        trainer.step([[1], [2, 3]])
        grads.append({k: p.grad.clone() for k, p in model.named_parameters()})
        states.append({k: v.clone() for k, v in model.state_dict().items()})
    eps = torch.finfo(torch.float32).eps
    for k, g in grads[0].items():
        # a gradient entry sums 8 sequences x 5 positions of float32 products, each through inner sums of at
        # most 4 d_model = 128 terms, in another grouping: error about (40 + 128) eps of the entries' scale
        tol = (40 + 128) * eps * float(g.abs().max())
        assert float((g - grads[1][k]).abs().max()) <= tol, k
        # the SGD step adds lr * (that difference) plus one rounding of the parameter
        torch.testing.assert_close(states[0][k], states[1][k], rtol=eps, atol=cfg.lr * tol)


def test_update_with_kl_and_inner_epochs_runs():
    cfg = GRPOConfig(group_size=4, max_new_tokens=3, beta_kl=0.1, inner_epochs=2, lr=1e-2)
    trainer = GRPOTrainer(tiny(), count_reward(3), cfg)
    stats = trainer.step([[1], [2]])
    assert trainer.ref_model is not None and not any(p.requires_grad for p in trainer.ref_model.parameters())
    assert stats["kl"] >= 0 and 0 <= stats["clip_fraction"] <= 1 and math.isfinite(stats["loss"])


# --- learning: the policy's mean reward rises on a toy reward -----------------------------------------------
@pytest.mark.parametrize("preset", ["grpo", "dr_grpo", "dapo"])
def test_mean_reward_rises_on_toy_reward(preset):
    model = tiny(seed=0)
    kw = dict(group_size=8, max_new_tokens=4, lr=3e-3, seed=0)
    cfg = {"grpo": GRPOConfig(**kw), "dr_grpo": GRPOConfig.dr_grpo(**kw), "dapo": GRPOConfig.dapo(**kw)}[
        preset
    ]
    trainer = GRPOTrainer(model, count_reward(3), cfg)
    prompts = [[1], [2], [4], [5]]
    first = trainer.rollout(prompts).stats["reward_mean"]
    for _ in range(40):
        trainer.step(prompts)
    probe = GRPOTrainer(model, count_reward(3), GRPOConfig(group_size=16, max_new_tokens=4, seed=99))
    after = probe.rollout(prompts).stats["reward_mean"]
    assert first < 0.3 and after > first + 0.4, (first, after)


# --- properties ---------------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.floats(-5, 5), min_size=4, max_size=4), min_size=1, max_size=4))
def test_advantages_centred_and_scaled(rows):
    r = torch.tensor(rows, dtype=torch.float64)
    a = group_advantages(r, eps=1e-12)
    assert torch.allclose(a.mean(1), torch.zeros(len(rows), dtype=torch.float64), atol=1e-9)
    for row, ar in zip(r, a):
        if float(row.max() - row.min()) > 1e-6:
            assert float(ar.std(unbiased=False)) == pytest.approx(1.0, rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5))
def test_token_weights_normalise(lengths):
    L = 6
    mask = torch.tensor([[1] * n + [0] * (L - n) for n in lengths])
    for lt in ("grpo", "token"):
        assert float(token_weights(mask, lt).sum()) == pytest.approx(1.0)
    assert float(token_weights(mask, "dr_grpo", L).sum()) == pytest.approx(sum(lengths) / (len(lengths) * L))
    assert torch.all(token_weights(mask, "grpo")[mask == 0] == 0)


# --- bad input ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, name",
    [
        ({"group_size": 1}, "group_size"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"clip_eps": 1.5}, "clip_eps"),
        ({"clip_eps_high": -0.1}, "clip_eps_high"),
        ({"beta_kl": -1.0}, "beta_kl"),
        ({"loss_type": "ppo"}, "loss_type"),
        ({"temperature": 0.0}, "temperature"),
        ({"lr": float("nan")}, "lr"),
        ({"top_k": 0}, "top_k"),
        ({"inner_epochs": 0}, "inner_epochs"),
    ],
)
def test_config_rejects_bad_values(kw, name):
    with pytest.raises(ValueError, match=name):
        GRPOConfig(**kw)


def test_trainer_rejects_bad_input():
    with pytest.raises(TypeError, match="model"):
        GRPOTrainer("gpt", count_reward(1))
    with pytest.raises(TypeError, match="reward_fn"):
        GRPOTrainer(tiny(), 3)
    with pytest.raises(TypeError, match="config"):
        GRPOTrainer(tiny(), count_reward(1), config={"group_size": 2})
    trainer = GRPOTrainer(tiny(context=8), count_reward(1), GRPOConfig(group_size=2, max_new_tokens=4))
    with pytest.raises(ValueError, match="contexts"):
        trainer.rollout([])
    with pytest.raises(ValueError, match="context"):
        trainer.rollout([[1, -2]])
    with pytest.raises(ValueError, match="context window"):
        trainer.rollout([[1] * 6])
    with pytest.raises(ValueError, match="meta"):
        trainer.rollout([[1]], meta=[1, 2])
    bad = GRPOTrainer(
        tiny(), lambda c, o: [float("nan")] * len(o), GRPOConfig(group_size=2, max_new_tokens=2)
    )
    with pytest.raises(ValueError, match="non-finite"):
        bad.rollout([[1]])
    short = GRPOTrainer(tiny(), lambda c, o: [0.0], GRPOConfig(group_size=2, max_new_tokens=2))
    with pytest.raises(ValueError, match="one reward per completion"):
        short.rollout([[1]])
    with pytest.raises(TypeError, match="batch"):
        trainer.update({"ids": 1})
    with pytest.raises(ValueError, match="rewards"):
        group_advantages(torch.ones(3))
    with pytest.raises(ValueError, match="finite"):
        group_advantages(torch.tensor([[1.0, float("inf")]]))
    with pytest.raises(ValueError, match="loss_type"):
        token_weights(torch.ones(2, 2), "mean")
    with pytest.raises(ValueError, match="ref_logp"):
        clipped_policy_loss(
            torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), torch.ones(1, 1), beta_kl=0.1
        )
