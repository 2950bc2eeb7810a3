"""GRPO: group relative policy optimisation for a causal LM, with the Dr. GRPO and DAPO variants.

Shao et al., "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models" (arXiv
2402.03300) introduced GRPO; Liu et al., "Understanding R1-Zero-Like Training: A Critical Perspective" (Dr. GRPO,
arXiv 2503.20783) and Yu et al., "DAPO: An Open-Source LLM Reinforcement Learning System at Scale" (arXiv
2503.14476) are the variants. Works with the tiny stack's :class:`~neurips26.lm.GPT` (``model(ids) -> logits``)
and with Hugging Face causal LMs such as SmolLM2 (``model(ids).logits``; sampling then uses the KV cache).

The method, for one context ``q`` (a prompt, or a prompt plus a forced prefix: only completion tokens learn):

1. sample a group of ``G`` completions ``o_1..o_G ~ pi_old(. | q)``; score them, ``R_i = reward(q, o_i)``;
2. group-normalised advantages, shared by every token of ``o_i``::

       A_i = (R_i - mean_j R_j) / (std_j R_j + eps)        (GRPO; std is the population std)
       A_i =  R_i - mean_j R_j                             (Dr. GRPO: ``scale_rewards=False``)

3. per completion token ``t``, with ``r_{i,t} = pi_theta(o_{i,t} | q, o_{i,<t}) / pi_old(o_{i,t} | ...)``::

       l_{i,t} = -min(r_{i,t} A_i, clip(r_{i,t}, 1 - eps_low, 1 + eps_high) A_i) + beta * KL_{i,t}
       KL_{i,t} = exp(ref - logp) - (ref - logp) - 1      (the k3 estimator of KL(pi_theta || pi_ref))

4. aggregate (``loss_type``), ``|o_i|`` = completion tokens of ``o_i`` (up to and including the end token)::

       "grpo":    (1/N) sum_i (1/|o_i|) sum_t l_{i,t}     (DeepSeekMath: sequence mean, then batch mean)
       "token":   sum_{i,t} l_{i,t} / sum_i |o_i|         (DAPO: token-level mean over the batch)
       "dr_grpo": sum_{i,t} l_{i,t} / (N * L_max)         (Dr. GRPO: a constant normaliser, no length bias)

DAPO's options: clip-higher (``clip_eps_high > clip_eps``) and dynamic sampling (``dynamic_sampling=True``:
groups whose rewards are all equal carry no advantage and are dropped; :meth:`GRPOTrainer.step` keeps drawing
groups from the pool of contexts it is given until ``n_groups`` informative groups are collected).
:meth:`GRPOConfig.dr_grpo` and :meth:`GRPOConfig.dapo` return those presets. Not included: DAPO's overlong reward
shaping (shape the reward yourself) and PPO-style value functions (GRPO has none).

API::

    from neurips26.lm.grpo import GRPOConfig, GRPOTrainer
    def reward(contexts, completions):          # lists of token-id lists -> one float per completion
        return [c.count(7) / max(len(c), 1) for c in completions]
    trainer = GRPOTrainer(model, reward, GRPOConfig(group_size=8, max_new_tokens=6, eos_token_id=0))
    for _ in range(50):
        stats = trainer.step(prompts)           # prompts: list of token-id lists (contexts); returns a dict
    batch = trainer.rollout(prompts)            # or the two halves separately: sample + score ...
    stats = trainer.update(batch)               # ... then the clipped-ratio update on that batch

``reward_fn(contexts, completions, **extra)`` receives the contexts and the sampled completions (token ids, cut
after the end token, which is kept); ``step(..., meta=[...])`` passes ``meta=`` (one object per context,
repeated per completion) for rewards that need more than tokens. A completion ends at ``eos_token_id`` (kept,
counted, scored); the tokens after it are padding and never enter the loss. Prompt tokens are masked: the loss
reads only completion positions (tested).

The functional core is public for reuse and tests: :func:`group_advantages`, :func:`token_weights`,
:func:`clipped_policy_loss`, :func:`completion_logprobs`, :func:`sample_completions`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._hf import cache_kwargs, is_hf_causal_lm, new_cache

__all__ = [
    "GRPOConfig",
    "GRPOTrainer",
    "RolloutBatch",
    "clipped_policy_loss",
    "completion_logprobs",
    "group_advantages",
    "model_logits",
    "sample_completions",
    "token_weights",
]

LOSS_TYPES = ("grpo", "token", "dr_grpo")
RewardFn = Callable[..., Sequence[float]]


# --- configuration ------------------------------------------------------------------------------------------
@dataclass
class GRPOConfig:
    """Settings of :class:`GRPOTrainer` (defaults: DeepSeekMath GRPO without KL, one inner epoch).

    group_size : completions per context, ``G >= 2``.
    max_new_tokens : completion length cap ``L_max``. temperature, top_k : sampling (temperature > 0).
    eos_token_id : the end token (None: every completion runs ``max_new_tokens`` tokens).
    clip_eps : lower clip ``eps_low``; clip_eps_high : upper clip (None: symmetric; DAPO uses 0.28 with 0.2).
    beta_kl : weight of the k3 KL to the reference policy (0: no reference is built).
    scale_rewards : divide advantages by the group std (GRPO) or not (Dr. GRPO). adv_eps : the std's guard.
    loss_type : "grpo" | "token" | "dr_grpo" (see the module docstring).
    dynamic_sampling : drop groups whose rewards are all equal (DAPO); ``step`` refills from its pool.
    inner_epochs : optimizer steps per rollout batch (``mu``; > 1 makes the ratio and clipping matter).
    lr, weight_decay, grad_clip : AdamW and the global gradient-norm clip (None: off).
    micro_batch : sequences per forward/backward in the update (None: all at once; the loss is identical).
    seed : seed of the sampling generator (torch's global generator is never touched).
    """

    group_size: int = 8
    max_new_tokens: int = 16
    temperature: float = 1.0
    top_k: int | None = None
    eos_token_id: int | None = None
    clip_eps: float = 0.2
    clip_eps_high: float | None = None
    beta_kl: float = 0.0
    scale_rewards: bool = True
    adv_eps: float = 1e-4
    loss_type: str = "grpo"
    dynamic_sampling: bool = False
    inner_epochs: int = 1
    lr: float = 1e-4
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0
    micro_batch: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        _int(self.group_size, "group_size", 2)
        _int(self.max_new_tokens, "max_new_tokens", 1)
        _int(self.inner_epochs, "inner_epochs", 1)
        _int(self.seed, "seed", 0)
        if self.top_k is not None:
            _int(self.top_k, "top_k", 1)
        if self.micro_batch is not None:
            _int(self.micro_batch, "micro_batch", 1)
        if self.eos_token_id is not None:
            _int(self.eos_token_id, "eos_token_id", 0)
        _positive(self.temperature, "temperature")
        _positive(self.lr, "lr")
        _positive(self.adv_eps, "adv_eps")
        if not (0 < self.clip_eps < 1):
            raise ValueError(f"clip_eps must be in (0, 1), got {self.clip_eps!r}")
        if self.clip_eps_high is not None and not (
            0 < self.clip_eps_high and math.isfinite(self.clip_eps_high)
        ):
            raise ValueError(f"clip_eps_high must be positive or None, got {self.clip_eps_high!r}")
        for name in ("beta_kl", "weight_decay"):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if self.grad_clip is not None:
            _positive(self.grad_clip, "grad_clip")
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")

    @property
    def clip_high(self) -> float:
        return self.clip_eps if self.clip_eps_high is None else self.clip_eps_high

    @classmethod
    def dr_grpo(cls, **overrides: Any) -> GRPOConfig:
        """Dr. GRPO: advantages not divided by the group std, constant ``N * L_max`` loss normaliser."""
        return cls(**{"scale_rewards": False, "loss_type": "dr_grpo", **overrides})

    @classmethod
    def dapo(cls, **overrides: Any) -> GRPOConfig:
        """DAPO: clip-higher (0.2 / 0.28), token-level loss, dynamic sampling, no KL."""
        return cls(
            **{
                "clip_eps": 0.2,
                "clip_eps_high": 0.28,
                "loss_type": "token",
                "dynamic_sampling": True,
                "beta_kl": 0.0,
                **overrides,
            }
        )


def _int(v: Any, name: str, lo: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")


def _positive(v: Any, name: str) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be a finite number > 0, got {v!r}")


# --- the functional core ------------------------------------------------------------------------------------
def group_advantages(rewards: torch.Tensor, scale: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """``A = (R - mean_G R) / (std_G R + eps)`` per row (one row per group), or ``R - mean`` when not ``scale``.

    ``rewards``: (n_groups, G). The std is the population std (``unbiased=False``); a group with equal rewards
    gets zero advantages either way.
    """
    if not isinstance(rewards, torch.Tensor):
        rewards = torch.as_tensor(rewards, dtype=torch.float32)
    if rewards.ndim != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must have shape (n_groups, G) with G >= 2, got {tuple(rewards.shape)}")
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards must be finite")
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if not scale:
        return centred
    return centred / (rewards.std(dim=1, unbiased=False, keepdim=True) + eps)


def token_weights(mask: torch.Tensor, loss_type: str = "grpo", max_len: int | None = None) -> torch.Tensor:
    """Weights ``w_{i,t}`` with ``loss = sum_{i,t} w_{i,t} l_{i,t}`` for each aggregation (zero off the mask).

    ``mask``: (N, L) 1 on completion tokens. "grpo": ``1 / (N |o_i|)``; "token": ``1 / sum |o_i|``;
    "dr_grpo": ``1 / (N L_max)`` with ``L_max = max_len`` (default ``L``). Weights are global, so a loss summed
    over micro-batches equals the full-batch loss.
    """
    if mask.ndim != 2:
        raise ValueError(f"mask must have shape (N, L), got {tuple(mask.shape)}")
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    m = mask.float()
    n = m.shape[0]
    if loss_type == "grpo":
        lengths = m.sum(dim=1, keepdim=True).clamp(min=1.0)
        return m / (lengths * n)
    if loss_type == "token":
        return m / m.sum().clamp(min=1.0)
    return m / (n * (max_len if max_len is not None else m.shape[1]))


def clipped_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    ref_logp: torch.Tensor | None = None,
    beta_kl: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The GRPO objective (to minimise) on per-token log-probs of the sampled completion tokens.

    ``logp``, ``old_logp``, ``ref_logp``, ``weights``: (N, L); ``advantages``: (N,) (one per sequence, broadcast
    over its tokens). Returns the loss ``sum w * (-min(r A, clip(r) A) + beta KL_k3)`` and statistics (clipped
    token fraction on the mask, mean KL).
    """
    clip_high = clip_low if clip_high is None else clip_high
    ratio = torch.exp(logp - old_logp)
    adv = advantages.to(logp.dtype)[:, None]
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    on = weights > 0
    stats = {"clip_fraction": float(((clipped < unclipped) & on).float().sum() / on.sum().clamp(min=1))}
    if beta_kl > 0:
        if ref_logp is None:
            raise ValueError("ref_logp is required when beta_kl > 0")
        delta = ref_logp - logp
        kl = torch.exp(delta) - delta - 1.0
        per_token = per_token + beta_kl * kl
        stats["kl"] = float((kl.detach() * on).sum() / on.sum().clamp(min=1))
    return (weights * per_token).sum(), stats


def model_logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Next-token logits (B, T, V) of a tiny-stack GPT or a Hugging Face causal LM."""
    out = model(ids)
    return out if isinstance(out, torch.Tensor) else out.logits


def completion_logprobs(model: nn.Module, ids: torch.Tensor, prompt_len: torch.Tensor | int) -> torch.Tensor:
    """Log-probs ``log pi(ids[:, t] | ids[:, <t])`` of the completion tokens, shape (B, L).

    ``ids``: (B, T) rows ``context + completion + right padding``; completion ``j`` of row ``b`` is at position
    ``prompt_len[b] + j``; ``L = T - min(prompt_len)`` columns are returned, left-aligned at each row's completion
    start (columns past a row's end read padding: mask them). Right padding is exact for a causal model.
    """
    B, T = ids.shape
    pl = (
        torch.as_tensor(prompt_len, dtype=torch.long).expand(B)
        if not torch.is_tensor(prompt_len)
        else prompt_len
    )
    if int(pl.min()) < 1:
        raise ValueError("every context must hold at least one token")
    logp_all = F.log_softmax(model_logits(model, ids)[:, :-1].float(), dim=-1)
    tok_logp = logp_all.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1): position t predicts ids[t+1]
    L = T - int(pl.min())
    cols = (pl[:, None] - 1 + torch.arange(L)[None, :]).clamp(max=T - 2)
    return tok_logp.gather(1, cols)


@torch.no_grad()
def sample_completions(
    model: nn.Module,
    context: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    eos_token_id: int | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample completions of equal-length contexts ``context`` (B, T); returns ``tokens`` (B, L) and ``mask``.

    ``mask`` is 1 up to and including the first ``eos_token_id`` (0 after it; those tokens are padding, set to
    the end token). Stops early once every row has ended. A Hugging Face model decodes with its KV cache; a
    tiny-stack GPT re-reads its last ``config.context`` tokens.
    """
    was_training = model.training
    model.eval()
    B = context.shape[0]
    done = torch.zeros(B, dtype=torch.bool)
    out, mask = [], []
    hf = is_hf_causal_lm(model)
    window = getattr(getattr(model, "config", None), "context", None)
    cache = new_cache(model) if hf else None
    seq = context
    step_in = context
    for _ in range(max_new_tokens):
        if hf:
            logits = model(step_in, **cache_kwargs(model, cache)).logits[:, -1]  # the cache grows in place
        else:
            logits = model_logits(model, seq if window is None else seq[:, -window:])[:, -1]
        logits = logits.float() / temperature
        if top_k is not None and top_k < logits.shape[-1]:
            kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        nxt = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator).squeeze(1)
        if eos_token_id is not None:
            nxt = torch.where(done, torch.full_like(nxt, eos_token_id), nxt)
        mask.append(~done)
        out.append(nxt)
        if eos_token_id is not None:
            done = done | (nxt == eos_token_id)
        step_in = nxt[:, None]
        seq = torch.cat([seq, step_in], dim=1)
        if bool(done.all()):
            break
    model.train(was_training)
    return torch.stack(out, dim=1), torch.stack(mask, dim=1).long()


# --- rollouts and the trainer -------------------------------------------------------------------------------
@dataclass
class RolloutBatch:
    """Sampled groups ready for an update. Rows are grouped: row ``g * G + i`` is completion ``i`` of group g.

    ids : (N, T) context + completion + right padding; prompt_len : (N,) context lengths; mask : (N, L) 1 on
    completion tokens; rewards, advantages : (N,); contexts : the n_groups contexts; completions : N lists.
    stats : sampling statistics (mean reward, informative-group fraction, groups sampled and dropped).
    """

    ids: torch.Tensor
    prompt_len: torch.Tensor
    mask: torch.Tensor
    rewards: torch.Tensor
    advantages: torch.Tensor
    contexts: list[list[int]]
    completions: list[list[int]]
    group_size: int
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def n_groups(self) -> int:
        return len(self.contexts)

    def __len__(self) -> int:
        return int(self.ids.shape[0])


class GRPOTrainer:
    """GRPO / Dr. GRPO / DAPO on ``model`` with ``reward_fn`` (see the module docstring for the maths and API).

    Parameters
    ----------
    model : a tiny-stack GPT or a Hugging Face causal LM; trained in place.
    reward_fn : ``reward_fn(contexts, completions, **extra) -> one float per completion``.
    config : :class:`GRPOConfig`.
    ref_model : the KL reference (None with ``beta_kl > 0``: a frozen copy of ``model`` as it is now).
    optimizer : defaults to AdamW over the trainable parameters with ``config.lr`` / ``weight_decay``.
    """

    def __init__(
        self,
        model: nn.Module,
        reward_fn: RewardFn,
        config: GRPOConfig | None = None,
        ref_model: nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not callable(reward_fn):
            raise TypeError(f"reward_fn must be callable, got {type(reward_fn).__name__}")
        config = GRPOConfig() if config is None else config
        if not isinstance(config, GRPOConfig):
            raise TypeError(f"config must be a GRPOConfig, got {type(config).__name__}")
        if ref_model is not None and not isinstance(ref_model, nn.Module):
            raise TypeError(f"ref_model must be a torch.nn.Module or None, got {type(ref_model).__name__}")
        self.model, self.reward_fn, self.config = model, reward_fn, config
        self.ref_model = ref_model
        if config.beta_kl > 0 and ref_model is None:
            self.ref_model = copy.deepcopy(model)
        if self.ref_model is not None:
            self.ref_model.eval()
            self.ref_model.requires_grad_(False)
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = optimizer or torch.optim.AdamW(
            params, lr=config.lr, weight_decay=config.weight_decay
        )
        self.generator = torch.Generator().manual_seed(config.seed)
        self.steps = 0
        self.history: list[dict[str, float]] = []

    def with_config(self, **changes: Any) -> GRPOTrainer:
        """This trainer with some settings changed (same model, optimizer state and sampling stream)."""
        self.config = replace(self.config, **changes)
        return self

    # rollouts -----------------------------------------------------------------------------------------------
    def _contexts(self, contexts: Any) -> list[list[int]]:
        if isinstance(contexts, torch.Tensor):
            contexts = contexts.tolist()
        if not isinstance(contexts, (list, tuple)) or not contexts:
            raise ValueError("contexts must be a non-empty list of token-id lists")
        out = []
        for c in contexts:
            c = (
                c.tolist()
                if isinstance(c, torch.Tensor)
                else list(c)
                if isinstance(c, (list, tuple))
                else None
            )
            if not c or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in c):
                raise ValueError("each context must be a non-empty list of non-negative integer token ids")
            out.append(c)
        window = getattr(getattr(self.model, "config", None), "context", None)
        if getattr(self.model, "pos_emb", None) is not None and window is not None:
            longest = max(map(len, out)) + self.config.max_new_tokens
            if longest > window:
                raise ValueError(
                    f"context + max_new_tokens ({longest}) exceeds the model's context window ({window})"
                )
        return out

    def _sample_groups(
        self, contexts: list[list[int]], meta: list[Any] | None
    ) -> tuple[list[list[int]], torch.Tensor, list[list[int]]]:
        """Sample G completions per context (contexts of equal length decode together); score them."""
        cfg, G = self.config, self.config.group_size
        completions: list[list[int] | None] = [None] * (len(contexts) * G)
        by_len: dict[int, list[int]] = {}
        for g, c in enumerate(contexts):
            by_len.setdefault(len(c), []).append(g)
        for _, groups in sorted(by_len.items()):
            ctx = torch.tensor([contexts[g] for g in groups for _ in range(G)], dtype=torch.long)
            toks, mask = sample_completions(
                self.model,
                ctx,
                cfg.max_new_tokens,
                cfg.temperature,
                cfg.top_k,
                cfg.eos_token_id,
                self.generator,
            )
            lengths = mask.sum(dim=1).tolist()
            rows = toks.tolist()
            for r, g in enumerate(g for g in groups for _ in range(G)):
                i = r % G
                completions[g * G + i] = rows[r][: lengths[r]]
        flat_ctx = [c for c in contexts for _ in range(G)]
        extra = {} if meta is None else {"meta": [m for m in meta for _ in range(G)]}
        rewards = self.reward_fn(flat_ctx, completions, **extra)
        rewards = torch.as_tensor([float(r) for r in rewards], dtype=torch.float32)
        if rewards.shape != (len(flat_ctx),):
            raise ValueError(
                f"reward_fn must return one reward per completion ({len(flat_ctx)}), got {rewards.shape}"
            )
        if not torch.isfinite(rewards).all():
            raise ValueError("reward_fn returned a non-finite reward")
        return contexts, rewards.view(len(contexts), G), completions  # type: ignore[return-value]

    def rollout(
        self,
        contexts: Sequence[Sequence[int]],
        meta: Sequence[Any] | None = None,
        n_groups: int | None = None,
    ) -> RolloutBatch:
        """Sample and score groups for ``contexts``; with dynamic sampling, draw from them as a pool.

        Without dynamic sampling every context gives one group. With it, contexts are taken in order, in chunks of
        ``n_groups`` (default: all of them), groups with equal rewards are dropped, and sampling stops once
        ``n_groups`` informative groups are kept or the pool is used up (the batch may then be smaller or empty).
        """
        cfg, G = self.config, self.config.group_size
        ctx = self._contexts(contexts)
        if meta is not None and len(meta) != len(ctx):
            raise ValueError(f"meta must hold one entry per context ({len(ctx)}), got {len(meta)}")
        meta = list(meta) if meta is not None else None
        target = len(ctx) if n_groups is None else n_groups
        _int(target, "n_groups", 1)
        chunk = target if cfg.dynamic_sampling else len(ctx)
        kept_ctx, kept_r, kept_c, kept_meta = [], [], [], []
        sampled = informative = 0
        all_rewards = []
        start = 0
        while start < len(ctx) and len(kept_ctx) < target:
            part = ctx[start : start + chunk]
            part_meta = meta[start : start + chunk] if meta is not None else None
            start += chunk
            _, r, comps = self._sample_groups(part, part_meta)
            sampled += len(part)
            all_rewards.append(r)
            varied = (r.max(dim=1).values - r.min(dim=1).values) > 0
            informative += int(varied.sum())
            for g in range(len(part)):
                if cfg.dynamic_sampling and not bool(varied[g]):
                    continue
                if len(kept_ctx) >= target:
                    break
                kept_ctx.append(part[g])
                kept_r.append(r[g])
                kept_c.extend(comps[g * G : (g + 1) * G])
                kept_meta.append(part_meta[g] if part_meta is not None else None)
            if not cfg.dynamic_sampling:
                break
        rewards_seen = torch.cat(all_rewards) if all_rewards else torch.zeros(0, G)
        stats = {
            "reward_mean": float(rewards_seen.mean()) if rewards_seen.numel() else float("nan"),
            "groups_sampled": float(sampled),
            "groups_kept": float(len(kept_ctx)),
            "informative_fraction": informative / max(sampled, 1),
        }
        if not kept_ctx:
            empty = torch.zeros(0, 1, dtype=torch.long)
            return RolloutBatch(
                empty,
                torch.zeros(0, dtype=torch.long),
                empty.clone(),
                torch.zeros(0),
                torch.zeros(0),
                [],
                [],
                G,
                stats,
            )
        rewards = torch.stack(kept_r)
        adv = group_advantages(rewards, cfg.scale_rewards, cfg.adv_eps).reshape(-1)
        return self._pack(kept_ctx, kept_c, rewards.reshape(-1), adv, stats)

    def _pack(
        self,
        contexts: list[list[int]],
        completions: list[list[int]],
        rewards: torch.Tensor,
        advantages: torch.Tensor,
        stats: dict[str, float],
    ) -> RolloutBatch:
        G = self.config.group_size
        pad = self.config.eos_token_id if self.config.eos_token_id is not None else 0
        rows = [contexts[i // G] + completions[i] for i in range(len(completions))]
        T = max(map(len, rows))
        ids = torch.full((len(rows), T), pad, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        prompt_len = torch.tensor([len(contexts[i // G]) for i in range(len(rows))], dtype=torch.long)
        L = T - int(prompt_len.min())
        lengths = torch.tensor([len(c) for c in completions], dtype=torch.long)
        mask = (torch.arange(L)[None, :] < lengths[:, None]).long()
        return RolloutBatch(ids, prompt_len, mask, rewards, advantages, contexts, completions, G, stats)

    # the update ---------------------------------------------------------------------------------------------
    def _chunks(self, n: int) -> list[slice]:
        size = self.config.micro_batch or n
        return [slice(i, min(n, i + size)) for i in range(0, n, size)]

    @torch.no_grad()
    def _frozen_logprobs(self, model: nn.Module, batch: RolloutBatch) -> torch.Tensor:
        was = model.training
        model.eval()
        parts = [
            completion_logprobs(model, batch.ids[s], batch.prompt_len[s]) for s in self._chunks(len(batch))
        ]
        model.train(was)
        return _cat_cols(parts, batch.mask.shape[1])

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        """``inner_epochs`` optimizer steps of the clipped-ratio loss on ``batch`` (completion tokens only)."""
        if not isinstance(batch, RolloutBatch):
            raise TypeError(f"batch must be a RolloutBatch, got {type(batch).__name__}")
        cfg = self.config
        stats = dict(batch.stats)
        if len(batch) == 0:
            stats.update(loss=0.0, skipped=1.0)
            self.history.append(stats)
            return stats
        weights = token_weights(batch.mask, cfg.loss_type, cfg.max_new_tokens)
        old = self._frozen_logprobs(self.model, batch) if cfg.inner_epochs > 1 else None
        ref = self._frozen_logprobs(self.ref_model, batch) if cfg.beta_kl > 0 else None
        self.model.train()
        for _ in range(cfg.inner_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            total, clip, kl = 0.0, 0.0, 0.0
            for s in self._chunks(len(batch)):
                logp = completion_logprobs(self.model, batch.ids[s], batch.prompt_len[s])
                logp = _pad_cols(logp, batch.mask.shape[1])
                w = weights[s]
                old_s = logp.detach() if old is None else old[s]
                loss, st = clipped_policy_loss(
                    logp,
                    old_s,
                    batch.advantages[s],
                    w,
                    cfg.clip_eps,
                    cfg.clip_high,
                    None if ref is None else ref[s],
                    cfg.beta_kl,
                )
                loss.backward()
                share = float(batch.mask[s].sum()) / max(float(batch.mask.sum()), 1.0)
                total += float(loss.detach())
                clip += st["clip_fraction"] * share
                kl += st.get("kl", 0.0) * share
            if cfg.grad_clip is not None:
                stats["grad_norm"] = float(
                    torch.nn.utils.clip_grad_norm_(
                        [p for g in self.optimizer.param_groups for p in g["params"]], cfg.grad_clip
                    )
                )
            self.optimizer.step()
        self.steps += 1
        stats.update(loss=total, clip_fraction=clip, completion_tokens=float(batch.mask.sum()))
        if cfg.beta_kl > 0:
            stats["kl"] = kl
        self.history.append(stats)
        return stats

    def step(
        self,
        contexts: Sequence[Sequence[int]],
        meta: Sequence[Any] | None = None,
        n_groups: int | None = None,
    ) -> dict[str, float]:
        """One rollout (:meth:`rollout`) and one update (:meth:`update`); returns the statistics."""
        return self.update(self.rollout(contexts, meta=meta, n_groups=n_groups))


def _pad_cols(x: torch.Tensor, L: int) -> torch.Tensor:
    if x.shape[1] == L:
        return x
    if x.shape[1] > L:
        return x[:, :L]
    return torch.cat([x, x.new_zeros(x.shape[0], L - x.shape[1])], dim=1)


def _cat_cols(parts: list[torch.Tensor], L: int) -> torch.Tensor:
    return torch.cat([_pad_cols(p, L) for p in parts], dim=0)
