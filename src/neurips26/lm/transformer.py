"""A small decoder-only transformer (GPT) with a pluggable feed-forward slot.

The model follows GPT-2 / nanoGPT: token (+ optional learned position) embeddings, ``n_layer`` pre-norm blocks
``x + attn(norm(x))`` then ``x + ffn(norm(x))``, a final norm and a language-model head tied to the token
embedding. Attention is ``torch.nn.functional.scaled_dot_product_attention`` with a causal mask.

The feed-forward ("channel mixing") slot is what papers swap: ``GPTConfig.ffn`` names a registered factory
(``"mlp"``: 4x GELU MLP, ``"swiglu"``: SwiGLU with hidden width 8/3 x d) with its ``ffn_kwargs``; any module
mapping ``(B, T, d_model) -> (B, T, d_model)`` fits, either registered with :func:`register_ffn` (so checkpoints
can rebuild it by name) or passed to ``GPT(config, ffn=factory)`` directly::

    from neurips26.lm import GPT, GPTConfig
    model = GPT(GPTConfig(vocab_size=100, context=128, n_layer=2, n_head=4, d_model=96, ffn="swiglu"))
    logits = model(idx)                 # (B, T, vocab)
    h = model.hidden_states(idx)        # (B, T, d_model): what the head reads (after the final norm)

Nothing here seeds a global generator: seed with ``torch.manual_seed`` before building a model.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "GPT",
    "MLP",
    "Block",
    "CausalSelfAttention",
    "FFNFactory",
    "GPTConfig",
    "SwiGLU",
    "build_ffn",
    "next_token_loss",
    "register_ffn",
    "registered_ffns",
]

FFNFactory = Callable[["GPTConfig", int], nn.Module]
"""``factory(config, layer_index) -> module`` with ``module(x: (B, T, d)) -> (B, T, d)``."""

_POSITIONS = ("learned", "rope", "none")
_NORMS = ("layernorm", "rmsnorm")


@dataclass
class GPTConfig:
    """Shape of a :class:`GPT`.

    Parameters
    ----------
    vocab_size : number of token ids.
    context : the longest sequence the model accepts (the learned position table has this many rows).
    n_layer, n_head, d_model : depth, attention heads (``d_model % n_head == 0``) and residual width.
    ffn : name of a registered feed-forward factory (``"mlp"``, ``"swiglu"``, or one a paper registers).
    ffn_kwargs : keyword arguments for that factory (e.g. ``{"hidden": 256}`` for ``"mlp"``).
    mlp_ratio : hidden width of ``"mlp"`` over ``d_model`` (4 in GPT-2); SwiGLU uses 2/3 of it (8/3).
    positions : ``"learned"`` (GPT-2), ``"rope"`` (rotary, extrapolates to longer sequences) or ``"none"``.
    norm : ``"layernorm"`` or ``"rmsnorm"``.
    bias : biases in the linear layers and norms.
    dropout : dropout on attention weights and residual branches (0 for the small CPU runs).
    tie_weights : share the head's weight with the token embedding.
    """

    vocab_size: int
    context: int = 128
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    ffn: str = "mlp"
    ffn_kwargs: dict[str, Any] = field(default_factory=dict)
    mlp_ratio: float = 4.0
    positions: str = "learned"
    norm: str = "layernorm"
    bias: bool = True
    dropout: float = 0.0
    tie_weights: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context", "n_layer", "n_head", "d_model"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")
        if self.positions == "rope" and (self.d_model // self.n_head) % 2:
            raise ValueError("positions='rope' needs an even head size (d_model / n_head)")
        if not isinstance(self.ffn, str) or not self.ffn:
            raise TypeError(f"ffn must be the name of a registered factory, got {self.ffn!r}")
        if not isinstance(self.ffn_kwargs, Mapping):
            raise TypeError(f"ffn_kwargs must be a mapping, got {type(self.ffn_kwargs).__name__}")
        self.ffn_kwargs = dict(self.ffn_kwargs)
        if not (self.mlp_ratio > 0 and math.isfinite(self.mlp_ratio)):
            raise ValueError(f"mlp_ratio must be positive, got {self.mlp_ratio!r}")
        if self.positions not in _POSITIONS:
            raise ValueError(f"positions must be one of {_POSITIONS}, got {self.positions!r}")
        if self.norm not in _NORMS:
            raise ValueError(f"norm must be one of {_NORMS}, got {self.norm!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (a checkpoint stores this)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GPTConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown GPTConfig fields {sorted(unknown)}")
        return cls(**dict(data))


# --- the feed-forward slot ----------------------------------------------------------------------------------
class MLP(nn.Module):
    """GPT-2 feed-forward block: ``W_2 GELU(W_1 x)`` with hidden width ``hidden`` (default 4 x d)."""

    def __init__(self, d_model: int, hidden: int, bias: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        self.up = nn.Linear(d_model, hidden, bias=bias)
        self.down = nn.Linear(hidden, d_model, bias=bias)
        self.down.residual_projection = True  # scaled init (GPT-2)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.down(F.gelu(self.up(x))))


class SwiGLU(nn.Module):
    """Llama feed-forward block: ``W_2 (SiLU(W_g x) * W_1 x)``; hidden width 8/3 x d keeps the 4x-MLP budget."""

    def __init__(self, d_model: int, hidden: int, bias: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.gate = nn.Linear(d_model, hidden, bias=bias)
        self.up = nn.Linear(d_model, hidden, bias=bias)
        self.down = nn.Linear(hidden, d_model, bias=bias)
        self.down.residual_projection = True
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.down(F.silu(self.gate(x)) * self.up(x)))


def _mlp(config: GPTConfig, layer: int, hidden: int | None = None) -> nn.Module:
    return MLP(
        config.d_model, hidden or round(config.mlp_ratio * config.d_model), config.bias, config.dropout
    )


def _swiglu(config: GPTConfig, layer: int, hidden: int | None = None) -> nn.Module:
    return SwiGLU(config.d_model, hidden or round(2 * config.mlp_ratio * config.d_model / 3), config.bias)


_FFN_REGISTRY: dict[str, Callable[..., nn.Module]] = {"mlp": _mlp, "swiglu": _swiglu}
# names whose factory a paper package registers on import (so a checkpoint can rebuild them by name)
_FFN_PROVIDERS = {"cffn": "neurips26.lm.cofrgenet", "gated_cf": "neurips26.lm.cofrgenet"}


def register_ffn(name: str, factory: Callable[..., nn.Module], *, overwrite: bool = False) -> None:
    """Make ``GPTConfig(ffn=name, ffn_kwargs=...)`` build ``factory(config, layer_index, **ffn_kwargs)``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable, got {type(factory).__name__}")
    if name in _FFN_REGISTRY and not overwrite and _FFN_REGISTRY[name] is not factory:
        raise ValueError(f"an FFN named {name!r} is already registered (pass overwrite=True to replace it)")
    _FFN_REGISTRY[name] = factory


def registered_ffns() -> list[str]:
    return sorted(set(_FFN_REGISTRY) | set(_FFN_PROVIDERS))


def build_ffn(config: GPTConfig, layer: int) -> nn.Module:
    """The feed-forward module that ``config`` names, for block ``layer``."""
    if config.ffn not in _FFN_REGISTRY and config.ffn in _FFN_PROVIDERS:
        importlib.import_module(_FFN_PROVIDERS[config.ffn])
    if config.ffn not in _FFN_REGISTRY:
        raise ValueError(f"ffn must be one of {registered_ffns()}, got {config.ffn!r}")
    return _FFN_REGISTRY[config.ffn](config, layer, **config.ffn_kwargs)


# --- attention and blocks -----------------------------------------------------------------------------------
def _rope_tables(head_dim: int, length: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(length, dtype=torch.float64)[:, None] * inv[None, :]
    return angles.cos().float(), angles.sin().float()


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention under a causal mask (``scaled_dot_product_attention(is_causal=True)``)."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.head_dim = config.d_model // config.n_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=config.bias)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.proj.residual_projection = True
        self.dropout = config.dropout
        self.rope = config.positions == "rope"
        if self.rope:
            # rotary tables are rebuilt on demand for sequences longer than the training context
            cos, sin = _rope_tables(self.head_dim, config.context)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.rope:
            if T > self.rope_cos.shape[0]:
                cos, sin = _rope_tables(self.head_dim, T)
                cos, sin = cos.to(x), sin.to(x)
            else:
                cos, sin = self.rope_cos[:T].to(x.dtype), self.rope_sin[:T].to(x.dtype)
            q, k = _apply_rope(q, cos, sin), _apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        return self.proj(y.transpose(1, 2).reshape(B, T, D))


def _norm(config: GPTConfig) -> nn.Module:
    if config.norm == "rmsnorm":
        return nn.RMSNorm(config.d_model)
    return nn.LayerNorm(config.d_model, bias=config.bias)


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm(x))``, then ``x + ffn(norm(x))``."""

    def __init__(self, config: GPTConfig, ffn: nn.Module) -> None:
        super().__init__()
        self.norm_attn = _norm(config)
        self.attn = CausalSelfAttention(config)
        self.norm_ffn = _norm(config)
        self.ffn = ffn
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.norm_attn(x)))
        return x + self.ffn(self.norm_ffn(x))


class GPT(nn.Module):
    """Decoder-only transformer language model.

    Parameters
    ----------
    config : the :class:`GPTConfig`.
    ffn : optional ``factory(config, layer_index) -> nn.Module`` used instead of ``config.ffn`` (for a block that
        is not registered; a checkpoint of such a model needs the same factory to be loaded).
    """

    def __init__(self, config: GPTConfig, ffn: FFNFactory | None = None) -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        if ffn is not None and not callable(ffn):
            raise TypeError(f"ffn must be a callable factory(config, layer_index), got {type(ffn).__name__}")
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.context, config.d_model) if config.positions == "learned" else None
        self.drop = nn.Dropout(config.dropout)
        make = ffn or build_ffn
        self.blocks = nn.ModuleList(Block(config, make(config, i)) for i in range(config.n_layer))
        self.norm_out = _norm(config)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.head.weight = self.tok_emb.weight
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        # GPT-2 init; residual projections scaled by 1/sqrt(2 n_layer) so the residual stream stays O(1)
        if isinstance(module, nn.Linear):
            std = (
                0.02 / math.sqrt(2 * self.config.n_layer)
                if getattr(module, "residual_projection", 0)
                else 0.02
            )
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self, part: str = "all") -> int:
        """Parameters of ``"all"`` the model, the ``"ffn"`` slots only, or everything ``"non_embedding"``."""
        if part == "all":
            return sum(p.numel() for p in self.parameters())
        if part == "ffn":
            return sum(p.numel() for b in self.blocks for p in b.ffn.parameters())
        if part == "non_embedding":
            n = sum(p.numel() for p in self.parameters()) - self.tok_emb.weight.numel()
            return n - (self.pos_emb.weight.numel() if self.pos_emb is not None else 0)
        raise ValueError(f"part must be 'all', 'ffn' or 'non_embedding', got {part!r}")

    def _check_idx(self, idx: torch.Tensor) -> None:
        if not isinstance(idx, torch.Tensor) or idx.dtype not in (torch.long, torch.int32, torch.int64):
            raise TypeError("idx must be an integer tensor of token ids, shape (B, T)")
        if idx.ndim != 2 or idx.shape[1] == 0:
            raise ValueError(f"idx must have shape (B, T) with T >= 1, got {tuple(idx.shape)}")
        if idx.shape[1] > self.config.context and self.pos_emb is not None:
            raise ValueError(
                f"sequence length {idx.shape[1]} exceeds the context {self.config.context} of learned positions"
            )

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        """Token embeddings (the vectors the head is tied to), without positions."""
        return self.tok_emb(idx)

    def hidden_states(self, idx: torch.Tensor) -> torch.Tensor:
        """Final hidden vectors ``h_t`` (after the final norm, exactly what the head reads): (B, T, d_model)."""
        self._check_idx(idx)
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
        x = self.drop(x)
        for block in self.blocks:
            x = block(x)
        return self.norm_out(x)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Next-token logits, (B, T, vocab_size)."""
        return self.head(self.hidden_states(idx))

    def training_loss(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        """Next-token cross-entropy (targets ``-100`` are ignored); the training loop calls this."""
        loss = next_token_loss(self(x), y)
        return loss, {"ntp": float(loss.detach())}

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Append ``max_new_tokens`` tokens; ``temperature=0`` is greedy (argmax). The window is cropped to the
        last ``context`` tokens, so a sequence may grow past the context."""
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
        if not (temperature >= 0 and math.isfinite(temperature)):
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        self._check_idx(idx[:, -self.config.context :])
        was_training = self.training
        self.eval()
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.config.context :])[:, -1]
            if temperature == 0:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
        self.train(was_training)
        return idx


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` (B, T, V) against ``targets`` (B, T); ``-100`` targets are ignored."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
