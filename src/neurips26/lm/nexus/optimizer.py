"""The Nexus optimizer: an inner loop over the sources' micro-batches that favours common minima, wrapped around
any base optimizer (AdamW by default).

Chen et al., "Nexus: Same Pretraining Loss, Better Downstream Generalization via Common Minima", arXiv 2604.09258.
The paper's exact update is not public; this is the reconstruction of the digest (lineage: CWA, Reptile, Fish).
Per outer step, with K micro-batches B_1..B_K drawn from different sources in a freshly shuffled order:

    theta~_0 = theta
    for k = 1..K:   g_k = grad L(theta~_{k-1}; B_k);   theta~_k = theta~_{k-1} - beta * g_k / nu
    pseudo_grad = (1/K) sum_k g_k          ( = nu (theta - theta~_K) / (beta K) )
    theta <- base.step(theta, grad = pseudo_grad)

``normalize`` sets the inner step's scale ``nu``:

- ``"step"`` (default): ``nu = ||g_1||``, the global norm of the first micro-batch's gradient of this step, so every
  inner step has length about ``beta`` (CWA's normalised steps) while all K steps share one scale;
- ``"none"``: ``nu = 1`` (Fish / Reptile: plain SGD inner steps, ``beta`` is a learning rate);
- ``"micro_batch"``: each step divided by its own norm, ``theta~_k = theta~_{k-1} - beta g_k / ||g_k||`` (CWA
  literally); the pseudo-gradient is then the mean unit direction times the mean norm.

Expanding to second order (the Reptile/Fish analysis), the pseudo-gradient is the average gradient minus
``beta / (nu K)`` times the gradient of ``sum_{j<k} <g_j, g_k>``: the outer step descends the loss while ascending
the sources' gradient inner products. With ``"step"`` and ``"none"`` the pseudo-gradient is the exact mean of the
gradients along the inner trajectory (accumulated in ``.grad``), so ``inner_lr = 0`` is exactly the base optimizer
with K-step gradient accumulation, and the only extra memory is one copy of the parameters (``"micro_batch"``
keeps a second buffer). Weight decay and the learning-rate schedule belong to the base optimizer only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch.optim import Optimizer

__all__ = ["Nexus"]

NORMALIZE = ("step", "none", "micro_batch")
Closure = Callable[[], torch.Tensor]


class Nexus(Optimizer):
    """Nexus wrapper around a base optimizer.

    Parameters
    ----------
    params : parameters or parameter groups (as for any torch optimizer; groups may set their own ``inner_lr``).
    inner_lr : inner step ``beta`` (>= 0): a distance for ``normalize="step"`` / ``"micro_batch"``, a learning
        rate for ``"none"``. 0 reproduces the base optimizer with gradient accumulation.
    base : the outer optimizer class (``torch.optim.AdamW``); ``**base_kwargs`` go to it (lr, weight_decay, ...).
    normalize : ``"step"``, ``"none"`` or ``"micro_batch"`` (see the module docstring).
    shuffle : reshuffle the micro-batches' order every step (the digest's pitfall: a fixed order biases the
        implicit term).
    generator : torch generator for the shuffles (None: torch's global generator).

    ``step(closures)``: each closure evaluates the loss of one micro-batch at the current parameters, calls
    ``backward()`` on it and returns it, without zeroing gradients (the optimizer manages ``.grad``). Returns the
    mean of the micro-batch losses. Learning-rate schedulers act on the shared parameter groups as usual.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        inner_lr: float = 0.05,
        base: type[Optimizer] = torch.optim.AdamW,
        normalize: str = "step",
        shuffle: bool = True,
        generator: torch.Generator | None = None,
        **base_kwargs: Any,
    ) -> None:
        if (
            isinstance(inner_lr, bool)
            or not isinstance(inner_lr, (int, float))
            or not (inner_lr >= 0 and math.isfinite(inner_lr))
        ):
            raise ValueError(f"inner_lr must be a non-negative number, got {inner_lr!r}")
        if not (isinstance(base, type) and issubclass(base, Optimizer)):
            raise TypeError(f"base must be a torch.optim.Optimizer subclass, got {base!r}")
        if normalize not in NORMALIZE:
            raise ValueError(f"normalize must be one of {NORMALIZE}, got {normalize!r}")
        params = list(params)
        self.base = base(params, **base_kwargs)
        defaults = {**self.base.defaults, "inner_lr": float(inner_lr)}
        super().__init__(params, defaults)
        # one set of groups and one state, shared with the base optimizer (schedulers see the base's lr)
        for group in self.base.param_groups:
            group.setdefault("inner_lr", float(inner_lr))
            if group["inner_lr"] < 0:
                raise ValueError(f"inner_lr must be non-negative, got {group['inner_lr']!r}")
        self.param_groups = self.base.param_groups
        self.state = self.base.state
        self.normalize = normalize
        self.shuffle = bool(shuffle)
        self.generator = generator
        self._theta: list[torch.Tensor] | None = None
        self.last_losses: list[float] = []

    def _params(self) -> list[tuple[torch.Tensor, float]]:
        return [(p, g["inner_lr"]) for g in self.param_groups for p in g["params"] if p.requires_grad]

    @staticmethod
    def _global_norm(grads: Sequence[torch.Tensor | None]) -> float:
        total = sum(float(g.detach().pow(2).sum()) for g in grads if g is not None)
        return math.sqrt(total)

    @torch.no_grad()
    def step(self, closures: Closure | Sequence[Closure] | None = None) -> float:  # type: ignore[override]
        """One outer step over the K micro-batch ``closures`` (see the class docstring)."""
        if closures is None:
            raise ValueError("closures must hold at least one micro-batch closure (K >= 1)")
        closures = [closures] if callable(closures) else list(closures)
        if not closures:
            raise ValueError("closures must hold at least one micro-batch closure (K >= 1)")
        if not all(callable(c) for c in closures):
            raise TypeError("every closure must be callable")
        K = len(closures)
        params = self._params()
        if self._theta is None or len(self._theta) != len(params):
            self._theta = [p.detach().clone() for p, _ in params]
        else:
            for buf, (p, _) in zip(self._theta, params, strict=True):
                buf.copy_(p)
        theta = self._theta
        order = torch.randperm(K, generator=self.generator).tolist() if self.shuffle else list(range(K))
        for p, _ in params:
            p.grad = None
        directions = [torch.zeros_like(p) for p, _ in params] if self.normalize == "micro_batch" else None
        norms: list[float] = []
        scale = 1.0
        losses = []
        for i, idx in enumerate(order):
            if directions is not None:
                for p, _ in params:
                    p.grad = None
            with torch.enable_grad():
                loss = closures[idx]()
            if not isinstance(loss, torch.Tensor):
                raise TypeError("a closure must return its loss as a tensor (after calling backward on it)")
            losses.append(float(loss.detach()))
            if directions is not None:
                norm = max(self._global_norm([p.grad for p, _ in params]), 1e-12)
                norms.append(norm)
                for d, (p, _) in zip(directions, params, strict=True):
                    if p.grad is not None:
                        d.add_(p.grad, alpha=1.0 / norm)
            elif self.normalize == "step" and i == 0:
                scale = 1.0 / max(self._global_norm([p.grad for p, _ in params]), 1e-12)
            if i == K - 1:
                break
            # move to theta~_{i+1}
            if directions is not None:  # theta - beta * sum of unit directions so far
                for t, d, (p, beta) in zip(theta, directions, params, strict=True):
                    p.copy_(t).add_(d, alpha=-beta)
            else:  # .grad holds the running sum of the trajectory's gradients: theta - beta/nu * sum
                for t, (p, beta) in zip(theta, params, strict=True):
                    if p.grad is not None:
                        p.copy_(t).add_(p.grad, alpha=-beta * scale)
        for t, (p, _) in zip(theta, params, strict=True):
            p.copy_(t)
        if directions is not None:
            mean_norm = sum(norms) / K
            for d, (p, _) in zip(directions, params, strict=True):
                p.grad = d.mul_(mean_norm / K)
        else:
            for p, _ in params:
                if p.grad is not None:
                    p.grad.div_(K)
        self.base.step()
        self.last_losses = losses
        return sum(losses) / K

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.base.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.state_dict(),
            "nexus": {"normalize": self.normalize, "shuffle": self.shuffle},
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not isinstance(state_dict, dict) or "base" not in state_dict or "nexus" not in state_dict:
            raise ValueError("state_dict must come from Nexus.state_dict() (keys 'base' and 'nexus')")
        self.base.load_state_dict(state_dict["base"])
        self.param_groups = self.base.param_groups
        self.state = self.base.state
        self.normalize = state_dict["nexus"]["normalize"]
        self.shuffle = state_dict["nexus"]["shuffle"]

    def __repr__(self) -> str:
        return f"Nexus(base={type(self.base).__name__}, normalize={self.normalize!r}, K from step(closures))"
