"""Continued-fraction feed-forward blocks for the stack's FFN slot: CoFrGeNet's Cffn and the gated follow-up.

Both map (..., p) -> (..., p) (any leading dimensions) with every hidden width equal to the model width p (non-expanding). A *ladder*
``j`` holds weights ``W_j`` of shape (p, d): feature ``i`` of its input ``u`` gives the depth-d partial
denominators ``a = u_i * W_j[i, :]``, i.e. p independent continued fractions per ladder. The L ladders are stacked
in one (L, p, d) tensor, so the depth recursion is the only Python loop.

- :class:`Cffn` (the predecessor, CoFrGeNet arXiv 2601.21766 as publicly re-implemented):
  ``u = sigmoid(G x) * x``, ``y = U x + sum_j v_j * f(u * W_j)``; 2p^2 + Lpd + Lp parameters; direct division
  with the pole guard and Proposition 1 as the backward; trained with :class:`DyadicSchedule`.
- :class:`GatedCFFN` (the follow-up, RECONSTRUCTED from its abstract; wiring options are constructor arguments):
  ``y = W_o(g * c)`` with ``g = act(W_g x)`` and ``c = sum_j v_j * f(. * W_j)``, the gate applied to the ladder
  output (default), its input, or both; an optional linear skip ``U x``; division in log space by default; no depth
  schedule. Same parameter budget as Cffn (2p^2 + Lpd + Lp without the skip).

Both are registered in the stack: ``GPTConfig(ffn="cffn" | "gated_cf", ffn_kwargs={...})``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..transformer import GPTConfig, register_ffn
from .continued_fraction import MODES, continued_fraction

__all__ = ["Cffn", "DyadicSchedule", "GatedCFFN"]

GATES = ("output", "input", "both")
ACTIVATIONS = ("silu", "sigmoid")


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _positive(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value > 0 and math.isfinite(value))
    ):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number or None, got {value!r}")
    return float(value)


def _check_input(x: Any, dim: int) -> None:
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
        raise TypeError(f"x must be a floating-point tensor, got {type(x).__name__}{getattr(x, 'dtype', '')}")
    if x.ndim < 1 or x.shape[-1] != dim:
        raise ValueError(f"x's last axis must be dim={dim}, got shape {tuple(x.shape)}")


class _Ladders(nn.Module):
    """L ladders of p-variate depth-d continued fractions: ``z[..., j, i] = f(u_i * W[:, j, i])``, combined as
    ``sum_j v[j] * z[..., j, :]``. ``weight`` is stored depth first, (d, L, p), so each level is contiguous."""

    def __init__(
        self,
        dim: int,
        num_ladders: int,
        depth: int,
        init_std: float,
        mode: str,
        grad: str,
        eps: float,
        tail_offset: float | None = None,
    ) -> None:
        super().__init__()
        self.depth, self.mode, self.grad, self.eps = depth, mode, grad, eps
        self.weight = nn.Parameter(torch.randn(depth, num_ladders, dim) * init_std)
        self.combine = nn.Parameter(torch.randn(num_ladders, dim) * 0.02)
        # optional learnable offset of the last partial denominator, a_d = u W_d + b: without it every odd-depth
        # fraction has its pole at u = 0 (K_d is an odd polynomial of u), whatever the weights
        self.tail = (
            nn.Parameter(torch.full((num_ladders, dim), float(tail_offset)))
            if tail_offset is not None
            else None
        )
        # depth columns 1..trainable_depth get gradients (the dyadic schedule lowers it; default: all)
        self.register_buffer("trainable_depth", torch.tensor(depth), persistent=False)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        w = self.weight
        active = int(self.trainable_depth)
        if active < self.depth:  # frozen columns take part in the forward pass but receive no gradient
            w = torch.cat([w[:active], w[active:].detach()], dim=0)
        d, L, p = w.shape
        # (d, *lead, L, p): any leading dimensions of u (none, (N,), (B, T), ...)
        a = w.view(d, *([1] * (u.ndim - 1)), L, p) * u.unsqueeze(0).unsqueeze(-2)
        if self.tail is not None:
            a[-1] += self.tail
        z = continued_fraction(a, mode=self.mode, eps=self.eps, grad=self.grad, dim=0)  # (*lead, L, p)
        return (z * self.combine).sum(dim=-2)


class Cffn(nn.Module):
    """CoFrGeNet's continued-fraction FFN: ``y = U x + sum_j v_j * f(sigmoid(G x) * x * W_j)``.

    Parameters
    ----------
    dim : model width p. num_ladders : L. depth : d (>= 1).
    eps : pole guard on the continuant K_d. init_std : std of the ladder weights at initialisation.
    grad : ``"identity"`` (Proposition 1 backward, the predecessor's) or ``"autograd"``.
    tail_offset : None (the predecessor's ``a_k = u W_k``) or the initial value of a learnable offset ``b`` of the
        last partial denominator, ``a_d = u W_d + b`` (L p more parameters). Without it an odd-depth fraction has
        its pole at ``u = 0`` for any weights, so at a small init most fractions sit on the guard.
    """

    def __init__(
        self,
        dim: int,
        num_ladders: int = 3,
        depth: int = 5,
        eps: float = 0.01,
        init_std: float = 0.02,
        grad: str = "identity",
        tail_offset: float | None = None,
    ) -> None:
        super().__init__()
        _positive_int("dim", dim)
        _positive_int("num_ladders", num_ladders)
        _positive_int("depth", depth)
        _positive("eps", eps)
        _positive("init_std", init_std)
        if grad not in ("identity", "autograd"):
            raise ValueError(f"grad must be 'identity' or 'autograd', got {grad!r}")
        self.dim, self.num_ladders, self.depth = dim, num_ladders, depth
        self.gate = nn.Linear(dim, dim, bias=False)
        self.linear = nn.Linear(dim, dim, bias=False)
        if tail_offset is not None:
            _finite("tail_offset", tail_offset)
        self.ladders = _Ladders(dim, num_ladders, depth, init_std, "direct", grad, eps, tail_offset)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.dim)
        return self.linear(x) + self.ladders(torch.sigmoid(self.gate(x)) * x)


class GatedCFFN(nn.Module):
    """Gated, non-expanding continued-fraction FFN (the follow-up; wiring reconstructed, see the module doc).

    Parameters
    ----------
    dim : model width p. num_ladders : L. depth : d (>= 1).
    gate : where ``g = act(W_g x)`` multiplies: the ladder ``"output"`` (GLU-style, default), its ``"input"``, or
        ``"both"``. activation : ``"silu"`` or ``"sigmoid"``.
    skip : add a linear path ``U x`` (one more p x p matrix).
    division : ``"log"`` (default), ``"log_ratio"`` or ``"direct"``.
    grad : ``"identity"`` (Proposition 1 as the backward, from the log-magnitudes for ``"log"``; default) or
        ``"autograd"`` (differentiate the forward computation; the only choice for ``"log_ratio"``).
    eps : pole guard. init_std : std of the ladder weights at initialisation. tail_offset : as for :class:`Cffn`.
    """

    def __init__(
        self,
        dim: int,
        num_ladders: int = 3,
        depth: int = 5,
        gate: str = "output",
        activation: str = "silu",
        skip: bool = False,
        division: str = "log",
        grad: str = "identity",
        eps: float = 0.01,
        init_std: float = 0.02,
        tail_offset: float | None = None,
    ) -> None:
        super().__init__()
        _positive_int("dim", dim)
        _positive_int("num_ladders", num_ladders)
        _positive_int("depth", depth)
        _positive("eps", eps)
        _positive("init_std", init_std)
        if gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        if division not in MODES:
            raise ValueError(f"division must be one of {MODES}, got {division!r}")
        if grad not in ("identity", "autograd"):
            raise ValueError(f"grad must be 'identity' or 'autograd', got {grad!r}")
        if grad == "identity" and division == "log_ratio":
            raise ValueError("division='log_ratio' needs grad='autograd'")
        if not isinstance(skip, bool):
            raise TypeError(f"skip must be a bool, got {type(skip).__name__}")
        self.dim, self.num_ladders, self.depth = dim, num_ladders, depth
        self.gate_position, self.activation = gate, activation
        self.gate = nn.Linear(dim, dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.out.residual_projection = True
        self.linear = nn.Linear(dim, dim, bias=False) if skip else None
        if tail_offset is not None:
            _finite("tail_offset", tail_offset)
        self.ladders = _Ladders(dim, num_ladders, depth, init_std, division, grad, eps, tail_offset)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.dim)
        pre = self.gate(x)
        g = F.silu(pre) if self.activation == "silu" else torch.sigmoid(pre)
        u = g * x if self.gate_position in ("input", "both") else x
        c = self.ladders(u)
        y = self.out(g * c if self.gate_position in ("output", "both") else c)
        return y + self.linear(x) if self.linear is not None else y


class DyadicSchedule:
    """CoFrGeNet's incremental ("dyadic") depth schedule, as a training-loop callback.

    Depth column ``i`` (1-based) of every ladder is frozen until step ``total_steps * (1 - 2^-i)``: the linear
    parts train alone first, depth 1 joins at 50% of training, depth 2 at 75%, and so on. Frozen columns get no
    gradient (the forward pass detaches them) and, after every optimizer step, are restored to their values, so
    AdamW's decoupled weight decay cannot move them either.
    """

    def __init__(self, total_steps: int) -> None:
        self.total_steps = _positive_int("total_steps", total_steps)
        self._frozen: dict[int, torch.Tensor] = {}

    def active_depth(self, step: int, depth: int) -> int:
        """Trainable depth columns at ``step`` (0-based): the largest i with ``step >= S (1 - 2^-i)``."""
        active = 0
        for i in range(1, depth + 1):
            if step >= self.total_steps * (1.0 - 2.0**-i):
                active = i
        return active

    def _ladders(self, model: nn.Module) -> list[_Ladders]:
        return [m for m in model.modules() if isinstance(m, _Ladders)]

    def on_backward(self, step: int, model: nn.Module) -> None:
        # called after backward: set the depth for the *next* forward and snapshot the columns still frozen
        for lad in self._ladders(model):
            active = self.active_depth(step + 1, lad.depth)
            self._frozen[id(lad)] = lad.weight.detach()[self.active_depth(step, lad.depth) :].clone()
            lad.trainable_depth.fill_(active)

    def on_step_end(self, step: int, model: nn.Module) -> None:
        with torch.no_grad():
            for lad in self._ladders(model):
                frozen = self._frozen.pop(id(lad), None)
                if frozen is not None and frozen.shape[0]:
                    lad.weight[lad.depth - frozen.shape[0] :].copy_(frozen)

    def start(self, model: nn.Module) -> None:
        """Freeze for step 0 (:func:`~neurips26.lm.train` calls it before the first step; call it yourself in a
        training loop of your own)."""
        for lad in self._ladders(model):
            lad.trainable_depth.fill_(self.active_depth(0, lad.depth))

    def finish(self, model: nn.Module) -> None:
        """Unfreeze everything (``train`` calls it after the last step)."""
        for lad in self._ladders(model):
            lad.trainable_depth.fill_(lad.depth)


def _cffn(config: GPTConfig, layer: int, **kwargs: Any) -> nn.Module:
    return Cffn(config.d_model, **kwargs)


def _gated(config: GPTConfig, layer: int, **kwargs: Any) -> nn.Module:
    return GatedCFFN(config.d_model, **kwargs)


register_ffn("cffn", _cffn, overwrite=True)
register_ffn("gated_cf", _gated, overwrite=True)
