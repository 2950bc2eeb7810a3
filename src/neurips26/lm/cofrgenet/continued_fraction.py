"""Continued fractions through continuants, evaluated directly or in log space (CoFrGeNet's non-linearity).

A continued fraction of depth ``d`` with partial denominators ``a_1 .. a_d`` (along axis ``dim`` of ``a``) is

    f(a) = 1 / (a_1 + 1 / (a_2 + ... + 1 / a_d)).

Continuants, built bottom-up: ``K_0 = 1``, ``K_1 = a_d``, ``K_k = a_{d-k+1} K_{k-1} + K_{k-2}``; ``K_k`` is the
continuant of the last ``k`` denominators and ``f = K_{d-1} / K_d`` (one division for any depth). CoFrGeNet's
Proposition 1 gives every partial derivative from the same continuants:

    df / da_k = (-1)^k (K_{d-k} / K_d)^2.

Division modes of :func:`continued_fraction`:

- ``"direct"``: the ratio of continuants, with the pole guard ``K_d <- sign(K_d) max(|K_d|, eps)``;
- ``"log"`` (the follow-up's reconstructed log/exp evaluation): each continuant is carried as a sign and a
  log-magnitude ``l_k = log|K_k|`` (a signed log-sum-exp, in the factored form of :func:`_log_recursion`), then
  ``f = s_{d-1} s_d exp(l_{d-1} - max(l_d, log eps))``; continuants can then neither overflow nor underflow
  (``|K_d|`` grows like the product of the ``|a|``), and an exact cancellation gets a floored log-magnitude;
- ``"log_ratio"``: the cheaper variant, continuants computed directly, only the final ratio in log space.

``grad="identity"`` uses Proposition 1 as a custom backward: from the continuants for ``"direct"`` (as the
predecessor does), from their log-magnitudes for ``"log"`` (``(K_{d-k}/K_d)^2 = exp(2 (l_{d-k} - l_d))``, so the
gradient never forms a continuant either); ``grad="autograd"`` differentiates the forward computation.

Layout: ``dim=0`` (depth first, contiguous) makes every level a contiguous slice, which is what the blocks use.
"""

from __future__ import annotations

import math

import torch

__all__ = ["continuant", "continuants", "continued_fraction", "fraction_gradient", "nested_fraction"]

MODES = ("direct", "log", "log_ratio")
_TINY = 1e-30  # floor of |K| (and |a|) in log space


def _depth_first(a: torch.Tensor, dim: int) -> torch.Tensor:
    """``a`` with the depth axis moved to the front (a view), after validating it."""
    if not isinstance(a, torch.Tensor) or not a.dtype.is_floating_point:
        raise TypeError("a must be a floating-point tensor of partial denominators")
    if isinstance(dim, bool) or not isinstance(dim, int) or not -a.ndim <= dim < max(a.ndim, 1):
        raise ValueError(f"dim must be an axis of a (ndim {a.ndim}), got {dim!r}")
    if a.ndim < 1 or a.shape[dim] < 1:
        raise ValueError(f"a must have depth >= 1 along dim {dim}, got shape {tuple(a.shape)}")
    return a.movedim(dim, 0)


def _check_eps(eps: float) -> None:
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and eps > 0 and math.isfinite(eps)):
        raise ValueError(f"eps must be a positive number, got {eps!r}")


def _continuants(A: torch.Tensor) -> list[torch.Tensor]:
    d = A.shape[0]
    K = [torch.ones_like(A[0]), A[d - 1]]
    for k in range(2, d + 1):
        K.append(torch.addcmul(K[k - 2], A[d - k], K[k - 1]))
    return K


def continuants(a: torch.Tensor, dim: int = -1) -> list[torch.Tensor]:
    """``[K_0, K_1, ..., K_d]`` along ``dim`` (``K_k``: continuant of the last ``k`` denominators)."""
    return _continuants(_depth_first(a, dim))


def continuant(a: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The continuant ``K(a_1, ..., a_d)`` along ``dim`` (the denominator of the continued fraction)."""
    return continuants(a, dim)[-1]


def nested_fraction(a: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``1 / (a_1 + 1 / (a_2 + ... + 1 / a_d))`` evaluated literally from the inside out (a test oracle)."""
    A = _depth_first(a, dim)
    value = A[-1]
    for k in range(A.shape[0] - 2, -1, -1):
        value = A[k] + 1.0 / value
    return 1.0 / value


def _guard(K_d: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.copysign(K_d.abs().clamp_min(eps), torch.where(K_d == 0, 1.0, K_d))  # sign(0) = +1


def fraction_gradient(a: torch.Tensor, eps: float = 0.0, dim: int = -1) -> torch.Tensor:
    """Proposition 1: ``df/da_k = (-1)^k (K_{d-k} / K_d)^2`` for every k (same shape as ``a``).

    ``eps > 0`` applies the pole guard to ``K_d`` as the forward pass does.
    """
    K = continuants(a, dim)
    d = len(K) - 1
    K_d = _guard(K[d], eps) if eps > 0 else K[d]
    inv_sq = K_d.reciprocal().square()
    grads = [((-1.0) ** k) * K[d - k].square() * inv_sq for k in range(1, d + 1)]
    return torch.stack(grads, dim=0).movedim(0, dim)


class _IdentityGradFraction(torch.autograd.Function):
    """Direct division whose backward is Proposition 1 (one division for all depths). Input depth-first."""

    @staticmethod
    def forward(ctx, A: torch.Tensor, eps: float) -> torch.Tensor:  # type: ignore[override]
        K = _continuants(A)
        d = A.shape[0]
        K_d = _guard(K[d], eps)
        ctx.save_for_backward(*K[:d], K_d)
        return K[d - 1] / K_d

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        *K, K_d = ctx.saved_tensors
        d = len(K)
        scale = K_d.reciprocal().square_().mul_(grad_out)
        out = torch.empty((d, *grad_out.shape), dtype=grad_out.dtype, device=grad_out.device)
        for k in range(1, d + 1):
            g = torch.mul(K[d - k], K[d - k], out=out[k - 1]).mul_(scale)
            if k % 2:
                g.neg_()
        return out, None


class _LogAbs(torch.autograd.Function):
    """``log max(|u|, floor)`` whose derivative is ``1 / u`` also below the floor (``1 / (+-floor)`` there; sign(0)
    = +1), so that plain autograd through the log path gives the true derivative at an exactly zero (or
    sub-floor) denominator instead of the clamp's 0."""

    @staticmethod
    def forward(ctx, u: torch.Tensor, floor: float) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(u)
        ctx.floor = floor
        return u.abs().clamp_min(floor).log()

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        (u,) = ctx.saved_tensors
        floored = torch.copysign(u.abs().clamp_min(ctx.floor), torch.where(u == 0, 1.0, u))
        return grad_out / floored, None


def _floor(t: torch.Tensor) -> float:
    """Floor of |K| and |a| in log space: 1e-30, or eps^2 of a narrower dtype (so that 1 / floor^2, which a
    derivative at a zero denominator meets, stays finite: float32 1.4e-14)."""
    return max(_TINY, torch.finfo(t.dtype).eps ** 2)


def _log_abs(u: torch.Tensor, floor: float) -> torch.Tensor:
    if u.requires_grad and torch.is_grad_enabled():
        return _LogAbs.apply(u, floor)
    return u.abs().clamp_min(floor).log()


def _log_recursion(A: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The last level's ``a_1 + r`` (its sign is that of ``K_{d-1} K_d``) and ``[l_0, ..., l_d]``, ``l_k = log|K_k|``.

    Signed log-sum-exp in factored form: ``l_k = log|a K_{k-1} + K_{k-2}| = l_{k-1} + log|a + r_{k-1}|`` with the
    signed ratio ``r_{k-1} = K_{k-2} / K_{k-1} = +-exp(l_{k-2} - l_{k-1})``, carried as ``r_k = +-exp(-log|a +
    r_{k-1}|)``: every division is an exp of a negated log. An exact cancellation (``a + r = 0``) is floored at
    ``|.| = 1e-30`` (float64; float32: 1.4e-14), with the true derivative ``1/u`` kept below the floor; ``r`` is then large and the next level's continuant is dominated by ``K_{k-2}``, as it is
    exactly.
    """
    d = A.shape[0]
    floor = _floor(A)
    u = A[d - 1]  # K_1 = a_d, K_0 = 1
    lam = _log_abs(u, floor)
    logs = [torch.zeros_like(lam), lam]
    for k in range(2, d + 1):
        u = A[d - k] + torch.copysign(torch.exp(-lam), u)
        lam = _log_abs(u, floor)
        logs.append(logs[-1] + lam)
    return u, logs


def _log_fraction(A: torch.Tensor, eps: float) -> torch.Tensor:
    u, logs = _log_recursion(A)
    return torch.copysign(torch.exp(logs[-2] - logs[-1].clamp_min(math.log(eps))), u)


class _IdentityGradLogFraction(torch.autograd.Function):
    """Log-space evaluation whose backward is Proposition 1 in log space:
    ``df/da_k = (-1)^k exp(2 (l_{d-k} - max(l_d, log eps)))`` (no continuant is ever formed). Input depth-first."""

    @staticmethod
    def forward(ctx, A: torch.Tensor, eps: float) -> torch.Tensor:  # type: ignore[override]
        u, logs = _log_recursion(A)
        d = A.shape[0]
        l_d = logs[d].clamp_min(math.log(eps))
        ctx.save_for_backward(*logs[:d], l_d)
        return torch.copysign(torch.exp(logs[d - 1] - l_d), u)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        *logs, l_d = ctx.saved_tensors
        d = len(logs)
        out = torch.empty((d, *grad_out.shape), dtype=grad_out.dtype, device=grad_out.device)
        for k in range(1, d + 1):
            g = torch.sub(logs[d - k], l_d, out=out[k - 1]).mul_(2.0).exp_().mul_(grad_out)
            if k % 2:
                g.neg_()
        return out, None


def continued_fraction(
    a: torch.Tensor, mode: str = "direct", eps: float = 0.01, grad: str = "autograd", dim: int = -1
) -> torch.Tensor:
    """``f(a) = 1/(a_1 + 1/(a_2 + ... + 1/a_d))`` along axis ``dim`` of ``a`` (see the module docstring).

    Parameters
    ----------
    a : partial denominators, depth d >= 1 along ``dim``; the result drops that axis.
    mode : ``"direct"``, ``"log"`` or ``"log_ratio"``.
    eps : pole guard on ``|K_d|`` (0.01 in CoFrGeNet).
    grad : ``"autograd"`` or ``"identity"`` (Proposition 1 as the backward; ``"direct"`` and ``"log"`` modes).
    dim : the depth axis (``0``, depth first, is the fastest layout).
    """
    A = _depth_first(a, dim)
    _check_eps(eps)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if grad not in ("autograd", "identity"):
        raise ValueError(f"grad must be 'autograd' or 'identity', got {grad!r}")
    if grad == "identity":
        if mode == "log_ratio":
            raise ValueError("grad='identity' (Proposition 1) applies to mode='direct' or 'log'")
        fn = _IdentityGradFraction if mode == "direct" else _IdentityGradLogFraction
        return fn.apply(A, float(eps))
    if mode == "direct":
        K = _continuants(A)
        return K[-2] / _guard(K[-1], eps)
    if mode == "log_ratio":
        K = _continuants(A)
        floor = _floor(A)
        log_num, log_den = _log_abs(K[-2], floor), _log_abs(K[-1], floor)
        return torch.copysign(torch.exp(log_num - log_den.clamp_min(math.log(eps))), K[-2] * K[-1])
    return _log_fraction(A, eps)
