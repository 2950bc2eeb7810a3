"""Self-speculative decoding with NextLat's latent dynamics as the drafter, and the greedy decoding it must equal.

From the latent ``h_t`` that produced the next token ``x_{t+1}`` (exactly, by the transformer), the dynamics model
drafts ahead without the transformer: ``h_hat <- p_psi(h_hat, E(x))``, ``x <- argmax W h_hat``, up to ``draft``
tokens (fewer when the draft's confidence drops below ``min_confidence``). One transformer pass over the sequence
plus the draft then verifies it: the longest prefix of the draft that agrees with the transformer's own argmax is
accepted, and the transformer's token after it comes for free. Every pass therefore yields at least one token and
the output is exactly greedy decoding's.

Exactness is bitwise: both :func:`greedy_decode` and :func:`self_speculative_decode` run every transformer pass on
a window of the same fixed length (prompt + max_new_tokens, the unused tail padded), so the logits at a position
never depend on how many tokens follow it (causal attention gives exactly zero weight to the future; changing the
window length would change float rounding in the last bits). Greedy decoding without a KV cache costs one
transformer pass per token; the saving is counted against that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..transformer import GPTConfig
from .nextlat import NextLatModel

__all__ = ["SpeculativeResult", "greedy_decode", "self_speculative_decode"]


@dataclass
class SpeculativeResult:
    """``tokens``: prompt + generated (1-D). ``forward_passes``: transformer passes used; ``greedy_passes``: what
    greedy decoding uses (one per new token); ``saved`` = greedy - used. ``accepted``: drafted tokens accepted at
    each verification pass; ``drafted``: tokens drafted before each pass."""

    tokens: torch.Tensor
    forward_passes: int
    greedy_passes: int
    accepted: list[int] = field(default_factory=list)
    drafted: list[int] = field(default_factory=list)

    @property
    def saved(self) -> int:
        return self.greedy_passes - self.forward_passes

    @property
    def mean_accepted(self) -> float:
        """Mean drafted tokens accepted per verification pass (passes that had a draft)."""
        pairs = [a for a, d in zip(self.accepted, self.drafted, strict=True) if d > 0]
        return sum(pairs) / len(pairs) if pairs else math.nan

    @property
    def tokens_per_pass(self) -> float:
        """New tokens per transformer pass (1 for greedy decoding)."""
        return self.greedy_passes / self.forward_passes if self.forward_passes else math.nan


def _prompt(prompt: torch.Tensor, vocab: int) -> torch.Tensor:
    if not isinstance(prompt, torch.Tensor) or prompt.dtype not in (torch.long, torch.int32, torch.int64):
        raise TypeError("prompt must be an integer tensor of token ids")
    if prompt.ndim == 2 and prompt.shape[0] == 1:
        prompt = prompt[0]
    if prompt.ndim != 1 or prompt.numel() == 0:
        raise ValueError(
            f"prompt must be a non-empty 1-D sequence (or shape (1, T)), got {tuple(prompt.shape)}"
        )
    if int(prompt.min()) < 0 or int(prompt.max()) >= vocab:
        raise ValueError(f"prompt ids must lie in [0, {vocab})")
    return prompt.long()


def _window(model, prompt: torch.Tensor, max_new_tokens: int) -> int:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    length = prompt.numel() + max_new_tokens
    if length > model.config.context:
        raise ValueError(
            f"prompt length {prompt.numel()} + max_new_tokens {max_new_tokens} exceeds the context "
            f"{model.config.context}"
        )
    return length


def _pass(model, seq: torch.Tensor, length: int) -> torch.Tensor:
    """Hidden states of ``seq`` computed in a window of fixed ``length`` (tail padded with token 0)."""
    window = torch.zeros(1, length, dtype=torch.long)
    window[0, : seq.numel()] = seq
    return model.hidden_states(window)[0]


@torch.no_grad()
def greedy_decode(model, prompt: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Greedy (argmax) decoding, one transformer pass per token, on the same fixed window as speculative decoding.

    ``model``: a :class:`~neurips26.lm.GPT` or anything with ``hidden_states``, ``config`` and ``gpt.head`` /
    ``head``.
    """
    if not hasattr(model, "hidden_states") or not isinstance(getattr(model, "config", None), GPTConfig):
        raise TypeError(f"model must be a GPT, NextLatModel or MultiTokenModel, got {type(model).__name__}")
    prompt = _prompt(prompt, model.config.vocab_size)
    length = _window(model, prompt, max_new_tokens)
    head = model.gpt.head if hasattr(model, "gpt") else model.head
    was_training = model.training
    model.eval()
    seq = prompt.clone()
    for _ in range(max_new_tokens):
        h = _pass(model, seq, length)
        seq = torch.cat([seq, head(h[seq.numel() - 1]).argmax(-1, keepdim=True)])
    model.train(was_training)
    return seq


@torch.no_grad()
def self_speculative_decode(
    model: NextLatModel,
    prompt: torch.Tensor,
    max_new_tokens: int,
    draft: int = 4,
    min_confidence: float = 0.0,
) -> SpeculativeResult:
    """Greedy decoding of ``model`` (a :class:`NextLatModel`) with its latent dynamics drafting ``draft`` tokens
    per transformer pass; returns the tokens (exactly :func:`greedy_decode`'s) and the passes used and saved.

    ``min_confidence``: stop a draft early when the drafter's top probability falls below it (0: always draft
    ``draft`` tokens).
    """
    if not isinstance(model, NextLatModel):
        raise TypeError(f"model must be a NextLatModel, got {type(model).__name__}")
    if isinstance(draft, bool) or not isinstance(draft, int) or draft < 0:
        raise ValueError(f"draft must be a non-negative integer, got {draft!r}")
    if (
        isinstance(min_confidence, bool)
        or not isinstance(min_confidence, (int, float))
        or not (0.0 <= min_confidence <= 1.0)
    ):
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence!r}")
    prompt = _prompt(prompt, model.config.vocab_size)
    length = _window(model, prompt, max_new_tokens)
    head = model.gpt.head
    was_training = model.training
    model.eval()
    seq = prompt.clone()
    target = prompt.numel() + max_new_tokens
    proposals: list[int] = []
    result = SpeculativeResult(seq, 0, max_new_tokens)
    while seq.numel() < target:
        h = _pass(model, torch.cat([seq, torch.tensor(proposals, dtype=torch.long)]), length)
        result.forward_passes += 1
        start = seq.numel() - 1  # position whose logits give the next token
        verified = head(h[start : start + len(proposals) + 1]).argmax(-1)
        n = 0
        while n < len(proposals) and proposals[n] == int(verified[n]):
            n += 1
        result.drafted.append(len(proposals))
        result.accepted.append(n)
        new = torch.tensor(proposals[:n] + [int(verified[n])], dtype=torch.long)
        seq = torch.cat([seq, new])[:target]
        # draft from the latent that produced the last exact token
        proposals = []
        room = min(draft, target - seq.numel())
        if room > 0:
            latent, token = h[start + n], seq[-1:]
            for _ in range(room):
                latent = model.step(latent[None], token)[0]
                probs = torch.softmax(head(latent), dim=-1)
                conf, token = probs.max(-1, keepdim=True)
                if float(conf) < min_confidence:
                    break
                proposals.append(int(token))
    result.tokens = seq
    model.train(was_training)
    return result
