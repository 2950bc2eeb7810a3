"""The same language model built from ``torch.nn.TransformerEncoderLayer``: an independent reference.

:class:`TorchEncoderLM` stacks PyTorch's own pre-norm encoder layers (GELU, 4x feed-forward) under a causal mask
between the same embeddings and tied head as :class:`~neurips26.lm.GPT` with ``ffn="mlp"`` and learned positions.
:func:`copy_weights` loads a GPT's weights into it, so the two compute the same function: the stack's tests use it
as an oracle for the whole forward pass, and the benchmark compares training throughput at equal size.
"""

from __future__ import annotations

import torch
from torch import nn

from .transformer import GPT, GPTConfig

__all__ = ["TorchEncoderLM", "copy_weights"]


class TorchEncoderLM(nn.Module):
    """Decoder-only LM from ``nn.TransformerEncoderLayer(norm_first=True)`` layers and a causal mask."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if (
            config.ffn != "mlp"
            or config.positions != "learned"
            or config.norm != "layernorm"
            or not config.bias
        ):
            raise ValueError(
                "TorchEncoderLM mirrors ffn='mlp', positions='learned', norm='layernorm', bias=True"
            )
        self.config = config
        d = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, d)
        self.pos_emb = nn.Embedding(config.context, d)
        layer = nn.TransformerEncoderLayer(
            d,
            config.n_head,
            dim_feedforward=round(config.mlp_ratio * d),
            dropout=config.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, config.n_layer, enable_nested_tensor=False)
        self.norm_out = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight
        self.register_buffer(
            "mask", nn.Transformer.generate_square_subsequent_mask(config.context), persistent=False
        )

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))
        x = self.encoder(x, mask=self.mask[:T, :T], is_causal=True)
        return self.head(self.norm_out(x))


@torch.no_grad()
def copy_weights(source: GPT, target: TorchEncoderLM) -> TorchEncoderLM:
    """Load ``source``'s weights (ffn='mlp', learned positions) into ``target``; returns ``target``."""
    target.tok_emb.weight.copy_(source.tok_emb.weight)
    target.pos_emb.weight.copy_(source.pos_emb.weight)
    for ours, theirs in zip(source.blocks, target.encoder.layers, strict=True):
        theirs.norm1.load_state_dict(ours.norm_attn.state_dict())
        theirs.norm2.load_state_dict(ours.norm_ffn.state_dict())
        theirs.self_attn.in_proj_weight.copy_(ours.attn.qkv.weight)
        theirs.self_attn.in_proj_bias.copy_(ours.attn.qkv.bias)
        theirs.self_attn.out_proj.weight.copy_(ours.attn.proj.weight)
        theirs.self_attn.out_proj.bias.copy_(ours.attn.proj.bias)
        theirs.linear1.load_state_dict(ours.ffn.up.state_dict())
        theirs.linear2.load_state_dict(ours.ffn.down.state_dict())
    target.norm_out.load_state_dict(source.norm_out.state_dict())
    return target
