"""The small-LM stack: tokenizers, corpora, the GPT, the training loop and checkpoints."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.lm import (
    GPT,
    ByteTokenizer,
    CharTokenizer,
    Document,
    GPTConfig,
    SequenceDataset,
    TokenStream,
    TrainConfig,
    WordTokenizer,
    evaluate,
    load_checkpoint,
    register_ffn,
    save_checkpoint,
    split_by_document,
    stdlib_corpus,
    stdlib_documents,
    tokenizer_from_dict,
    train,
)
from neurips26.lm.reference import TorchEncoderLM, copy_weights
from neurips26.lm.training import cosine_schedule


def tiny(**kw) -> GPT:
    torch.manual_seed(kw.pop("seed", 0))
    cfg = dict(vocab_size=17, context=16, n_layer=2, n_head=2, d_model=16)
    cfg.update(kw)
    return GPT(GPTConfig(**cfg))


# --- tokenizers ---------------------------------------------------------------------------------------------
@settings(max_examples=50)
@given(st.text(max_size=200))
def test_byte_tokenizer_round_trips_any_text(text):
    tok = ByteTokenizer()
    ids = tok.encode(text)
    assert ids == list(text.encode("utf-8"))
    assert tok.decode(ids) == text


@settings(max_examples=50)
@given(st.text(alphabet="abc xyz\n\t{}()", max_size=200))
def test_char_tokenizer_round_trips_text_of_its_alphabet(text):
    tok = CharTokenizer.from_text("abc xyz\n\t{}()", unk=None)
    assert tok.decode(tok.encode(text)) == text
    assert np.array_equal(
        tok.encode_array(text), np.array([tok.chars.index(c) for c in text], dtype=np.int64)
    )


def test_char_tokenizer_unknown_characters():
    tok = CharTokenizer.from_text("aab", unk="?")
    assert tok.chars == ["a", "b", "?"]
    assert tok.decode(tok.encode("abzé")) == "ab??"
    strict = CharTokenizer("ab")
    with pytest.raises(ValueError, match="alphabet"):
        strict.encode("abc")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        strict.decode([2])


def test_char_tokenizer_min_count_and_max_vocab():
    tok = CharTokenizer.from_text("aaaabbbcc d", min_count=2, unk="~")
    assert tok.chars == ["a", "b", "c", "~"]
    tok = CharTokenizer.from_text("aaaabbbcc", max_vocab=3, unk="~")
    assert tok.chars == ["a", "b", "~"]


@settings(max_examples=30)
@given(st.lists(st.sampled_from(["north", "east", "south", "west", "red", "blue"]), max_size=50))
def test_word_tokenizer_round_trips(words):
    tok = WordTokenizer(["north", "east", "south", "west", "red", "blue"])
    text = " ".join(words)
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode(words) == tok.encode(text)


@pytest.mark.parametrize(
    "tok", [ByteTokenizer(), CharTokenizer("abc", unk="c"), WordTokenizer(["x", "y"], unk="y")]
)
def test_tokenizer_dict_round_trip(tok):
    again = tokenizer_from_dict(tok.to_dict())
    assert type(again) is type(tok) and again.vocab_size == tok.vocab_size
    sample = "x y" if isinstance(tok, WordTokenizer) else "abcab"
    assert again.encode(sample) == tok.encode(sample)


def test_tokenizer_bad_input():
    with pytest.raises(TypeError, match="text"):
        ByteTokenizer().encode(b"bytes")
    with pytest.raises(ValueError, match="repeated"):
        CharTokenizer("aa")
    with pytest.raises(ValueError, match="unk"):
        CharTokenizer("ab", unk="z")
    with pytest.raises(ValueError, match="min_count"):
        CharTokenizer.from_text("ab", min_count=0)
    with pytest.raises(ValueError, match="whitespace"):
        WordTokenizer(["a b"])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        WordTokenizer(["a"]).encode("b")
    with pytest.raises(ValueError, match="errors"):
        ByteTokenizer(errors="ignore")
    with pytest.raises(ValueError, match="kind"):
        tokenizer_from_dict({"kind": "bpe"})


# --- corpora ------------------------------------------------------------------------------------------------
def test_stdlib_documents_are_real_files():
    docs = stdlib_documents("source")
    names = {d.name for d in docs}
    assert "source:json/decoder.py" in names and "source:collections/__init__.py" in names
    assert not any("/test/" in n or n.startswith("source:test/") or "site-packages" in n for n in names)
    decoder = next(d for d in docs if d.name == "source:json/decoder.py")
    import json.decoder

    with open(json.decoder.__file__, encoding="utf-8") as f:
        assert decoder.text == f.read()
    assert any(d.name.startswith("docs:topic/") for d in stdlib_documents("docs"))


def test_docstrings_are_parsed_not_imported(tmp_path):
    (tmp_path / "mod.py").write_text('"""Module doc."""\nraise SystemExit\ndef f():\n    """F doc."""\n')
    (tmp_path / "broken.py").write_text("def (:\n")
    docs = stdlib_documents("docstrings", root=tmp_path)
    assert [d.name for d in docs] == ["docstrings:mod.py"]
    assert docs[0].text == "Module doc.\n\nF doc."


def test_split_by_document_is_disjoint_deterministic_and_order_free():
    docs = [Document(f"d{i}", "x" * i) for i in range(200)]
    train_a, val_a = split_by_document(docs, 0.1)
    train_b, val_b = split_by_document(list(reversed(docs)), 0.1)
    assert [d.name for d in val_a] == [d.name for d in val_b]
    assert {d.name for d in train_a}.isdisjoint(d.name for d in val_a)
    assert len(train_a) + len(val_a) == 200
    assert 5 <= len(val_a) <= 40  # about 10%
    assert split_by_document(docs, 0.1, salt="other")[1] != val_a


def test_split_bad_input():
    with pytest.raises(ValueError, match="val_fraction"):
        split_by_document([Document("a", "x"), Document("b", "y")], 1.0)
    with pytest.raises(ValueError, match="at least 2"):
        split_by_document([Document("a", "x")], 0.1)
    with pytest.raises(ValueError, match="repeated"):
        split_by_document([Document("a", "x"), Document("a", "y")], 0.5)


def test_stdlib_corpus_splits_by_file():
    corpus = stdlib_corpus(max_chars=200_000)
    train_names = {d.name for d in corpus.train_documents}
    val_names = {d.name for d in corpus.val_documents}
    assert train_names and val_names and train_names.isdisjoint(val_names)
    assert len(corpus.train) >= 200_000
    text = "\n\n".join(d.text for d in corpus.val_documents)
    assert corpus.tokenizer.decode(corpus.val.tokens[:500].tolist()) == text[:500].translate(
        {ord(c): "\ufffd" for c in set(text[:500]) if c not in corpus.tokenizer.chars}
    )
    byte = stdlib_corpus(kinds=["docs"], tokenizer="byte", max_chars=50_000)
    assert byte.vocab_size == 256 and byte.train.chars_per_token <= 1.0
    with pytest.raises(ValueError, match="kinds"):
        stdlib_corpus(kinds=["wiki"])
    with pytest.raises(ValueError, match="tokenizer"):
        stdlib_corpus(tokenizer="bpe", max_chars=1000)


def test_token_stream_batches():
    stream = TokenStream(np.arange(100))
    g = torch.Generator().manual_seed(0)
    x, y = stream.sample(4, 10, g)
    assert x.shape == y.shape == (4, 10)
    assert torch.equal(y, x + 1)
    windows = list(stream.windows(10, batch_size=3))
    xs = torch.cat([w[0] for w in windows])
    assert xs.shape == (9, 10) and torch.equal(xs.flatten(), torch.arange(90))
    with pytest.raises(ValueError, match="context"):
        stream.sample(2, 100)
    with pytest.raises(ValueError, match="batch_size"):
        stream.sample(0, 5)
    with pytest.raises(ValueError, match="1-D"):
        TokenStream(np.zeros((2, 2), dtype=int))


def test_sequence_dataset_mask():
    seqs = np.arange(12).reshape(3, 4)
    mask = np.array([[0, 1, 1]] * 3, dtype=bool)
    ds = SequenceDataset(seqs, loss_mask=mask)
    x, y = next(ds.windows())
    assert torch.equal(x, torch.as_tensor(seqs[:, :-1]))
    assert (y[:, 0] == -100).all() and torch.equal(y[:, 1:], torch.as_tensor(seqs[:, 2:]))
    with pytest.raises(ValueError, match="loss_mask"):
        SequenceDataset(seqs, loss_mask=mask[:, :2])
    with pytest.raises(ValueError, match="context"):
        ds.sample(2, context=5)


# --- the model ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("positions", ["learned", "rope", "none"])
@pytest.mark.parametrize("ffn", ["mlp", "swiglu"])
def test_changing_a_future_token_never_changes_an_earlier_logit(positions, ffn):
    model = tiny(positions=positions, ffn=ffn).eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 17, (3, 16), generator=g)
    base = model(x)
    for t in [0, 5, 15]:
        x2 = x.clone()
        x2[:, t] = (x2[:, t] + 1) % 17
        out = model(x2)
        assert torch.equal(out[:, :t], base[:, :t])  # exactly: no future information at all
        assert not torch.allclose(out[:, t], base[:, t])


def test_forward_matches_torch_transformer_encoder_layers():
    """Oracle: PyTorch's own pre-norm encoder layers under a causal mask, loaded with our weights."""
    model = tiny().eval()
    ref = copy_weights(model, TorchEncoderLM(model.config)).eval()
    x = torch.randint(0, 17, (4, 16), generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(model(x), ref(x), rtol=1e-5, atol=1e-5)


def test_parameter_count_closed_form():
    V, C, L, d = 17, 16, 2, 16
    per_block = (
        (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d) + 4 * d
    )  # attn, mlp, norms
    expected = V * d + C * d + L * per_block + 2 * d  # tied head adds nothing
    model = tiny()
    assert model.num_parameters() == expected
    assert model.num_parameters("ffn") == L * (8 * d * d + 5 * d)
    swiglu = tiny(ffn="swiglu", bias=False)
    hidden = round(8 * d / 3)
    assert swiglu.num_parameters("ffn") == L * 3 * d * hidden


def test_pluggable_ffn_slot():
    class Scale(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * self.w

    model = GPT(
        GPTConfig(vocab_size=5, context=4, d_model=8, n_head=2), ffn=lambda cfg, i: Scale(cfg.d_model)
    )
    assert model.num_parameters("ffn") == 2 * 8
    register_ffn("test_scale", lambda cfg, i, init=1.0: Scale(cfg.d_model))
    named = GPT(
        GPTConfig(vocab_size=5, context=4, d_model=8, n_head=2, ffn="test_scale", ffn_kwargs={"init": 2.0})
    )
    assert isinstance(named.blocks[0].ffn, Scale)
    with pytest.raises(ValueError, match="already registered"):
        register_ffn("test_scale", lambda cfg, i: Scale(cfg.d_model))
    with pytest.raises(ValueError, match="ffn must be one of"):
        GPT(GPTConfig(vocab_size=5, ffn="nope"))


def test_model_bad_input():
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(vocab_size=5, d_model=10, n_head=4)
    with pytest.raises(ValueError, match="vocab_size"):
        GPTConfig(vocab_size=0)
    with pytest.raises(ValueError, match="positions"):
        GPTConfig(vocab_size=5, positions="alibi")
    with pytest.raises(TypeError, match="config"):
        GPT({"vocab_size": 5})
    model = tiny()
    with pytest.raises(ValueError, match="exceeds the context"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="max_new_tokens"):
        model.generate(torch.zeros(1, 2, dtype=torch.long), -1)


def test_greedy_generate_is_argmax_of_the_forward_pass():
    model = tiny().eval()
    prompt = torch.tensor([[1, 2, 3]])
    out = model.generate(prompt, 5)
    seq = prompt
    for _ in range(5):
        seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(out, seq)
    long = model.generate(prompt, 20)  # grows past the context: the window is cropped
    assert long.shape == (1, 23)


# --- training -----------------------------------------------------------------------------------------------
def test_cosine_schedule_closed_form():
    assert cosine_schedule(0, 100, 10) == pytest.approx(0.1)
    assert cosine_schedule(9, 100, 10) == pytest.approx(1.0)
    assert cosine_schedule(10, 100, 10) == pytest.approx(1.0)
    assert cosine_schedule(55, 100, 10, 0.1) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert cosine_schedule(100, 100, 10, 0.1) == pytest.approx(0.1)


def test_loop_overfits_a_tiny_batch():
    seqs = torch.randint(0, 17, (2, 17), generator=torch.Generator().manual_seed(3))
    data = SequenceDataset(seqs)
    model = tiny()
    before = evaluate(model, data)["loss"]
    result = train(model, data, TrainConfig(steps=150, batch_size=2, lr=1e-2, weight_decay=0.0), val=data)
    assert before > 2.0
    assert result.val_loss < 0.05 and result.finite
    assert result.tokens == 150 * 2 * 16 and result.tokens_per_second > 0
    assert result.val_bits_per_char == pytest.approx(result.val_loss / math.log(2))


def test_training_is_deterministic():
    data = TokenStream(torch.randint(0, 17, (500,), generator=torch.Generator().manual_seed(4)))
    runs = []
    for _ in range(2):
        model = tiny(seed=7)
        res = train(model, data, TrainConfig(steps=12, batch_size=4, log_every=1))
        runs.append(([h["loss"] for h in res.history], model.state_dict()))
    assert runs[0][0] == runs[1][0]
    for k in runs[0][1]:
        assert torch.equal(runs[0][1][k], runs[1][1][k])


def test_callbacks_and_custom_loss_are_called():
    data = TokenStream(torch.arange(200) % 17)
    calls = []

    class Probe:
        def start(self, model):
            calls.append(("start", model.tok_emb.weight.grad is None))

        def finish(self, model):
            calls.append(("finish",))

        def on_backward(self, step, model):
            calls.append(("backward", step, model.tok_emb.weight.grad is not None))

        def on_step_end(self, step, model):
            calls.append(("end", step))

    def loss_fn(model, x, y):
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        return loss, {"custom": 1.0}

    res = train(
        tiny(), data, TrainConfig(steps=3, batch_size=2, log_every=1), loss_fn=loss_fn, callbacks=[Probe()]
    )
    assert calls == [
        ("start", True),
        ("backward", 0, True),
        ("end", 0),
        ("backward", 1, True),
        ("end", 1),
        ("backward", 2, True),
        ("end", 2),
        ("finish",),
    ]
    assert res.history[0]["custom"] == 1.0


def test_a_callbacks_finish_runs_when_training_raises():
    data = TokenStream(torch.arange(200) % 17)
    calls = []

    class Probe:
        def start(self, model):
            calls.append("start")

        def finish(self, model):
            calls.append("finish")

    def loss_fn(model, x, y):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        train(tiny(), data, TrainConfig(steps=3, batch_size=2), loss_fn=loss_fn, callbacks=[Probe()])
    assert calls == ["start", "finish"]


def test_training_stops_on_a_non_finite_loss():
    data = TokenStream(torch.arange(200) % 17)

    def loss_fn(model, x, y):
        return model(x).sum() * float("nan"), {}

    res = train(tiny(), data, TrainConfig(steps=5, batch_size=2), loss_fn=loss_fn, val=data)
    assert not res.finite and res.steps == 0 and res.val_loss is None


def test_train_bad_input():
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=-1.0)
    with pytest.raises(ValueError, match="grad_clip"):
        TrainConfig(grad_clip=0.0)
    with pytest.raises(TypeError, match="batch source"):
        train(tiny(), [1, 2, 3], TrainConfig(steps=1))
    with pytest.raises(TypeError, match="config"):
        train(tiny(), TokenStream(torch.arange(100) % 17), {"steps": 1})


def test_checkpoint_round_trip_gives_identical_logits(tmp_path):
    data = TokenStream(torch.arange(300) % 17)
    model = tiny(positions="rope", ffn="swiglu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train(model, data, TrainConfig(steps=3, batch_size=2), optimizer=opt)
    tok = CharTokenizer("abcdefghijklmnopq")
    path = save_checkpoint(tmp_path / "m.pt", model, optimizer=opt, tokenizer=tok, extra={"step": 3})
    loaded, info = load_checkpoint(path)
    x = torch.randint(0, 17, (2, 16), generator=torch.Generator().manual_seed(5))
    assert torch.equal(model.eval()(x), loaded.eval()(x))
    assert info["extra"] == {"step": 3} and info["tokenizer"].chars == tok.chars
    opt2 = torch.optim.AdamW(loaded.parameters(), lr=1e-3)
    opt2.load_state_dict(info["optimizer_state"])
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    assert loaded.head.weight is loaded.tok_emb.weight  # tying survives the round trip
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="checkpoint"):
        load_checkpoint(tmp_path / "bad.pt")
    torch.save({"format": "other"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
