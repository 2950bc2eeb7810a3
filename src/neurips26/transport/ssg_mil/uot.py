"""Entropic unbalanced optimal transport in the log domain (batched, torch) and the retained mass.

Chizat, Peyre, Schmitzer, Vialard (2018), "Scaling algorithms for unbalanced optimal transport problems". For a
source measure ``a`` (n points), a target measure ``b`` (s points) and a cost ``C``, the plan solves

    min_P  <C, P> + eps KL(P | a b^T) + rho KL(P 1 | a) + rho KL(P^T 1 | b),

the objective of POT's ``ot.unbalanced.sinkhorn_unbalanced(a, b, C, reg=eps, reg_m=rho)``. The plan is
``P_ij = a_i b_j exp((f_i + g_j - C_ij) / eps)`` and the dual potentials follow the damped Sinkhorn updates

    f_i = -tau eps log sum_j b_j exp((g_j - C_ij) / eps),    tau = rho / (rho + eps),
    g_j = -tau eps log sum_i a_i exp((f_i - C_ij) / eps),

(``tau = 1`` for balanced OT, ``rho = inf``). Working with log-sum-exp avoids the underflow of ``exp(-C/eps)`` at
small ``eps``. The retained mass ``r_i = (P 1)_i / a_i`` is the mass the plan transports from instance ``i``
relative to its own; with a finite ``rho`` mass whose cheapest destination is expensive is destroyed, so ``r_i``
falls towards 0 for instances that match nothing in the target, and it rises above 1 for instances that many
target points want (the target marginal is relaxed too).
"""

from __future__ import annotations

import math

import torch

__all__ = ["unbalanced_sinkhorn_log", "retained_mass"]


def _check_params(eps: float, rho: float, n_iter: int) -> None:
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite float > 0, got {eps!r}")
    if not (isinstance(rho, (int, float)) and rho > 0 and not math.isnan(rho)):
        raise ValueError(f"rho must be a float in (0, inf], got {rho!r}")
    if not (isinstance(n_iter, int) and n_iter >= 1):
        raise ValueError(f"n_iter must be an integer >= 1, got {n_iter!r}")


def _as_tensor(x, name: str) -> torch.Tensor:
    t = torch.as_tensor(x)
    if not torch.is_floating_point(t):
        t = t.to(torch.get_default_dtype())
    if t.numel() and not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite")
    return t


def unbalanced_sinkhorn_log(
    a,
    b,
    C,
    eps: float = 0.05,
    rho: float = 0.5,
    n_iter: int = 100,
    tol: float = 1e-6,
    log: bool = False,
    method: str = "log",
):
    """Entropic unbalanced OT plan, computed with log-domain Sinkhorn iterations.

    Parameters
    ----------
    a : (..., n) non-negative source masses; zero entries are padding (their rows of the plan are zero).
    b : (..., s) non-negative target masses; zero entries are padding.
    C : (..., n, s) finite cost matrix; leading dimensions are a batch of independent problems.
    eps : entropic regularisation (POT's ``reg``), > 0.
    rho : KL marginal relaxation (POT's ``reg_m``), in (0, inf]; ``inf`` gives balanced OT.
    n_iter : maximal number of Sinkhorn iterations.
    tol : stop when the potentials move less than ``tol * eps`` (sup norm).
    log : also return ``{"f", "g", "n_iter"}`` (the dual potentials).
    method : ``"log"`` (log-sum-exp updates, safe at any ``eps``) or ``"scaling"`` (the same updates on
        ``u = exp(f / eps)``, ``v = exp(g / eps)`` with batched matrix products: an order of magnitude faster,
        valid while ``max C / eps <= 300``, checked, else ValueError; computed in float32 when ``C`` is float32
        and ``max C / eps <= 80``, in float64 otherwise).

    Returns
    -------
    P : (..., n, s) transport plan (same dtype as ``C``).
    """
    _check_params(eps, rho, n_iter)
    C = _as_tensor(C, "C")
    a = _as_tensor(a, "a").to(C.dtype)
    b = _as_tensor(b, "b").to(C.dtype)
    if C.ndim < 2:
        raise ValueError(f"C must have at least 2 dimensions (..., n, s), got shape {tuple(C.shape)}")
    if a.shape != C.shape[:-1] or b.shape != C.shape[:-2] + C.shape[-1:]:
        raise ValueError(
            f"a must have shape {tuple(C.shape[:-1])} and b shape {tuple(C.shape[:-2] + C.shape[-1:])}; "
            f"got a {tuple(a.shape)}, b {tuple(b.shape)}"
        )
    if (a < 0).any() or (b < 0).any():
        raise ValueError("a and b must be non-negative masses")
    if method not in ("log", "scaling"):
        raise ValueError(f"method must be 'log' or 'scaling', got {method!r}")
    return _plan(a, b, C, eps, rho, n_iter, tol, log, method)


def _plan(a, b, C, eps, rho, n_iter, tol, log, method):
    """The Sinkhorn iterations of :func:`unbalanced_sinkhorn_log` on validated tensors."""
    tau = 1.0 if math.isinf(rho) else rho / (rho + eps)
    if method == "scaling":
        return _sinkhorn_scaling(a, b, C, eps, tau, n_iter, tol, log)
    log_a, log_b = torch.log(a), torch.log(b)  # -inf on padding
    Ce = C / eps
    f = torch.zeros_like(a)
    g = torch.zeros_like(b)
    floor = torch.finfo(C.dtype).min / 4  # keeps an all-padding side finite (its plan is zero anyway)
    live = a > 0
    it = 0
    for _ in range(n_iter):
        it += 1
        f_prev = f
        lse = torch.logsumexp(log_b.unsqueeze(-2) + g.unsqueeze(-2) / eps - Ce, dim=-1).clamp_min(floor)
        f = -tau * eps * lse
        lse = torch.logsumexp(log_a.unsqueeze(-1) + f.unsqueeze(-1) / eps - Ce, dim=-2).clamp_min(floor)
        g = -tau * eps * lse
        if tol > 0 and (not live.any() or (f - f_prev)[live].abs().max().item() <= tol * eps):
            break
    P = torch.exp(log_a.unsqueeze(-1) + log_b.unsqueeze(-2) + (f.unsqueeze(-1) + g.unsqueeze(-2)) / eps - Ce)
    if log:
        return P, {"f": f, "g": g, "n_iter": it}
    return P


def _sinkhorn_scaling(a, b, C, eps, tau, n_iter, tol, log):
    """Scaling-form iterations ``u = (1 / K(b v))^tau``, ``v = (1 / K^T(a u))^tau`` with ``K = exp(-C / eps)``."""
    spread = float(C.abs().max()) / eps if C.numel() else 0.0
    if spread > 300.0:
        raise ValueError("method='scaling' needs max |C| / eps <= 300; use method='log'")
    dtype = C.dtype
    # float32 keeps exp(-C / eps) a normal number up to C / eps = 80 and halves the memory traffic of the
    # (bandwidth-bound) products; anything else runs in float64
    work = torch.float32 if dtype == torch.float32 and spread <= 80.0 else torch.float64
    a64, b64 = a.to(work), b.to(work)
    K = torch.exp(-C.to(work) / eps)
    # the masses folded into the kernels: two batched row-vector products per iteration, nothing else
    KbT = (K * b64.unsqueeze(-2)).transpose(-1, -2).contiguous()  # (..., s, n)
    Ka = K * a64.unsqueeze(-1)  # (..., n, s)
    floor = torch.finfo(work).tiny
    u = torch.ones_like(a64)
    v = torch.ones_like(b64)
    live = a64 > 0
    it = 0
    for _ in range(n_iter):
        it += 1
        u_prev = u
        u = (v.unsqueeze(-2) @ KbT).squeeze(-2).clamp_min(floor).pow(-tau)
        v = (u.unsqueeze(-2) @ Ka).squeeze(-2).clamp_min(floor).pow(-tau)
        if tol > 0 and it % 5 == 0 and (not live.any() or (torch.log(u / u_prev))[live].abs().max() <= tol):
            break
    P = (Ka * u.unsqueeze(-1) * (b64 * v).unsqueeze(-2)).to(dtype)
    if log:
        return P, {"f": (eps * torch.log(u)).to(dtype), "g": (eps * torch.log(v)).to(dtype), "n_iter": it}
    return P


def retained_mass(P, a, clip: bool = False) -> torch.Tensor:
    """Retained mass ``r_i = (P 1)_i / a_i`` of every source point (0 on padding, where ``a_i = 0``).

    With both marginals KL-relaxed, ``r_i`` exceeds 1 when the target's demand pulls extra mass onto point ``i``
    (many cheap target points); at the Sinkhorn fixed point ``r_i = exp(-f_i / rho)``. ``clip=True`` caps it at 1
    (mass *kept*, not created); the grounding contrast of SSG needs the unclipped value, because capping makes
    ``r+ - r-`` vanish exactly for the instances both supports want.
    """
    P = _as_tensor(P, "P")
    a = _as_tensor(a, "a").to(P.dtype)
    if P.shape[:-1] != a.shape:
        raise ValueError(f"a must have shape {tuple(P.shape[:-1])}, got {tuple(a.shape)}")
    row = P.sum(-1)
    r = torch.where(a > 0, row / a.clamp_min(torch.finfo(P.dtype).tiny), torch.zeros_like(row))
    return r.clamp(0.0, 1.0) if clip else r
