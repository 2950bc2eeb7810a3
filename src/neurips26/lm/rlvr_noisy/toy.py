"""Toy RLVR on the tiny stack: fraction addition with several answer surface forms [reconstructed].

The digest's Part 2 stand-in for GRPO on Qwen2.5-Math-7B: a tiny character GPT learns ``a/b+c/d=[answer]`` by
SFT (answers written reduced, unreduced or as a terminating decimal), then GRPO (:mod:`neurips26.lm.grpo`) trains
it against *annotations* with the reward "the output's answer is equivalent to the annotation" (the same
:func:`~.answers.equivalent` that re-verification uses). A label can be clean, truly wrong (one of the base model's
own wrong answers: the confirmation-bias noise model), secretly correct (an equivalent form that a string-match
verifier called wrong: contamination), or random; the format-only reward pays for a well-formed ``[...]``.

API::

    task = FractionTask(seed=0)
    model = sft_policy(task, steps=600, seed=0)            # the base policy
    labels = LabelPools.build(model, task, seed=0)          # clean / wrong / secretly-correct label per problem
    trainer = rlvr_trainer(model, task, GRPOConfig(group_size=8, lr=5e-4))
    for _ in range(100):
        trainer.step(*task.batch(problems, annotations, rng))
    greedy_accuracy(model, task, task.eval_problems)
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from ..grpo import GRPOConfig, GRPOTrainer
from ..tokenizers import CharTokenizer
from ..training import TrainConfig, train
from ..transformer import GPT, GPTConfig
from .answers import equivalent

__all__ = [
    "FractionTask",
    "LabelPools",
    "false_match_rate",
    "format_ok",
    "greedy_accuracy",
    "pgfc_reward",
    "rlvr_reward",
    "rlvr_trainer",
    "run_arm",
    "sft_policy",
]

ALPHABET = "0123456789/+-=.[]\n"
_FORMAT = re.compile(r"^\[([0-9./\-]{1,12})\]\n?$")
Problem = tuple[int, int, int, int]


def format_ok(completion: str) -> str | None:
    """The answer inside a well-formed ``[answer]`` completion (ending at the end token), else None."""
    m = _FORMAT.match(completion)
    return m.group(1) if m else None


def _decimal(q: Fraction) -> str | None:
    d = q.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1 or q.denominator == 1:
        return None
    return f"{float(q):.6f}".rstrip("0")


class FractionTask:
    """Fraction sums with a held-out split; ``n_eval`` problems are held out for greedy evaluation.

    ``same_denominator=True`` (default): ``a/b + c/b`` with ``a, c in 1..9``, ``b in 2..max_den`` (648 problems
    at ``max_den = 9``); False: ``a/b + c/d`` with proper fractions (1296 problems).
    """

    def __init__(
        self, max_den: int = 9, n_eval: int = 300, seed: int = 0, same_denominator: bool = True
    ) -> None:
        if isinstance(max_den, bool) or not isinstance(max_den, int) or not 3 <= max_den <= 9:
            raise ValueError(f"max_den must be an integer in [3, 9], got {max_den!r}")
        if same_denominator:
            problems = [
                (a, b, c, b) for b in range(2, max_den + 1) for a in range(1, 10) for c in range(1, 10)
            ]
        else:
            problems = [
                (a, b, c, d)
                for b in range(2, max_den + 1)
                for a in range(1, b)
                for d in range(2, max_den + 1)
                for c in range(1, d)
            ]
        if isinstance(n_eval, bool) or not isinstance(n_eval, int) or not 1 <= n_eval < len(problems) - 10:
            raise ValueError(f"n_eval must be an integer in [1, {len(problems) - 11}], got {n_eval!r}")
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(problems))
        self.eval_problems: list[Problem] = [problems[i] for i in order[:n_eval]]
        self.train_problems: list[Problem] = [problems[i] for i in order[n_eval:]]
        self.tokenizer = CharTokenizer(ALPHABET)
        self.eos = self.tokenizer.encode("\n")[0]

    @staticmethod
    def prompt(p: Problem) -> str:
        a, b, c, d = p
        return f"{a}/{b}+{c}/{d}="

    @staticmethod
    def answer(p: Problem) -> Fraction:
        a, b, c, d = p
        return Fraction(a, b) + Fraction(c, d)

    @staticmethod
    def reference(p: Problem) -> str:
        """The reference annotation: the reduced fraction (an integer when whole)."""
        q = FractionTask.answer(p)
        return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"

    @staticmethod
    def surface_forms(p: Problem) -> list[str]:
        """Equivalent ways to write the answer: reduced, unreduced ``(ad + bc)/(bd)``, terminating decimal."""
        a, b, c, d = p
        forms = [FractionTask.reference(p)]
        unreduced = f"{a + c}/{b}" if b == d else f"{a * d + b * c}/{b * d}"
        if unreduced not in forms:
            forms.append(unreduced)
        dec = _decimal(FractionTask.answer(p))
        if dec is not None:
            forms.append(dec)
        return forms

    def encode_prompt(self, p: Problem) -> list[int]:
        return self.tokenizer.encode(self.prompt(p))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def sft_text(self, p: Problem, rng: np.random.Generator) -> str:
        """A training sequence: reduced form 60%, unreduced 25%, decimal 15% (when they exist)."""
        forms = self.surface_forms(p)
        u = rng.random()
        form = forms[0]
        if u > 0.6 and len(forms) > 1:
            form = forms[1] if (u < 0.85 or len(forms) < 3) else forms[2]
        return f"{self.prompt(p)}[{form}]\n"


class _SFTSource:
    """Batch source for :func:`~neurips26.lm.training.train`: answer tokens are targets, prompt tokens -100."""

    def __init__(self, task: FractionTask, problems: Sequence[Problem], seed: int) -> None:
        self.task, self.problems = task, list(problems)
        self.rng = np.random.default_rng(seed)

    def sample(self, batch_size: int, context: int, generator: torch.Generator | None = None):
        idx = self.rng.integers(0, len(self.problems), batch_size)
        seqs = []
        for i in idx:
            p = self.problems[i]
            text = self.task.sft_text(p, self.rng)
            ids = self.task.tokenizer.encode(text)
            n_prompt = len(self.task.prompt(p))
            seqs.append((ids, n_prompt))
        T = max(len(s) for s, _ in seqs) - 1
        x = torch.full((batch_size, T), self.task.eos, dtype=torch.long)
        y = torch.full((batch_size, T), -100, dtype=torch.long)
        for r, (ids, n_prompt) in enumerate(seqs):
            t = torch.tensor(ids)
            x[r, : len(ids) - 1] = t[:-1]
            y[r, n_prompt - 1 : len(ids) - 1] = t[n_prompt:]
        return x, y

    def windows(self, *args, **kwargs):  # not used: no validation stream
        return iter(())


def sft_policy(
    task: FractionTask,
    steps: int = 600,
    seed: int = 0,
    d_model: int = 128,
    n_layer: int = 2,
    lr: float = 3e-3,
    batch_size: int = 64,
) -> GPT:
    """The base policy: a tiny GPT (``n_layer`` x ``d_model``, 4 heads) trained by SFT on the train problems."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=len(ALPHABET), context=32, n_layer=n_layer, n_head=4, d_model=d_model))
    train(
        model,
        _SFTSource(task, task.train_problems, seed),
        TrainConfig(steps=steps, batch_size=batch_size, lr=lr, seed=seed, weight_decay=0.0),
        progress=False,
    )
    model.eval()
    return model


@torch.no_grad()
def _greedy(model: GPT, task: FractionTask, problems: Sequence[Problem], max_new: int = 10) -> list[str]:
    out: list[str] = []
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(problems):
        by_len.setdefault(len(task.prompt(p)), []).append(i)
    texts: dict[int, str] = {}
    for _, idx in by_len.items():
        ctx = torch.tensor([task.encode_prompt(problems[i]) for i in idx], dtype=torch.long)
        gen = model.generate(ctx, max_new, temperature=0.0)[:, ctx.shape[1] :].tolist()
        for i, g in zip(idx, gen):
            s = task.decode(g)
            texts[i] = s[: s.index("\n") + 1] if "\n" in s else s
    out = [texts[i] for i in range(len(problems))]
    return out


def greedy_accuracy(model: GPT, task: FractionTask, problems: Sequence[Problem]) -> float:
    """Share of ``problems`` whose greedy completion is well formed and equivalent to the true answer."""
    if not problems:
        raise ValueError("problems must be non-empty")
    outs = _greedy(model, task, problems)
    hits = 0
    for p, o in zip(problems, outs):
        ans = format_ok(o)
        hits += bool(ans is not None and equivalent(ans, task.reference(p)))
    return hits / len(problems)


def rlvr_reward(kind: str = "match") -> Callable[..., list[float]]:
    """The RLVR reward: ``"match"`` (1 if the output's answer is equivalent to the annotation) or ``"format"``.

    Used as ``reward_fn(contexts, completions, meta=annotations, task=...)`` via :func:`rlvr_trainer`.
    """
    if kind not in ("match", "format"):
        raise ValueError(f"kind must be 'match' or 'format', got {kind!r}")

    def reward(contexts, completions, meta, task: FractionTask) -> list[float]:
        out = []
        for comp, label in zip(completions, meta):
            ans = format_ok(task.decode(comp))
            if kind == "format":
                out.append(float(ans is not None))
            else:
                out.append(float(ans is not None and bool(equivalent(ans, label))))
        return out

    return reward


def pgfc_reward(rho_fn: float, rho_fp: float) -> Callable[..., list[float]]:
    """Forward-corrected match reward ``(r~ - rho_fp) / (1 - rho_fp - rho_fn)`` given the noise rates.

    ``rho_fn = P(r~ = 0 | r = 1)`` (the label is wrong), ``rho_fp = P(r~ = 1 | r = 0)`` (a wrong output matches a
    wrong label): the unbiased estimate of the clean reward's expectation (Natarajan et al., 2013).
    """
    if not (0 <= rho_fn < 1 and 0 <= rho_fp < 1 and rho_fn + rho_fp < 1):
        raise ValueError(
            f"rates must satisfy 0 <= rho_fn, rho_fp and rho_fn + rho_fp < 1, got {rho_fn}, {rho_fp}"
        )
    base = rlvr_reward("match")

    def reward(contexts, completions, meta, task: FractionTask) -> list[float]:
        return [(r - rho_fp) / (1 - rho_fp - rho_fn) for r in base(contexts, completions, meta, task)]

    return reward


def rlvr_trainer(
    model: GPT,
    task: FractionTask,
    config: GRPOConfig | None = None,
    reward: Callable[..., list[float]] | None = None,
) -> GRPOTrainer:
    """A :class:`~neurips26.lm.grpo.GRPOTrainer` on ``model`` (trained in place) with an RLVR reward."""
    cfg = config or GRPOConfig(group_size=8, max_new_tokens=10, lr=5e-4)
    cfg = GRPOConfig(
        **{**cfg.__dict__, "eos_token_id": task.eos, "max_new_tokens": min(cfg.max_new_tokens, 10)}
    )
    fn = reward or rlvr_reward("match")
    return GRPOTrainer(model, lambda c, o, meta: fn(c, o, meta, task), cfg)


@dataclass
class LabelPools:
    """Per training problem: the correct label, a truly wrong label, and a secretly correct one (or None).

    ``wrong`` comes from the base model's own samples that are well formed and not equivalent to the answer
    (``wrong_from_model`` says which; the rest fall back to the add-the-denominators error). ``secret`` is a
    base-model answer that string match against the reference rejects but that is equivalent (contamination).
    """

    problems: list[Problem]
    clean: list[str]
    wrong: list[str]
    wrong_from_model: list[bool]
    secret: list[str | None]

    @classmethod
    @torch.no_grad()
    def build(cls, model: GPT, task: FractionTask, n_samples: int = 8, seed: int = 0) -> LabelPools:
        gen = torch.Generator().manual_seed(seed)
        probs = task.train_problems
        clean = [task.reference(p) for p in probs]
        wrong: list[str | None] = [None] * len(probs)
        secret: list[str | None] = [None] * len(probs)
        ctx = torch.tensor([task.encode_prompt(p) for p in probs], dtype=torch.long)  # equal lengths
        m = copy.deepcopy(model).eval()
        for _ in range(n_samples):
            outs = m.generate(ctx, 10, temperature=1.0, generator=gen)[:, ctx.shape[1] :].tolist()
            for i, o in enumerate(outs):
                s = task.decode(o)
                ans = format_ok(s[: s.index("\n") + 1] if "\n" in s else s)
                if ans is None or ans == clean[i]:
                    continue
                if equivalent(ans, clean[i]):
                    secret[i] = secret[i] or ans
                elif wrong[i] is None:
                    wrong[i] = ans
        from_model = [w is not None for w in wrong]
        for i, p in enumerate(probs):
            if wrong[i] is None:
                a, b, c, d = p
                q = Fraction(a + c, b + d)
                wrong[i] = str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"
        return cls(list(probs), clean, wrong, from_model, secret)  # type: ignore[arg-type]


def batch_indices(n: int, batch: int, rng: np.random.Generator) -> np.ndarray:
    """``batch`` distinct problem indices out of ``n`` (all of them when ``n <= batch``)."""
    return rng.choice(n, size=min(batch, n), replace=False)


def run_arm(
    base: GPT,
    task: FractionTask,
    problems: Sequence[Problem],
    labels: Sequence[str],
    config: GRPOConfig,
    steps: int,
    batch: int,
    seed: int,
    reward: Callable[..., list[float]] | None = None,
    eval_every: int = 0,
) -> tuple[float, list[dict], list[float]]:
    """Train a copy of ``base`` with RLVR on (problems, labels); returns final held-out greedy accuracy, stats
    history and the accuracy curve (every ``eval_every`` steps, 0: none)."""
    model = copy.deepcopy(base)
    cfg = GRPOConfig(**{**config.__dict__, "seed": seed})
    trainer = rlvr_trainer(model, task, cfg, reward)
    rng = np.random.default_rng(seed)
    curve = []
    pool = 3 * batch if cfg.dynamic_sampling else batch  # DAPO refills from a larger pool of prompts
    for s in range(steps):
        idx = batch_indices(len(problems), pool, rng)
        ctx = [task.encode_prompt(problems[i]) for i in idx]
        trainer.step(ctx, meta=[labels[i] for i in idx], n_groups=batch if cfg.dynamic_sampling else None)
        if eval_every and (s + 1) % eval_every == 0:
            curve.append(greedy_accuracy(model, task, task.eval_problems))
    acc = greedy_accuracy(model, task, task.eval_problems)
    return acc, trainer.history, curve


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    from scipy.stats import spearmanr

    r = spearmanr(x, y).statistic
    return float(r) if math.isfinite(r) else 0.0


@torch.no_grad()
def false_match_rate(
    model: GPT,
    task: FractionTask,
    problems: Sequence[Problem],
    labels: Sequence[str],
    n_samples: int = 4,
    seed: int = 0,
) -> float:
    """``P(r~ = 1 | r = 0)`` under ``model``'s sampling: the share of wrong outputs that match their label."""
    gen = torch.Generator().manual_seed(seed)
    ctx = torch.tensor([task.encode_prompt(p) for p in problems], dtype=torch.long)
    wrong = hit = 0
    for _ in range(n_samples):
        outs = model.generate(ctx, 10, temperature=1.0, generator=gen)[:, ctx.shape[1] :].tolist()
        for p, label, o in zip(problems, labels, outs):
            s = task.decode(o)
            ans = format_ok(s[: s.index("\n") + 1] if "\n" in s else s)
            if ans is not None and equivalent(ans, task.reference(p)):
                continue
            wrong += 1
            hit += bool(ans is not None and equivalent(ans, label))
    return hit / max(wrong, 1)
