"""Semantics-retention proxy (Part B): a tiny decoder-only LM pre-trained on scene question answering and number
text, then fine-tuned on demonstrations written as narrative waypoints in words the LM already has, as the same
narrative in new action tokens, or as dense per-step binned actions (a new action vocabulary, RT-2 / OpenVLA
style).

A *proxy*: the "image" is a line of text naming each anchor object with its pixel (quarter pixels) and depth
(mm) in the head camera, and "semantic competence" is grounding QA about those objects ("where is the cube ?" ->
its pixel and depth). It does not test a real vision-language model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from neurips26.lm.transformer import GPT, GPTConfig

from .narrative import GroundedNarrativeCodec
from .scene import PickPlaceScene

__all__ = ["scene_words", "qa_example", "counting_example", "ProxyLM"]

OBJECTS = ("home", "cube", "bin", "obstacle")


def scene_words(scene: PickPlaceScene) -> list[str]:
    """The text "image": ``name U V D`` per anchor, U/V in quarter pixels, D the depth in mm (camera frame).

    The units are those of :class:`~.narrative.GroundedNarrativeCodec`, so a narrative can copy them.
    """
    out: list[str] = []
    for name, q in GroundedNarrativeCodec(scene.camera).observe(scene.anchors()).items():
        out += [name, *map(str, q)]
    return out


def qa_example(scene: PickPlaceScene, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """A grounding question "where is the <object> ?" about ``scene`` and its answer ``U V D``.

    Answering needs the model to bind an object name to the numbers written after it in the scene line (a
    retrieval skill a 2-layer transformer learns in a few hundred steps; yes/no comparisons of atomic number
    words stayed at chance in that budget).
    """
    words = scene_words(scene)
    obj = OBJECTS[int(rng.integers(len(OBJECTS)))]
    i = words.index(obj)
    return ["where", "is", "the", obj, "?"], words[i + 1 : i + 4]


def counting_example(
    rng: np.random.Generator, low: int, high: int, length: int = 6
) -> tuple[list[str], list[str]]:
    """Number text for pre-training: ``count n :`` -> ``n+1 ... n+length`` with n uniform in [low, high - length].

    It gives every number word in [low, high] trained embeddings before fine-tuning (a real LM has read its
    numbers), so a narrative written with them uses vocabulary the LM already knows.
    """
    if not (isinstance(length, int) and length >= 1):
        raise ValueError(f"length must be a positive integer, got {length!r}")
    if not (isinstance(low, int) and isinstance(high, int) and high - low >= length):
        raise ValueError(f"low and high must be integers with high - low >= length, got {low!r}, {high!r}")
    n = int(rng.integers(low, high - length + 1))
    return ["count", str(n), ":"], [str(n + k) for k in range(1, length + 1)]


@dataclass
class ProxyLM:
    """A small GPT over a closed word vocabulary, with helpers to train on and generate word sequences."""

    words: list[str]
    context: int = 256
    n_layer: int = 2
    d_model: int = 96
    n_head: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        if len(set(self.words)) != len(self.words) or not self.words:
            raise ValueError("words must be a non-empty list without repeats")
        self.index = {w: i for i, w in enumerate(self.words)}
        torch.manual_seed(self.seed)
        cfg = GPTConfig(
            len(self.words),
            context=self.context,
            n_layer=self.n_layer,
            n_head=self.n_head,
            d_model=self.d_model,
        )
        self.model = GPT(cfg)
        self.pad = self.index["<pad>"]

    def add_words(self, new: list[str]) -> None:
        """Grow the vocabulary (new embedding rows, randomly initialised as the model's own init)."""
        fresh = [w for w in new if w not in self.index]
        if not fresh:
            return
        old = self.model
        cfg = GPTConfig.from_dict({**old.config.to_dict(), "vocab_size": len(self.words) + len(fresh)})
        torch.manual_seed(self.seed + 1)
        model = GPT(cfg)
        state = old.state_dict()
        for name, tensor in model.state_dict().items():
            src = state[name]
            if src.shape == tensor.shape:
                tensor.copy_(src)
            else:  # the token embedding (and the tied head): keep the old rows
                tensor[: src.shape[0]].copy_(src)
        self.model = model
        for w in fresh:
            self.index[w] = len(self.words)
            self.words.append(w)

    def ids(self, seq: list[str]) -> list[int]:
        return [self.index[w] for w in seq]

    def batch(self, seqs: list[tuple[list[str], list[str]]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets for (prompt, answer) pairs; the loss covers the answer tokens only."""
        length = max(len(p) + len(a) for p, a in seqs)
        x = torch.full((len(seqs), length - 1), self.pad, dtype=torch.long)
        y = torch.full((len(seqs), length - 1), -100, dtype=torch.long)
        for r, (p, a) in enumerate(seqs):
            ids = self.ids(p + a)
            x[r, : len(ids) - 1] = torch.tensor(ids[:-1])
            y[r, len(p) - 1 : len(ids) - 1] = torch.tensor(ids[len(p) :])
        return x, y

    def train(self, sample, steps: int, lr: float = 3e-3, batch_size: int = 16) -> list[float]:
        """``steps`` AdamW steps on batches from ``sample(batch_size) -> list[(prompt, answer)]``."""
        opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.01)
        losses = []
        self.model.train()
        for step in range(steps):
            for group in opt.param_groups:  # warm-up then cosine
                group["lr"] = lr * min(1.0, (step + 1) / 20) * (0.55 + 0.45 * np.cos(np.pi * step / steps))
            x, y = self.batch(sample(batch_size))
            sel = y != -100  # the head runs on the supervised positions only
            h = self.model.hidden_states(x)[sel]
            loss = F.cross_entropy(self.model.head(h), y[sel])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
        return losses

    @torch.no_grad()
    def token_accuracy(self, pairs: list[tuple[list[str], list[str]]], batch_size: int = 64) -> float:
        """Teacher-forced accuracy: the fraction of answer tokens that are the argmax given the true prefix."""
        if not pairs:
            raise ValueError("pairs must not be empty")
        self.model.eval()
        hit = total = 0
        for i in range(0, len(pairs), batch_size):
            x, y = self.batch(pairs[i : i + batch_size])
            sel = y != -100
            pred = self.model.head(self.model.hidden_states(x)[sel]).argmax(dim=1)
            hit += int((pred == y[sel]).sum())
            total += int(sel.sum())
        return hit / total

    @torch.no_grad()
    def generate(
        self, prompts: list[list[str]], max_new: int, stop: str, allowed: list[str] | None = None
    ) -> list[list[str]]:
        """Greedy continuation of each prompt until ``stop`` (excluded) or ``max_new`` tokens."""
        self.model.eval()
        mask = None
        if allowed is not None:
            mask = torch.full((len(self.words),), float("-inf"))
            mask[self.ids(allowed)] = 0.0
        out = [[] for _ in prompts]
        done = [False] * len(prompts)
        lengths = [len(p) for p in prompts]
        width = max(lengths) + max_new
        x = torch.full((len(prompts), width), self.pad, dtype=torch.long)
        for r, p in enumerate(prompts):
            x[r, : len(p)] = torch.tensor(self.ids(p))
        stop_id = self.index[stop]
        for _ in range(max_new):
            cur = max(lengths)
            h = self.model.hidden_states(x[:, :cur])
            last = self.model.head(h[torch.arange(len(prompts)), torch.tensor(lengths) - 1])
            if mask is not None:
                last = last + mask
            nxt = last.argmax(dim=1)
            for r in range(len(prompts)):
                if done[r]:
                    continue
                t = int(nxt[r])
                if t == stop_id:
                    done[r] = True
                    continue
                out[r].append(self.words[t])
                x[r, lengths[r]] = t
                lengths[r] += 1
            if all(done):
                break
        return out
