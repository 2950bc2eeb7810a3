"""Grokking probe (digest, method step 8): modular addition with strong weight decay.

Model: ``(a, b) -> [E a ; E b] -> ReLU(W1 .) -> penultimate h -> logits over Z_p``, trained full batch with
AdamW (weight decay 1.0) on a random fraction of the ``p^2`` pairs. The paper's claim: the H1 total
persistence of the *training-example* penultimate features falls while test accuracy jumps.

Reconstructed [R]: the architecture (embedding 128, one hidden layer of 256), the optimiser settings
(AdamW, betas (0.9, 0.98), weight decay 1.0; the experiment uses lr 3e-3, with which
p = 47 groks within about 3000 full-batch steps on a CPU), the probe (200 training pairs, L2-normalised) and the
"falls over the window" test (H1 at the first checkpoint with test accuracy >= 0.9 below H1 at the last
checkpoint with test accuracy <= 0.2) follow the digest, not the paper's text.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.utils import check_random_state
from torch import nn

from .persistence import topological_summary


def modular_addition_data(p: int, train_fraction: float = 0.4, random_state=None):
    """All pairs ``(a, b)`` of ``Z_p`` with label ``(a + b) mod p``, split at random into train and test."""
    if not isinstance(p, numbers.Integral) or p < 2:
        raise ValueError(f"p must be an integer >= 2, got {p!r}")
    if not isinstance(train_fraction, numbers.Real) or not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction!r}")
    a, b = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    pairs = np.column_stack([a.ravel(), b.ravel()])
    labels = (pairs[:, 0] + pairs[:, 1]) % p
    perm = check_random_state(random_state).permutation(p * p)
    n_train = max(1, int(round(train_fraction * p * p)))
    tr, te = perm[:n_train], perm[n_train:]
    return pairs[tr], labels[tr], pairs[te], labels[te]


class ModularMLP(nn.Module):
    """Embedding MLP for ``(a + b) mod p``; :meth:`features` is the penultimate (hidden) layer."""

    def __init__(self, p: int, embed_dim: int = 128, hidden: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(p, embed_dim)
        self.hidden = nn.Sequential(nn.Linear(2 * embed_dim, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, p)

    def features(self, pairs: torch.Tensor) -> torch.Tensor:
        return self.hidden(self.embed(pairs).flatten(1))

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(pairs))


def grokking_trajectory(
    p: int = 47,
    train_fraction: float = 0.4,
    steps: int = 6000,
    eval_every: int = 100,
    weight_decay: float = 1.0,
    learning_rate: float = 1e-3,
    n_probe: int = 200,
    random_state=None,
) -> dict[str, np.ndarray]:
    """Train on modular addition and record, every ``eval_every`` steps, train/test accuracy and the H1/H0
    total persistence of the penultimate features of a fixed probe of training pairs."""
    for name, v in (("steps", steps), ("eval_every", eval_every), ("n_probe", n_probe)):
        if not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if not isinstance(weight_decay, numbers.Real) or weight_decay < 0:
        raise ValueError(f"weight_decay must be a non-negative float, got {weight_decay!r}")
    if not isinstance(learning_rate, numbers.Real) or learning_rate <= 0:
        raise ValueError(f"learning_rate must be a positive float, got {learning_rate!r}")
    rng = check_random_state(random_state)
    Xtr, ytr, Xte, yte = modular_addition_data(p, train_fraction, rng)
    if n_probe < 3 or n_probe > len(Xtr):
        raise ValueError(f"n_probe must be in [3, n_train = {len(Xtr)}], got {n_probe}")
    probe = np.sort(rng.choice(len(Xtr), n_probe, replace=False))
    Xtr_t, ytr_t = torch.as_tensor(Xtr), torch.as_tensor(ytr)
    Xte_t, yte_t = torch.as_tensor(Xte), torch.as_tensor(yte)
    rec: dict[str, list[float]] = {k: [] for k in ("step", "train_acc", "test_acc", "h1_total", "h0_total")}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(rng.randint(0, 2**31 - 1)))
        model = ModularMLP(p)
        opt = torch.optim.AdamW(
            model.parameters(), lr=float(learning_rate), weight_decay=float(weight_decay), betas=(0.9, 0.98)
        )
        for step in range(1, steps + 1):
            loss = nn.functional.cross_entropy(model(Xtr_t), ytr_t)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step % eval_every == 0 or step == 1:
                with torch.no_grad():
                    rec["step"].append(step)
                    rec["train_acc"].append(float((model(Xtr_t).argmax(1) == ytr_t).float().mean()))
                    rec["test_acc"].append(float((model(Xte_t).argmax(1) == yte_t).float().mean()))
                    feats = model.features(Xtr_t[probe]).numpy().astype(np.float64)
                    s = topological_summary(feats, maxdim=1, normalize="l2")
                    rec["h1_total"].append(s["h1_total"])
                    rec["h0_total"].append(s["h0_total"])
    return {k: np.asarray(v) for k, v in rec.items()}


def h1_falls_during_grokking(traj: dict[str, np.ndarray], low: float = 0.2, high: float = 0.9) -> bool | None:
    """Whether H1 at the first checkpoint with test accuracy >= ``high`` is below H1 at the last checkpoint
    before it with test accuracy <= ``low``; None when the run never crosses from ``low`` to ``high``."""
    acc, h1 = np.asarray(traj["test_acc"]), np.asarray(traj["h1_total"])
    hi = np.flatnonzero(acc >= high)
    if hi.size == 0:
        return None
    lo = np.flatnonzero(acc[: hi[0]] <= low)
    if lo.size == 0:
        return None
    return bool(h1[hi[0]] < h1[lo[-1]])
