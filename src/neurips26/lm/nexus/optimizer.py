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

Expanding to second order (the Reptile/Fish analysis, ``"step"`` / ``"none"``), ``g_k(theta~_{k-1}) = g_k -
(beta/nu) H_k sum_{j<k} g_j + O(beta^2)``; averaged over the shuffled orders each ordered pair comes first half the
time, so the expected pseudo-gradient is

    mean_k g_k  -  beta / (2 nu K) * grad sum_{j<k} <g_j, g_k>  +  O(beta^2)

(the factor 1/2 is the order average; a fixed order gives ``sum_{j<k} H_k g_j``, which is not a gradient): the
outer step descends the loss while ascending the sources' gradient inner products. ``inner_lr = 0`` is exactly the
base optimizer with K-step gradient accumulation. Extra memory: two copies of the parameters (the start point
``theta`` and the running sum of the inner loop's gradients, kept apart from ``.grad`` so that a closure may zero
the gradients). Weight decay and the learning-rate schedule belong to the base optimizer only.

Two ways to drive it, both torch conventions:

- ``step(closures)`` with a list of K micro-batch closures: one whole outer step (order shuffled when
  ``shuffle``); each closure evaluates its micro-batch's loss at the current parameters, calls ``backward()`` and
  returns the loss; it may or may not call ``zero_grad()`` (gradients are cleared before each closure).
- ``step()`` or ``step(closure)``, one micro-batch per call, as in any training loop (``zero_grad(); loss.backward();
  step()``): the call's gradient is the next inner step; every ``inner_steps``-th call makes the outer update. The
  micro-batches then come in the caller's order (no shuffle), and between outer updates the parameters sit on the
  inner trajectory ``theta~_k``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch.optim import Optimizer

__all__ = ["Nexus"]

NORMALIZE = ("step", "none", "micro_batch")
Closure = Callable[[], Any]


def _check_inner_lr(value: Any, name: str = "inner_lr") -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value >= 0 and math.isfinite(value))
    ):
        raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")
    return float(value)


class Nexus(Optimizer):
    """Nexus wrapper around a base optimizer (a ``torch.optim.Optimizer`` sharing its parameter groups).

    Parameters
    ----------
    params : parameters or parameter groups (as for any torch optimizer; groups may set their own ``inner_lr``).
    inner_lr : inner step ``beta`` (>= 0): a distance for ``normalize="step"`` / ``"micro_batch"``, a learning
        rate for ``"none"``. 0 reproduces the base optimizer with gradient accumulation.
    base : the outer optimizer class (``torch.optim.AdamW``); ``**base_kwargs`` go to it (lr, weight_decay, ...).
    normalize : ``"step"``, ``"none"`` or ``"micro_batch"`` (see the module docstring).
    shuffle : reshuffle the micro-batches' order at every ``step(closures)`` call (the digest's pitfall: a fixed
        order biases the implicit term).
    generator : torch generator of the shuffles (None: a private one seeded with ``torch.initial_seed()``); its
        state is part of :meth:`state_dict`, so a resumed run continues bit-exactly.
    inner_steps : K for the one-micro-batch-per-call form (``step()`` / ``step(closure)``); a list of closures sets
        K itself.

    ``step(closure=None)``: see the module docstring. Returns the closure's loss (single closure), the mean of the
    micro-batch losses (a list of closures) or None (no closure). Learning-rate schedulers act on the shared
    parameter groups as usual; ``state_dict()`` is torch's ``{"state", "param_groups"}`` (the base optimizer's)
    plus a ``"nexus"`` entry (shuffle generator, a pending inner loop).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        inner_lr: float = 0.05,
        base: type[Optimizer] = torch.optim.AdamW,
        normalize: str = "step",
        shuffle: bool = True,
        generator: torch.Generator | None = None,
        inner_steps: int = 4,
        **base_kwargs: Any,
    ) -> None:
        inner_lr = _check_inner_lr(inner_lr)
        if not (isinstance(base, type) and issubclass(base, Optimizer)):
            raise TypeError(f"base must be a torch.optim.Optimizer subclass, got {base!r}")
        if normalize not in NORMALIZE:
            raise ValueError(f"normalize must be one of {NORMALIZE}, got {normalize!r}")
        if not isinstance(shuffle, bool):
            raise TypeError(f"shuffle must be a bool, got {type(shuffle).__name__}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        if isinstance(inner_steps, bool) or not isinstance(inner_steps, int) or inner_steps < 1:
            raise ValueError(f"inner_steps must be an integer >= 1, got {inner_steps!r}")
        params = list(params)
        self.base = base(params, **base_kwargs)
        defaults = {**self.base.defaults, "inner_lr": inner_lr}
        super().__init__(params, defaults)
        # one set of groups and one state, shared with the base optimizer (schedulers see the base's lr)
        for group in self.base.param_groups:
            group["inner_lr"] = _check_inner_lr(group.setdefault("inner_lr", inner_lr))
        self.param_groups = self.base.param_groups
        self.state = self.base.state
        self.normalize = normalize
        self.shuffle = shuffle
        self.generator = (
            generator if generator is not None else torch.Generator().manual_seed(torch.initial_seed())
        )
        self.inner_steps = inner_steps
        self.last_losses: list[float] = []
        # the pending inner loop: micro-batches absorbed so far, start point, running sum, first/summed norms
        self._count = 0
        self._scale = 1.0
        self._norm_sum = 0.0
        self._theta: list[torch.Tensor] | None = None
        self._acc: list[torch.Tensor] | None = None

    def _params(self) -> list[tuple[torch.Tensor, float]]:
        return [(p, g["inner_lr"]) for g in self.param_groups for p in g["params"] if p.requires_grad]

    @staticmethod
    def _global_norm(grads: Sequence[torch.Tensor | None]) -> float:
        total = sum(float(g.detach().pow(2).sum()) for g in grads if g is not None)
        return math.sqrt(total)

    @torch.no_grad()
    def _absorb(self, K: int) -> None:
        """The current ``.grad`` is the gradient of the next micro-batch at the current point of the inner loop:
        add it to the running sum, then move to the next inner point or (after K) make the outer update."""
        params = self._params()
        if self._count == 0:  # theta~_0 = theta
            if self._theta is None or len(self._theta) != len(params):
                self._theta = [p.detach().clone() for p, _ in params]
                self._acc = [torch.zeros_like(p) for p, _ in params]
            else:
                for t, a, (p, _) in zip(self._theta, self._acc, params, strict=True):
                    t.copy_(p)
                    a.zero_()
            self._norm_sum = 0.0
            self._scale = 1.0
        theta, acc = self._theta, self._acc
        assert acc is not None
        grads = [p.grad for p, _ in params]
        weight = 1.0
        if self.normalize == "micro_batch":
            norm = max(self._global_norm(grads), 1e-12)
            self._norm_sum += norm
            weight = 1.0 / norm
        elif self.normalize == "step" and self._count == 0:
            self._scale = 1.0 / max(self._global_norm(grads), 1e-12)
        for a, g in zip(acc, grads, strict=True):
            if g is not None:
                a.add_(g, alpha=weight)
        self._count += 1
        if self._count < K:  # theta~_k = theta - beta/nu * (sum of the gradients so far)
            for t, a, (p, beta) in zip(theta, acc, params, strict=True):
                p.copy_(t).add_(a, alpha=-beta * self._scale)
            return
        # outer update from theta with the pseudo-gradient
        factor = (self._norm_sum / K) / K if self.normalize == "micro_batch" else 1.0 / K
        for t, a, (p, _) in zip(theta, acc, params, strict=True):
            p.copy_(t)
            p.grad = a * factor  # a fresh tensor: never aliases the running sum
        self._count = 0
        self.base.step()

    def _clear_grads(self) -> None:
        for p, _ in self._params():
            p.grad = None

    @staticmethod
    def _loss_value(loss: Any) -> float:
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            return float(loss.detach())
        if isinstance(loss, (int, float)) and not isinstance(loss, bool):
            return float(loss)
        raise TypeError("a closure must return its loss (a scalar tensor, after calling backward on it)")

    def step(self, closure: Closure | Sequence[Closure] | None = None) -> Any:  # type: ignore[override]
        """One micro-batch (no closure / one closure) or one whole outer step (a list of closures)."""
        if closure is None:
            self._absorb(self.inner_steps)
            return None
        if callable(closure):
            self._clear_grads()
            with torch.enable_grad():
                loss = closure()
            self.last_losses = [self._loss_value(loss)]
            self._absorb(self.inner_steps)
            return loss
        if isinstance(closure, (str, bytes)) or not isinstance(closure, Iterable):
            raise TypeError("closure must be a callable, a sequence of callables, or None")
        closures = list(closure)
        if not closures:
            raise ValueError("closure must hold at least one micro-batch closure (K >= 1)")
        if not all(callable(c) for c in closures):
            raise TypeError("every closure must be callable")
        if self._count:
            raise ValueError(
                f"closure: a list of closures is a whole outer step, but {self._count} micro-batch(es) of an "
                "outer step are pending from step() calls"
            )
        K = len(closures)
        order = torch.randperm(K, generator=self.generator).tolist() if self.shuffle else list(range(K))
        losses = []
        for idx in order:
            self._clear_grads()
            with torch.enable_grad():
                losses.append(self._loss_value(closures[idx]()))
            self._absorb(K)
        self.last_losses = losses
        return sum(losses) / K

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.base.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        """torch's format (the base optimizer's ``{"state", "param_groups"}``, groups with ``inner_lr``) plus
        ``"nexus"``: settings, the shuffle generator's state and any pending inner loop."""
        sd = self.base.state_dict()
        nexus: dict[str, Any] = {
            "normalize": self.normalize,
            "shuffle": self.shuffle,
            "inner_steps": self.inner_steps,
            "generator": self.generator.get_state(),
            "count": self._count,
            "scale": self._scale,
            "norm_sum": self._norm_sum,
        }
        if self._count:
            assert self._theta is not None and self._acc is not None
            nexus["theta"] = [t.clone() for t in self._theta]
            nexus["acc"] = [a.clone() for a in self._acc]
        sd["nexus"] = nexus
        return sd

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load :meth:`state_dict` output (or a plain state dict of the base optimizer class)."""
        if (
            not isinstance(state_dict, Mapping)
            or "state" not in state_dict
            or "param_groups" not in state_dict
        ):
            raise ValueError(
                "state_dict must be a torch optimizer state dict (keys 'state' and 'param_groups')"
            )
        nexus = state_dict.get("nexus")
        if nexus is not None:
            if not isinstance(nexus, Mapping) or nexus.get("normalize") not in NORMALIZE:
                raise ValueError("state_dict['nexus'] must come from Nexus.state_dict()")
            count = int(nexus.get("count", 0))
            n = len(self._params())
            if count and (len(nexus.get("theta", ())) != n or len(nexus.get("acc", ())) != n):
                raise ValueError(
                    f"state_dict['nexus'] holds a pending inner loop for other parameters (not {n})"
                )
        self.base.load_state_dict({"state": state_dict["state"], "param_groups": state_dict["param_groups"]})
        self.param_groups = self.base.param_groups
        self.state = self.base.state
        for group in self.param_groups:
            group["inner_lr"] = _check_inner_lr(group.setdefault("inner_lr", self.defaults["inner_lr"]))
        self._count, self._scale, self._norm_sum = 0, 1.0, 0.0
        if nexus is None:
            return
        self.normalize = nexus["normalize"]
        self.shuffle = bool(nexus.get("shuffle", self.shuffle))
        self.inner_steps = int(nexus.get("inner_steps", self.inner_steps))
        if "generator" in nexus:
            self.generator.set_state(nexus["generator"].clone())
        if count:
            params = self._params()
            self._theta = [t.detach().clone().to(p) for t, (p, _) in zip(nexus["theta"], params, strict=True)]
            self._acc = [a.detach().clone().to(p) for a, (p, _) in zip(nexus["acc"], params, strict=True)]
            self._count, self._scale, self._norm_sum = count, float(nexus["scale"]), float(nexus["norm_sum"])

    def __repr__(self) -> str:
        return (
            f"Nexus(base={type(self.base).__name__}, normalize={self.normalize!r}, "
            f"inner_steps={self.inner_steps}, groups={len(self.param_groups)})"
        )
