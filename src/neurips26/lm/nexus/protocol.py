"""Nexus's comparison protocol: train AdamW and Nexus on the same micro-batches, compare at equal training loss.

- :func:`train_with` runs one optimizer for ``steps`` outer steps, K micro-batches per step (one per source, each
  step's batches drawn from one seeded stream, so both optimizers see identical data), and keeps snapshots of
  the parameters and the training loss every ``every`` steps.
- :func:`match_training_loss` picks, for two runs, the snapshots where their training losses agree (the higher
  final loss is the target; the other run stops at its first snapshot at or below it).
- :func:`gradient_cosine` (mean pairwise cosine of per-source gradients on fresh batches) and
  :func:`closeness` (distance travelled and loss drop when fine-tuning on each single source) probe the end point.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from ..training import cosine_schedule
from .optimizer import Nexus

__all__ = ["Snapshot", "TrainTrace", "closeness", "gradient_cosine", "match_training_loss", "train_with"]

Batch = tuple[torch.Tensor, torch.Tensor]
LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class Snapshot:
    step: int
    train_loss: float
    state: dict[str, torch.Tensor]


@dataclass
class TrainTrace:
    snapshots: list[Snapshot] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def final(self) -> Snapshot:
        return self.snapshots[-1]


@torch.no_grad()
def _mean_loss(model: nn.Module, loss_fn: LossFn, batches: Sequence[Batch]) -> float:
    return float(sum(float(loss_fn(model, x, y)) for x, y in batches) / len(batches))


def train_with(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: Callable[[int], Sequence[Batch]],
    loss_fn: LossFn,
    steps: int,
    train_eval: Sequence[Batch],
    every: int = 25,
    lr_schedule: bool = True,
    min_lr_ratio: float = 0.1,
    warmup: int = 0,
) -> TrainTrace:
    """Outer steps on ``micro_batches(step)`` (K batches); a :class:`Nexus` gets them as closures, any other
    optimizer accumulates their mean gradient (K-step gradient accumulation, the paper's reference)."""
    trace = TrainTrace()
    base_lrs = [g["lr"] for g in optimizer.param_groups]
    t0 = time.perf_counter()
    trace.snapshots.append(
        Snapshot(0, _mean_loss(model, loss_fn, train_eval), copy.deepcopy(model.state_dict()))
    )
    for step in range(steps):
        if lr_schedule:
            scale = cosine_schedule(step, steps, warmup, min_lr_ratio)
            for g, lr in zip(optimizer.param_groups, base_lrs, strict=True):
                g["lr"] = lr * scale
        batches = micro_batches(step)

        def closure_for(x: torch.Tensor, y: torch.Tensor) -> Callable[[], torch.Tensor]:
            def closure() -> torch.Tensor:
                loss = loss_fn(model, x, y)
                loss.backward()
                return loss

            return closure

        if isinstance(optimizer, Nexus):
            optimizer.step([closure_for(x, y) for x, y in batches])
        else:
            optimizer.zero_grad(set_to_none=True)
            for x, y in batches:
                loss_fn(model, x, y).backward()
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.div_(len(batches))
            optimizer.step()
        if (step + 1) % every == 0 or step == steps - 1:
            trace.snapshots.append(
                Snapshot(step + 1, _mean_loss(model, loss_fn, train_eval), copy.deepcopy(model.state_dict()))
            )
    trace.seconds = time.perf_counter() - t0
    return trace


def match_training_loss(a: TrainTrace, b: TrainTrace) -> tuple[Snapshot, Snapshot]:
    """Snapshots of ``a`` and ``b`` at (nearly) the same training loss: the run with the higher final loss keeps
    its end point; the other stops where its loss first reaches that target (the snapshot at or just before the
    crossing, whichever is closer to the target)."""
    target = max(a.final.train_loss, b.final.train_loss)

    def crossing(trace: TrainTrace) -> Snapshot:
        for i, s in enumerate(trace.snapshots):
            if s.train_loss <= target:
                before = trace.snapshots[i - 1] if i else s
                return before if abs(before.train_loss - target) < abs(s.train_loss - target) else s
        return trace.final

    return crossing(a), crossing(b)


def _flat_grad(model: nn.Module) -> torch.Tensor:
    return torch.cat(
        [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel()) for p in model.parameters()]
    )


def gradient_cosine(model: nn.Module, loss_fn: LossFn, per_source: Sequence[Batch]) -> float:
    """Mean pairwise cosine similarity of the per-source gradients (one fresh batch per source)."""
    grads = []
    for x, y in per_source:
        model.zero_grad(set_to_none=True)
        loss_fn(model, x, y).backward()
        grads.append(_flat_grad(model).clone())
    model.zero_grad(set_to_none=True)
    G = torch.stack(grads)
    G = G / G.norm(dim=1, keepdim=True).clamp_min(1e-12)
    C = G @ G.T
    n = len(grads)
    return float((C.sum() - C.diagonal().sum()) / (n * (n - 1)))


def closeness(
    model: nn.Module,
    loss_fn: LossFn,
    source_batches: Callable[[int, int], Batch],
    n_sources: int,
    steps: int = 100,
    lr: float = 1e-3,
    eval_batches: Sequence[Batch] | None = None,
) -> dict[str, float]:
    """Fine-tune a copy on each single source for ``steps`` Adam steps; mean L2 distance travelled and mean loss
    drop on that source (``eval_batches[s]``, default the fine-tuning batches' last)."""
    start = [p.detach().clone() for p in model.parameters()]
    dists, drops = [], []
    for s in range(n_sources):
        m = copy.deepcopy(model)
        opt = torch.optim.Adam(m.parameters(), lr=lr)
        ev = eval_batches[s] if eval_batches is not None else source_batches(s, 0)
        with torch.no_grad():
            before = float(loss_fn(m, *ev))
        for t in range(steps):
            x, y = source_batches(s, t)
            opt.zero_grad(set_to_none=True)
            loss_fn(m, x, y).backward()
            opt.step()
        with torch.no_grad():
            after = float(loss_fn(m, *ev))
            dist = math.sqrt(
                sum(float((p - q).pow(2).sum()) for p, q in zip(m.parameters(), start, strict=True))
            )
        dists.append(dist)
        drops.append(before - after)
    return {"distance": sum(dists) / n_sources, "loss_drop": sum(drops) / n_sources}
