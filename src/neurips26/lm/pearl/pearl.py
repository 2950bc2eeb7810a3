"""PEARL: prefix-expanded adversarial GRPO for durable post-hoc suppression of an undesired behaviour.

Paper: "PEARL: Prefix-Expanded Adversarial Reinforcement Learning" (title reconstructed; NeurIPS 2026
submission, no arXiv id found). Builds on Qi et al., "Safety Alignment Should Be Made More Than Just a Few Tokens
Deep" (arXiv 2406.05946: train recovery from harmful response prefixes) and GRPO (Shao et al., arXiv 2402.03300).
The algorithm is reconstructed from the abstract [R] (digest: shared/papers/pearl.md).

An LM ("organism", ``theta_0``) shows an undesired behaviour. PEARL is GRPO whose rollout groups come from two
sources, at a fixed total number of groups per update:

- *standard* groups: ``G`` continuations of a training prompt ``x`` from the current policy;
- *prefix-expanded* groups (each slot replaced with probability ``rho``): a cached organism trajectory
  ``(x, y_1..y_L)`` and a cut point ``1 <= k < L``, then ``G`` continuations of ``x + y_1..y_k`` [R].

The cut point is *adversarial* [R]: every ``(trajectory, k)`` keeps a running estimate ``e`` of how often the
current policy still misbehaves from that state (initialised to 1, updated with weight ``ema`` from each group's
exploit fraction), and states are drawn with probability proportional to ``floor + e``; ``cut="uniform"`` draws
them uniformly. With a detector, a state whose prefix already shows the whole behaviour
(``is_exploit(x, y_1..y_k)``) is left out: no continuation can change what the detector or the reward sees
there, so its estimate would stay pinned at 1 and draw ever more of the budget to a group whose rewards differ
only in correctness. Every remaining state's exploit flag therefore counts behaviour that its continuation
completes. The reward is computed on the **full response** (prefix + continuation), so a continuation from
a state that already holds part of the behaviour is paid for recovering; advantages are group-normalised::

    A_i = (R(x, y_<=k + o_i) - mean_G R) / (std_G R + eps)

and the clipped-ratio loss (:mod:`neurips26.lm.grpo`) reads only the continuation tokens ``o_i``: the prefix is
context, masked out of the loss (else PEARL would be SFT on the organism's misbehaviour). ``rho = 0`` is plain
GRPO with the same code path.

API::

    from neurips26.lm.pearl import PEARLConfig, PEARLTrainer
    from neurips26.lm.grpo import GRPOConfig
    trainer = PEARLTrainer(model, reward_fn, trajectories, is_exploit,
                           PEARLConfig(rho=0.5), GRPOConfig(group_size=8, max_new_tokens=8, eos_token_id=end))
    for _ in range(150):
        stats = trainer.step(prompt_batch)      # list of token-id prompts; stats["prefix_groups"] etc.

``reward_fn(prompt, response) -> float`` and ``is_exploit(prompt, response) -> bool`` take token-id lists;
``trajectories`` is a list of ``(prompt, response)`` token-id pairs sampled from the organism.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import nn

from ..grpo import GRPOConfig, GRPOTrainer

__all__ = ["PEARLConfig", "PEARLTrainer"]

CUTS = ("adversarial", "uniform")


@dataclass
class PEARLConfig:
    """Settings of the prefix expansion (the GRPO settings are a :class:`~neurips26.lm.grpo.GRPOConfig`).

    rho : probability that a group slot is prefix-expanded (0: plain GRPO; 1: only prefix states).
    cut : ``"adversarial"`` (states drawn by their running exploit estimate) or ``"uniform"``.
    ema : weight of a new group's exploit fraction in a state's estimate, in (0, 1].
    floor : added to every state's estimate before drawing (keeps every state reachable), > 0.
    seed : seed of the slot and state draws.
    """

    rho: float = 0.5
    cut: str = "adversarial"
    ema: float = 0.5
    floor: float = 0.05
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.rho, bool) or not isinstance(self.rho, (int, float)) or not 0.0 <= self.rho <= 1.0:
            raise ValueError(f"rho must be a number in [0, 1], got {self.rho!r}")
        if self.cut not in CUTS:
            raise ValueError(f"cut must be one of {CUTS}, got {self.cut!r}")
        if not (isinstance(self.ema, (int, float)) and 0.0 < self.ema <= 1.0):
            raise ValueError(f"ema must be in (0, 1], got {self.ema!r}")
        if not (isinstance(self.floor, (int, float)) and self.floor > 0 and math.isfinite(self.floor)):
            raise ValueError(f"floor must be a finite number > 0, got {self.floor!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")


def _tokens(seq: Any, name: str) -> list[int]:
    seq = seq.tolist() if hasattr(seq, "tolist") else seq
    if not isinstance(seq, (list, tuple)) or not seq:
        raise ValueError(f"{name} must be a non-empty sequence of token ids")
    if not all(isinstance(t, numbers.Integral) and not isinstance(t, bool) and t >= 0 for t in seq):
        raise ValueError(f"{name} must hold non-negative integer token ids, got {list(seq)[:8]!r}")
    return [int(t) for t in seq]  # numpy integers too (a list of np.int64 from a user's tokenizer)


class PEARLTrainer:
    """Prefix-expanded GRPO (see the module docstring). Trains ``model`` in place.

    Parameters
    ----------
    model : a tiny-stack GPT or a Hugging Face causal LM.
    reward_fn : ``reward_fn(prompt, response) -> float`` on the full response (prefix + continuation).
    trajectories : cached organism ``(prompt, response)`` pairs; responses need >= 2 tokens to hold a cut.
        May be empty only with ``rho = 0``.
    is_exploit : ``is_exploit(prompt, response) -> bool``, the behaviour detector the adversarial estimate
        reads (required with ``cut="adversarial"`` and ``rho > 0``). With it, states whose prefix alone already
        shows the behaviour are left out (``n_unrecoverable`` counts them), under either cut.
    config : :class:`PEARLConfig`. grpo : :class:`~neurips26.lm.grpo.GRPOConfig` (group size, clipping, KL...).
    ref_model : KL reference (see :class:`~neurips26.lm.grpo.GRPOTrainer`).
    """

    def __init__(
        self,
        model: nn.Module,
        reward_fn: Callable[[list[int], list[int]], float],
        trajectories: Sequence[tuple[Sequence[int], Sequence[int]]],
        is_exploit: Callable[[list[int], list[int]], bool] | None = None,
        config: PEARLConfig | None = None,
        grpo: GRPOConfig | None = None,
        ref_model: nn.Module | None = None,
    ) -> None:
        if not callable(reward_fn):
            raise TypeError(f"reward_fn must be callable, got {type(reward_fn).__name__}")
        self.config = PEARLConfig() if config is None else config
        if not isinstance(self.config, PEARLConfig):
            raise TypeError(f"config must be a PEARLConfig, got {type(self.config).__name__}")
        if is_exploit is not None and not callable(is_exploit):
            raise TypeError(f"is_exploit must be callable or None, got {type(is_exploit).__name__}")
        if isinstance(trajectories, (str, bytes)) or not isinstance(trajectories, Sequence):
            raise TypeError("trajectories must be a list of (prompt, response) token-id pairs")
        self.trajectories = []
        for i, pair in enumerate(trajectories):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(f"trajectories[{i}] must be a (prompt, response) pair")
            p, r = (
                _tokens(pair[0], f"trajectories[{i}] prompt"),
                _tokens(pair[1], f"trajectories[{i}] response"),
            )
            if len(r) < 2:
                raise ValueError(f"trajectories[{i}] response must hold at least 2 tokens (a cut needs one)")
            self.trajectories.append((p, r))
        if self.config.rho > 0 and not self.trajectories:
            raise ValueError("rho > 0 needs at least one cached trajectory")
        if self.config.rho > 0 and self.config.cut == "adversarial" and is_exploit is None:
            raise ValueError("cut='adversarial' needs is_exploit (the detector its estimates read)")
        self.reward_fn, self.is_exploit = reward_fn, is_exploit
        # every state (trajectory i, cut k) with 1 <= k < len(response) whose continuation can still decide
        # the behaviour (with a detector: the prefix alone does not show it)
        states = [(i, k) for i, (_, r) in enumerate(self.trajectories) for k in range(1, len(r))]
        if is_exploit is not None:
            kept = [
                (i, k)
                for i, k in states
                if not is_exploit(self.trajectories[i][0], self.trajectories[i][1][:k])
            ]
            self.n_unrecoverable = len(states) - len(kept)
            states = kept
        else:
            self.n_unrecoverable = 0
        if self.config.rho > 0 and not states:
            raise ValueError(
                "rho > 0 needs a cached trajectory with a cut whose prefix does not already show the behaviour"
            )
        self.states = states
        self.estimate = np.ones(len(self.states))
        self.rng = np.random.default_rng(self.config.seed)
        self.grpo = GRPOTrainer(model, self._reward, grpo, ref_model=ref_model)
        self.history: list[dict[str, float]] = []

    @property
    def model(self) -> nn.Module:
        return self.grpo.model

    # the GRPO reward: full response, and the adversarial estimate's bookkeeping ---------------------------
    def _reward(
        self, contexts: list[list[int]], completions: list[list[int]], meta: list[Any]
    ) -> list[float]:
        out, exploit = [], {}
        for c, o, m in zip(contexts, completions, meta):
            prompt_len, state = m
            prompt, response = c[:prompt_len], c[prompt_len:] + o
            out.append(float(self.reward_fn(prompt, response)))
            if state is not None and self.is_exploit is not None:
                exploit.setdefault(state, []).append(bool(self.is_exploit(prompt, response)))
        a = self.config.ema
        for s, flags in exploit.items():
            self.estimate[s] = (1 - a) * self.estimate[s] + a * float(np.mean(flags))
        self._last_exploit = exploit
        return out

    def contexts(
        self, prompts: Sequence[Sequence[int]]
    ) -> tuple[list[list[int]], list[tuple[int, int | None]]]:
        """The group contexts for one update: each prompt slot, or (probability ``rho``) a prefix state.

        Returns the contexts and, per context, ``(prompt length, state index or None)``.
        """
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence) or not prompts:
            raise ValueError("prompts must be a non-empty list of token-id prompts")
        ctx, meta = [], []
        swap = self.rng.random(len(prompts)) < self.config.rho
        for p, expand in zip(prompts, swap):
            if not expand:
                p = _tokens(p, "prompts[i]")
                ctx.append(p)
                meta.append((len(p), None))
                continue
            if self.config.cut == "uniform":
                s = int(self.rng.integers(len(self.states)))
            else:
                w = self.estimate + self.config.floor
                s = int(self.rng.choice(len(self.states), p=w / w.sum()))
            i, k = self.states[s]
            prompt, response = self.trajectories[i]
            ctx.append(prompt + response[:k])
            meta.append((len(prompt), s))
        return ctx, meta

    def step(self, prompts: Sequence[Sequence[int]]) -> dict[str, float]:
        """One GRPO update on ``len(prompts)`` groups (prefix-expanded ones replace standard ones)."""
        ctx, meta = self.contexts(prompts)
        self._last_exploit = {}
        stats = self.grpo.step(ctx, meta=meta)
        stats = dict(stats)
        prefix = [m[1] is not None for m in meta]
        stats["prefix_groups"] = float(sum(prefix))
        flags = [f for v in self._last_exploit.values() for f in v]
        stats["prefix_exploit_rate"] = float(np.mean(flags)) if flags else float("nan")
        stats["estimate_mean"] = float(self.estimate.mean()) if len(self.estimate) else float("nan")
        self.history.append(stats)
        return stats
