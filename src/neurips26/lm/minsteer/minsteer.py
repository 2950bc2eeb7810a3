"""MinSteer: a steering direction from one self-rewrite contrast inside a single decoding trajectory.

Paper: "MinSteer: contrastive residual directions from cached self-rewrite continuations" (title reconstructed;
NeurIPS 2026 submission, no arXiv id found). Baselines: CAA (Panickssery et al., "Steering Llama 2 via Contrastive
Activation Addition", arXiv 2312.06681) and a trajectory-free two-sequence contrast (TwoSeq). The algorithm is
reconstructed from the abstract [R] (see the digest, shared/papers/minsteer.md).

Method [R], for a chat LM, layer ``l``, a content prompt ``p`` and a style pair ``(X, Y)``:

1. Stage X: decode a reply ``C_X`` to "p, in style X"; record the residual ``h_l(t)`` at every generated
   position ``t`` of ``C_X`` and keep the KV cache.
2. Feed a style-flip turn ("Now rewrite that so it sounds Y.") on top of that cache (teacher-forced; not recorded).
3. Stage Y: keep decoding ``C_Y`` from the inherited cache (the model rewrites its own reply); record ``h_l(t)``.
4. ``CRD_l = mean_{t in C_Y} h_l(t) - mean_{t in C_X} h_l(t)``; normalised: ``CRD_l / ||CRD_l|| * mean ||h_l||``.
5. Steer: add ``alpha * CRD_l`` to the residual stream at layer ``l`` while generating (negative alpha steers
   back to X).

Both halves share one trajectory, so content, topic and length mostly cancel and one contrast suffices. The two
baselines use the same token rule (mean over the reply's tokens):

- :func:`two_sequence_direction` (TwoSeq): ``C_X`` and ``C_Y`` decoded in two independent sequences, one per style
  instruction (no inherited cache);
- :func:`caa_direction` (CAA-N): N contrastive pairs of given texts ``(prompt, reply_x, reply_y)``, teacher-forced
  as assistant replies, the mean difference averaged over the pairs. CAA's original recipe reads one answer-letter
  position of A/B questions; for open text we read the mean over the reply's tokens [R].

:func:`steer` is the steering context manager; :func:`generate_steered` decodes a batch of prompts under several
steering vectors at once (the prompt is read once and shared) and scores each text's perplexity under the
unsteered model. Works with any Hugging Face chat model with a chat template; the experiment uses SmolLM2-135M.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ..residual import add_to_residual, n_layers, record_residual
from ..smollm2 import Decoder, encode_batch

# The public names are listed once, in the package's __all__ (neurips26.lm.minsteer).

DEFAULT_STYLE_INSTRUCTION = "{prompt} Make it sound {style}."
DEFAULT_FLIP = "Now rewrite that so it sounds {style}."
DEFAULT_SYSTEM = "You are a helpful assistant."
_MARK = "\x1fMINSTEER\x1f"


# --- validation ---------------------------------------------------------------------------------------------
def _layers(model: nn.Module, layer: int | Sequence[int]) -> list[int]:
    layers = [layer] if isinstance(layer, int) and not isinstance(layer, bool) else list(layer)
    n = n_layers(model)
    if not layers or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < n for x in layers):
        raise ValueError(
            f"layer must be an integer in [0, {n - 1}] or a non-empty list of them, got {layer!r}"
        )
    return layers


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _template(value: Any, name: str, fields: tuple[str, ...], **kwargs: str) -> str:
    """``value.format(**kwargs)``; the template must be a string that uses every field in ``fields`` and no other."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string template, got {value!r}")
    missing = [f for f in fields if "{" + f + "}" not in value]
    if missing:
        raise ValueError(f"{name} must contain {', '.join('{' + f + '}' for f in missing)}, got {value!r}")
    try:
        return value.format(**kwargs)
    except (KeyError, IndexError, ValueError) as err:
        raise ValueError(
            f"{name} may only use the fields {', '.join('{' + k + '}' for k in kwargs)}, got {value!r} ({err!r})"
        ) from None


def _max_tokens(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {value!r}")
    return value


# --- chat rendering -----------------------------------------------------------------------------------------
def _render(tok: Any, system: str | None, user: str) -> str:
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": user}
    ]
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def _flip_suffix(tok: Any, system: str | None, user: str, flip: str) -> str:
    """The template text between the end of the assistant's reply and the start of its next reply."""
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": user},
        {"role": "assistant", "content": _MARK},
        {"role": "user", "content": flip},
    ]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if _MARK not in text:
        raise ValueError("the tokenizer's chat template drops assistant replies: cannot build the flip turn")
    return text.split(_MARK, 1)[1]


def _masked_mean(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(h.dtype)[..., None]
    return (h * m).sum(1) / m.sum(1).clamp(min=1.0)


# --- MinSteer -----------------------------------------------------------------------------------------------
@dataclass
class RewriteContrast:
    """One self-rewrite contrast: the two replies and, per layer, the direction ``CRD_l`` and ``mean ||h_l||``.

    ``mean_x[l]`` / ``mean_y[l]``: mean residual over the generated tokens of ``C_X`` / ``C_Y``;
    ``crd[l] = mean_y[l] - mean_x[l]``; ``mean_norm[l]``: mean residual norm over both replies' tokens.
    """

    prompt: str
    style_x: str
    style_y: str
    text_x: str
    text_y: str
    tokens_x: int
    tokens_y: int
    mean_x: dict[int, torch.Tensor] = field(repr=False)
    mean_y: dict[int, torch.Tensor] = field(repr=False)
    mean_norm: dict[int, float] = field(repr=False)

    @property
    def layers(self) -> list[int]:
        return sorted(self.mean_x)

    def crd(self, layer: int) -> torch.Tensor:
        """The raw contrastive rewrite direction ``mean_Y h_l - mean_X h_l`` (d,)."""
        if layer not in self.mean_x:
            raise KeyError(f"layer {layer} was not recorded (recorded: {self.layers})")
        return self.mean_y[layer] - self.mean_x[layer]

    def direction(self, layer: int, normalise: bool = True) -> torch.Tensor:
        """``CRD_l``; normalised (default) to the unit vector times the layer's mean residual norm."""
        v = self.crd(layer)
        if not normalise:
            return v
        return v / v.norm().clamp(min=1e-12) * self.mean_norm[layer]


def contrastive_rewrite_directions(
    model: nn.Module,
    tokenizer: Any,
    prompts: Sequence[str],
    style_x: str,
    style_y: str,
    layer: int | Sequence[int],
    *,
    max_new_tokens: int = 32,
    style_instruction: str = DEFAULT_STYLE_INSTRUCTION,
    flip_instruction: str = DEFAULT_FLIP,
    system: str | None = DEFAULT_SYSTEM,
) -> list[RewriteContrast]:
    """One :class:`RewriteContrast` per prompt (decoded together as one left-padded batch; greedy).

    ``style_instruction`` formats the Stage-X user turn from ``{prompt}`` and ``{style}`` (= ``style_x``);
    ``flip_instruction`` formats the flip turn from ``{style}`` (= ``style_y``). Only generated tokens are
    recorded: prompt and flip-turn tokens never enter a mean. ``layer``: one layer or several (one pass records
    all of them).
    """
    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts:
        raise ValueError("prompts must be a non-empty list of strings")
    prompts = [_text(p, "prompts[i]") for p in prompts]
    style_x, style_y = _text(style_x, "style_x"), _text(style_y, "style_y")
    layers = _layers(model, layer)
    max_new_tokens = _max_tokens(max_new_tokens)
    users = [
        _template(style_instruction, "style_instruction", ("prompt", "style"), prompt=p, style=style_x)
        for p in prompts
    ]
    flip = _template(flip_instruction, "flip_instruction", ("style",), style=style_y)
    eos = tokenizer.eos_token_id
    ids, mask = encode_batch(tokenizer, [_render(tokenizer, system, u) for u in users])
    dec = Decoder.start(model, ids, mask)
    with record_residual(model, layers) as rec_x:
        tx, mx = dec.generate(max_new_tokens, eos)
    # the flip turn: rows that ended with the end token skip the template's own end token
    ended = (tx == eos).any(dim=1)
    s_ids, s_mask = encode_batch(tokenizer, [_flip_suffix(tokenizer, system, u, flip) for u in users])
    if eos is not None:
        first = torch.argmax(s_mask, dim=1)
        leading_eos = s_ids[torch.arange(len(users)), first] == eos
        drop = ended & leading_eos
        s_mask[drop, first[drop]] = 0
        close = ~ended & ~leading_eos  # a reply cut by max_new_tokens needs its turn closed
        if bool(close.any()):
            dec.feed(torch.full((len(users), 1), eos), close.long()[:, None])
    dec.feed(s_ids, s_mask)
    with record_residual(model, layers) as rec_y:
        ty, my = dec.generate(max_new_tokens, eos)
    out = []
    # a generated token's residual is recorded when it is fed back: the recorder saw exactly C_X's / C_Y's tokens
    keep_x, keep_y = _content_mask(tx, mx, eos), _content_mask(ty, my, eos)
    means_x = {layer_: _masked_mean(rec_x.concat(layer_)[0], keep_x) for layer_ in layers}
    means_y = {layer_: _masked_mean(rec_y.concat(layer_)[0], keep_y) for layer_ in layers}
    norms = {}
    for layer_ in layers:
        hx, hy = rec_x.concat(layer_)[0].norm(dim=-1), rec_y.concat(layer_)[0].norm(dim=-1)
        norms[layer_] = ((hx * keep_x).sum(1) + (hy * keep_y).sum(1)) / (keep_x.sum(1) + keep_y.sum(1)).clamp(
            1
        )
    for i, p in enumerate(prompts):
        out.append(
            RewriteContrast(
                prompt=p,
                style_x=style_x,
                style_y=style_y,
                text_x=_decode(tokenizer, tx[i], keep_x[i]),
                text_y=_decode(tokenizer, ty[i], keep_y[i]),
                tokens_x=int(keep_x[i].sum()),
                tokens_y=int(keep_y[i].sum()),
                mean_x={layer_: means_x[layer_][i] for layer_ in layers},
                mean_y={layer_: means_y[layer_][i] for layer_ in layers},
                mean_norm={layer_: float(norms[layer_][i]) for layer_ in layers},
            )
        )
    return out


def contrastive_rewrite_direction(
    model: nn.Module,
    tokenizer: Any,
    prompt: str,
    style_x: str,
    style_y: str,
    layer: int | Sequence[int],
    **kwargs: Any,
) -> RewriteContrast:
    """The MinSteer contrast of one prompt (see :func:`contrastive_rewrite_directions` for the options).

    ``contrast.direction(layer)`` is the steering vector: pass it to :func:`steer`.
    """
    return contrastive_rewrite_directions(
        model, tokenizer, [_text(prompt, "prompt")], style_x, style_y, layer, **kwargs
    )[0]


def _content_mask(tokens: torch.Tensor, mask: torch.Tensor, eos: int | None) -> torch.Tensor:
    """Generated tokens that are reply content: the end token itself is excluded (it carries no style)."""
    keep = mask.bool()
    if eos is not None:
        keep = keep & (tokens != eos)
    return keep.float()


def _decode(tok: Any, row: torch.Tensor, keep: torch.Tensor) -> str:
    return tok.decode(row[keep.bool()].tolist(), skip_special_tokens=True).strip()


# --- baselines ----------------------------------------------------------------------------------------------
def two_sequence_direction(
    model: nn.Module,
    tokenizer: Any,
    prompts: str | Sequence[str],
    style_x: str,
    style_y: str,
    layer: int | Sequence[int],
    *,
    max_new_tokens: int = 32,
    style_instruction: str = DEFAULT_STYLE_INSTRUCTION,
    system: str | None = DEFAULT_SYSTEM,
) -> list[RewriteContrast]:
    """TwoSeq: ``C_X`` and ``C_Y`` from two independent sequences (one style instruction each), same token rule.

    Returns one :class:`RewriteContrast` per prompt (``direction(layer)`` as for MinSteer).
    """
    single = isinstance(prompts, str)
    prompts = [prompts] if single else list(prompts)
    if not prompts:
        raise ValueError("prompts must be a non-empty list of strings")
    prompts = [_text(p, "prompts[i]") for p in prompts]
    style_x, style_y = _text(style_x, "style_x"), _text(style_y, "style_y")
    layers = _layers(model, layer)
    max_new_tokens = _max_tokens(max_new_tokens)
    eos = tokenizer.eos_token_id
    users = [
        _template(style_instruction, "style_instruction", ("prompt", "style"), prompt=p, style=s)
        for s in (style_x, style_y)
        for p in prompts
    ]
    ids, mask = encode_batch(tokenizer, [_render(tokenizer, system, u) for u in users])
    dec = Decoder.start(model, ids, mask)
    with record_residual(model, layers) as rec:
        toks, m = dec.generate(max_new_tokens, eos)
    keep = _content_mask(toks, m, eos)
    n = len(prompts)
    out = []
    hs = {layer_: rec.concat(layer_)[0] for layer_ in layers}
    for i, p in enumerate(prompts):
        mx, my = {}, {}
        norms = {}
        for layer_ in layers:
            h = hs[layer_]
            mx[layer_] = _masked_mean(h[i : i + 1], keep[i : i + 1])[0]
            my[layer_] = _masked_mean(h[n + i : n + i + 1], keep[n + i : n + i + 1])[0]
            nx, ny = h[i].norm(dim=-1), h[n + i].norm(dim=-1)
            norms[layer_] = float(
                ((nx * keep[i]).sum() + (ny * keep[n + i]).sum())
                / (keep[i].sum() + keep[n + i].sum()).clamp(1)
            )
        out.append(
            RewriteContrast(
                p,
                style_x,
                style_y,
                _decode(tokenizer, toks[i], keep[i]),
                _decode(tokenizer, toks[n + i], keep[n + i]),
                int(keep[i].sum()),
                int(keep[n + i].sum()),
                mx,
                my,
                norms,
            )
        )
    return out


def caa_direction(
    model: nn.Module,
    tokenizer: Any,
    pairs: Sequence[tuple[str, str, str]],
    layer: int | Sequence[int],
    *,
    system: str | None = DEFAULT_SYSTEM,
    normalise: bool = True,
) -> dict[int, torch.Tensor]:
    """CAA-N: ``mean_pairs [mean_{reply_y} h_l - mean_{reply_x} h_l]`` over N ``(prompt, reply_x, reply_y)`` pairs.

    Each reply is teacher-forced as the assistant's answer to ``prompt``; only reply tokens are read. Returns
    ``{layer: direction}``, normalised (default) to the unit vector times the mean reply residual norm.
    """
    if isinstance(pairs, (str, tuple)) or not isinstance(pairs, Sequence) or not pairs:
        raise ValueError("pairs must be a non-empty list of (prompt, reply_x, reply_y) string triples")
    for pair in pairs:
        if not (
            isinstance(pair, (tuple, list)) and len(pair) == 3 and all(isinstance(s, str) and s for s in pair)
        ):
            raise ValueError(f"each pair must be (prompt, reply_x, reply_y) non-empty strings, got {pair!r}")
    if all(rx == ry for _, rx, ry in pairs):
        raise ValueError("pairs: reply_x equals reply_y in every pair, so the contrast direction is zero")
    layers = _layers(model, layer)
    heads = [_render(tokenizer, system, p) for p, _, _ in pairs]
    texts = [h + r for h, (_, rx, ry) in zip(heads, pairs) for r in (rx, ry)]
    head_len = [len(tokenizer(h, add_special_tokens=False)["input_ids"]) for h in heads for _ in range(2)]
    rows = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    T = max(map(len, rows))
    ids = torch.full((len(rows), T), tokenizer.pad_token_id or 0, dtype=torch.long)
    reply = torch.zeros(len(rows), T)
    for i, r in enumerate(rows):  # right padding: causal, so the reply residuals are exact
        ids[i, : len(r)] = torch.tensor(r)
        reply[i, head_len[i] : len(r)] = 1.0
    with torch.no_grad(), record_residual(model, layers) as rec:
        model.base_model(ids)  # the residual stream only: the LM head's logits are not needed
    out = {}
    for layer_ in layers:
        h = rec.hidden(layer_)
        means = _masked_mean(h, reply)
        diff = (means[1::2] - means[0::2]).mean(0)
        if normalise:
            norm = float((h.norm(dim=-1) * reply).sum() / reply.sum())
            diff = diff / diff.norm().clamp(min=1e-12) * norm
        out[layer_] = diff
    return out


def random_direction(like: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """A Gaussian direction with the norm of ``like`` (the norm-matched random control)."""
    if not isinstance(like, torch.Tensor) or like.ndim != 1:
        raise ValueError("like must be a 1-D tensor (the direction whose norm is matched)")
    v = torch.randn(like.shape[0], generator=generator)
    return v / v.norm() * like.norm()


# --- matched perplexity -------------------------------------------------------------------------------------
def matched_strength(
    alphas: Sequence[float], ratios: Sequence[float], budget: float = 1.25
) -> tuple[float, str]:
    """The steering strength at which the perplexity ratio reaches ``budget``, read off a calibration grid.

    ``alphas``: increasing positive strengths; ``ratios``: the perplexity ratio (steered over unsteered text,
    both scored by the unsteered model) measured at each. The grid starts at ``(0, 1.0)`` (no steering leaves the
    perplexity unchanged); the strength is interpolated linearly on the first segment whose ratio crosses the
    budget. Returns ``(alpha, status)``; status ``"matched"``: the budget was crossed after the first grid point;
    ``"over_budget_at_every_grid_strength"``: the first grid point already exceeds it (the strength is
    interpolated between 0 and that point, so the method still gets its matched strength, only a smaller one than
    the grid offers); ``"budget_not_reached"``: every grid point stays within it (the largest strength is used).
    """
    if isinstance(alphas, (str, bytes)) or not isinstance(alphas, Sequence) or not alphas:
        raise ValueError(f"alphas must be a non-empty list of increasing positive numbers, got {alphas!r}")
    a = [float(x) for x in alphas]
    if not all(math.isfinite(x) and x > 0 for x in a) or any(y <= x for x, y in zip(a, a[1:])):
        raise ValueError(f"alphas must be a non-empty list of increasing positive numbers, got {alphas!r}")
    if isinstance(ratios, (str, bytes)) or not isinstance(ratios, Sequence) or len(ratios) != len(a):
        raise ValueError(f"ratios must be a list of {len(a)} numbers (one per alpha), got {ratios!r}")
    r = [float(x) for x in ratios]
    if not all(math.isfinite(x) and x > 0 for x in r):
        raise ValueError(f"ratios must be finite positive numbers, got {ratios!r}")
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not (1.0 < budget < math.inf):
        raise ValueError(f"budget must be a finite number above 1, got {budget!r}")
    grid_a, grid_r = [0.0, *a], [1.0, *r]
    for k in range(1, len(grid_a)):
        if grid_r[k] > budget:
            a0, a1, r0, r1 = grid_a[k - 1], grid_a[k], grid_r[k - 1], grid_r[k]
            alpha = a0 + (budget - r0) / (r1 - r0) * (a1 - a0) if r1 > r0 else a0
            return alpha, ("over_budget_at_every_grid_strength" if k == 1 else "matched")
    return a[-1], "budget_not_reached"


# --- steering -----------------------------------------------------------------------------------------------
@contextmanager
def steer(
    model: nn.Module, layer: int, vector: torch.Tensor, alpha: float = 1.0, start: int | None = None
) -> Iterator[None]:
    """Add ``alpha * vector`` to the residual stream at the output of block ``layer`` inside the block.

    ``start`` restricts the addition to absolute positions ``>= start`` (None: every position, prompt included).
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise ValueError(f"alpha must be a finite number, got {alpha!r}")
    _layers(model, layer)
    if not isinstance(vector, torch.Tensor):
        raise TypeError(f"vector must be a torch.Tensor, got {type(vector).__name__}")
    with add_to_residual(model, layer, alpha * vector, start=start):
        yield


@dataclass
class SteeredBatch:
    """Texts ``texts[p][k]`` for prompt ``p`` under setting ``k``; ``nll[p][k]`` / ``tokens[p][k]``: summed
    negative log-likelihood of that text's tokens under the unsteered model (given the prompt) and their count."""

    texts: list[list[str]]
    nll: np.ndarray
    tokens: np.ndarray

    def perplexity(self, k: int) -> float:
        """Perplexity of setting ``k``'s texts under the unsteered model, pooled over the prompts."""
        return math.exp(float(self.nll[:, k].sum()) / max(int(self.tokens[:, k].sum()), 1))


@torch.no_grad()
def generate_steered(
    model: nn.Module,
    tokenizer: Any,
    prompts: Sequence[str],
    layer: int,
    vectors: torch.Tensor,
    max_new_tokens: int = 24,
    batch_rows: int = 256,
) -> SteeredBatch:
    """Greedy replies to ``prompts`` (rendered text, e.g. from ``chat_prompt``) under each steering vector.

    ``vectors``: (K, d), already scaled (``alpha * direction``; a zero row is the unsteered reply). The steering
    covers the last prompt token and every generated token, so each generated token is steered. Every prompt is
    read once, unsteered, and shared by the K settings; settings are decoded in chunks of about ``batch_rows``
    rows (prompts x settings) to bound the KV-cache memory. Each text is then scored by the unsteered model (for
    the matched-perplexity protocol).
    """
    if isinstance(prompts, str) or not prompts:
        raise ValueError("prompts must be a non-empty list of strings")
    _layers(model, layer)
    if not isinstance(vectors, torch.Tensor) or vectors.ndim != 2 or vectors.shape[0] < 1:
        raise ValueError("vectors must be a (K, d_model) tensor with K >= 1")
    if not torch.isfinite(vectors).all():
        raise ValueError("vectors must be finite")
    max_new_tokens = _max_tokens(max_new_tokens)
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ValueError(f"batch_rows must be a positive integer, got {batch_rows!r}")
    P = len(prompts)
    ids, mask = encode_batch(tokenizer, list(prompts))
    if ids.shape[1] < 2:
        raise ValueError("each prompt needs at least two tokens")
    shared = Decoder.start(model, ids[:, :-1], mask[:, :-1])
    per_chunk = max(1, batch_rows // P)
    texts: list[list[str]] = [[] for _ in range(P)]
    nll, count = [], []
    for k0 in range(0, vectors.shape[0], per_chunk):
        t, n, c = _steered_chunk(
            model, tokenizer, shared, ids[:, -1:], layer, vectors[k0 : k0 + per_chunk], max_new_tokens
        )
        for p in range(P):
            texts[p].extend(t[p])
        nll.append(n)
        count.append(c)
    return SteeredBatch(texts, np.concatenate(nll, axis=1), np.concatenate(count, axis=1))


def _steered_chunk(
    model: nn.Module,
    tokenizer: Any,
    shared: Decoder,
    last_token: torch.Tensor,
    layer: int,
    vectors: torch.Tensor,
    max_new_tokens: int,
) -> tuple[list[list[str]], np.ndarray, np.ndarray]:
    K, P = vectors.shape[0], last_token.shape[0]
    eos = tokenizer.eos_token_id
    last = last_token.repeat_interleave(K, dim=0)
    dec = shared.repeat_interleave(K)
    with add_to_residual(model, layer, vectors.repeat(P, 1)):
        dec.feed(last)
        toks, m = dec.generate(max_new_tokens, eos)
    # score under the unsteered model: the last prompt token then the reply, teacher-forced on the shared cache
    scorer = shared.repeat_interleave(K)
    logits = scorer.feed(
        torch.cat([last, toks[:, :-1]], dim=1), torch.cat([torch.ones_like(last), m[:, :-1]], 1)
    )
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, toks[..., None]).squeeze(-1)
    nll = -(logp * m).sum(1).view(P, K).numpy().astype(float)
    count = m.sum(1).view(P, K).numpy().astype(int)
    keep = _content_mask(toks, m, eos)
    texts = [[_decode(tokenizer, toks[p * K + k], keep[p * K + k]) for k in range(K)] for p in range(P)]
    return texts, nll, count
